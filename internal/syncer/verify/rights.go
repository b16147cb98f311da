package verify

import (
	"context"
	"fmt"
	"strings"
	"sync"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Right is one verb on one resource of the member's core API group that
// leafsync uses with the registration's credentials. Namespaced resources
// are checked in all namespaces: pod sync runs host pods in member
// namespaces named after the host's, created on demand, and watches pods
// cluster-wide.
type Right struct {
	Verb     string
	Resource string
	// Subresource, e.g. "log" of pods (empty for the resource itself).
	Subresource string
	// KubeletAPI: needed only while leafsync serves the leaves' kubelet API.
	KubeletAPI bool
	// Why names the caller, for the test that compares this table with
	// the code and for people reading a failure.
	Why string
}

func (r Right) String() string {
	res := r.Resource
	if r.Subresource != "" {
		res += "/" + r.Subresource
	}
	return r.Verb + " " + res
}

// rights is every right leafsync uses in a member, in one table.
// `leafsync register --create-service-account` grants all of them
// (cmd/leafsync's memberRules, compared by a test there).
var rights = []Right{
	{Verb: "get", Resource: "nodes", Why: "member informer (leaf capacity)"},
	{Verb: "list", Resource: "nodes", Why: "member informer (leaf capacity)"},
	{Verb: "watch", Resource: "nodes", Why: "member informer (leaf capacity)"},
	{Verb: "get", Resource: "pods", Why: "podsync: the member pod before a delete or an update"},
	{Verb: "list", Resource: "pods", Why: "member informer (pod status, leaf accounting)"},
	{Verb: "watch", Resource: "pods", Why: "member informer (pod status, leaf accounting)"},
	{Verb: "create", Resource: "pods", Why: "podsync: run a host pod in the member"},
	{Verb: "patch", Resource: "pods", Why: "podsync: a host pod's updates, labels and annotations"},
	{Verb: "delete", Resource: "pods", Why: "podsync: forward a host pod's deletion"},
	{Verb: "update", Resource: "pods", Subresource: "resize", Why: "podsync: in-place resize"},
	{Verb: "update", Resource: "pods", Subresource: "ephemeralcontainers", Why: "podsync: ephemeral containers (kubectl debug)"},
	{Verb: "get", Resource: "namespaces", Why: "podsync: the member namespace of a host pod; the member's identity"},
	{Verb: "create", Resource: "namespaces", Why: "podsync: a member namespace for a host namespace"},
	{Verb: "patch", Resource: "namespaces", Why: "podsync: the Pod Security level of a namespace leafsync created"},
	{Verb: "get", Resource: "configmaps", Why: "reflector: the member copy of a host ConfigMap"},
	{Verb: "list", Resource: "configmaps", Why: "reflector: copies no pod uses any more"},
	{Verb: "create", Resource: "configmaps", Why: "reflector: copy a host ConfigMap"},
	{Verb: "patch", Resource: "configmaps", Why: "reflector: server-side apply of a copy"},
	{Verb: "delete", Resource: "configmaps", Why: "reflector: remove a copy"},
	{Verb: "get", Resource: "secrets", Why: "reflector: the member copy of a host Secret"},
	{Verb: "list", Resource: "secrets", Why: "reflector: copies no pod uses any more"},
	{Verb: "create", Resource: "secrets", Why: "reflector: copy a host Secret"},
	{Verb: "patch", Resource: "secrets", Why: "reflector: server-side apply of a copy"},
	{Verb: "delete", Resource: "secrets", Why: "reflector: remove a copy"},
	{Verb: "get", Resource: "services", Why: "reflector: the member copy of a host Service"},
	{Verb: "list", Resource: "services", Why: "reflector: copies no namespace needs any more"},
	{Verb: "create", Resource: "services", Why: "reflector: copy a host Service"},
	{Verb: "patch", Resource: "services", Why: "reflector: server-side apply of a copy"},
	{Verb: "delete", Resource: "services", Why: "reflector: remove a copy"},
	{Verb: "get", Resource: "pods", Subresource: "log", KubeletAPI: true, Why: "kubeletapi: kubectl logs"},
	{Verb: "create", Resource: "pods", Subresource: "exec", KubeletAPI: true, Why: "kubeletapi: kubectl exec"},
	{Verb: "create", Resource: "pods", Subresource: "attach", KubeletAPI: true, Why: "kubeletapi: kubectl attach"},
	{Verb: "create", Resource: "pods", Subresource: "portforward", KubeletAPI: true, Why: "kubeletapi: kubectl port-forward"},
}

// Rights are the rights a member's credentials need: all of the table, the
// kubelet API's only when kubeletAPI (it is served).
func Rights(kubeletAPI bool) []Right {
	out := make([]Right, 0, len(rights))
	for _, r := range rights {
		if !r.KubeletAPI || kubeletAPI {
			out = append(out, r)
		}
	}
	return out
}

// reviewConcurrency bounds the SelfSubjectAccessReviews in flight to one
// member.
const reviewConcurrency = 8

// checkRights asks the member, as the registration's credentials, whether
// each right is allowed (SelfSubjectAccessReviews, which every
// authenticated user may create).
func checkRights(ctx context.Context, c kubernetes.Interface, want []Right) Result {
	denied := make([]bool, len(want))
	errs := make([]error, len(want))
	sem := make(chan struct{}, reviewConcurrency)
	var wg sync.WaitGroup
	for i, r := range want {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: r.Verb, Resource: r.Resource, Subresource: r.Subresource},
			}}
			got, err := c.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
			if err != nil {
				errs[i] = err
				return
			}
			denied[i] = !got.Status.Allowed
		})
	}
	wg.Wait()
	var lacking []string
	for i, r := range want {
		if errs[i] != nil {
			return Result{Check: CheckRights, Outcome: Inconclusive, Message: fmt.Sprintf("could not review %s: %v", r, errs[i])}
		}
		if denied[i] {
			lacking = append(lacking, r.String())
		}
	}
	if len(lacking) == 0 {
		return Result{Check: CheckRights, Outcome: Passed}
	}
	return Result{Check: CheckRights, Outcome: Failed, Message: fmt.Sprintf(
		"member credentials lack %s in all namespaces: grant them to the registration's user "+
			"(`leafsync register --create-service-account` creates a ServiceAccount with every right leafsync needs; docs/install.md lists them)",
		strings.Join(lacking, ", "))}
}
