package verify

import (
	"context"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// reviewer answers SelfSubjectAccessReviews: allowed unless denied, or an
// error for every review when fail is set.
func reviewer(denied map[string]bool, fail error) *fake.Clientset {
	c := fake.NewClientset()
	c.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if fail != nil {
			return true, nil, fail
		}
		r := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
		ra := r.Spec.ResourceAttributes
		res := ra.Resource
		if ra.Subresource != "" {
			res += "/" + ra.Subresource
		}
		r.Status.Allowed = ra.Namespace == "" && !denied[ra.Verb+" "+res]
		return true, r, nil
	})
	return c
}

func TestCheckRightsNamesWhatIsMissing(t *testing.T) {
	ctx := context.Background()
	if r := checkRights(ctx, reviewer(nil, nil), Rights(true)); r.Outcome != Passed {
		t.Fatalf("every right granted: %+v", r)
	}
	r := checkRights(ctx, reviewer(map[string]bool{"get pods/log": true}, nil), Rights(false))
	if r.Outcome != Passed {
		t.Fatalf("a kubelet API right missing while the API is off must not fail: %+v", r)
	}
	r = checkRights(ctx, reviewer(map[string]bool{"create pods": true, "get pods/log": true}, nil), Rights(true))
	if r.Outcome != Failed || !strings.Contains(r.Message, "create pods,") || !strings.Contains(r.Message, "get pods/log") {
		t.Fatalf("missing rights not named: %+v", r)
	}
	r = checkRights(ctx, reviewer(nil, context.DeadlineExceeded), Rights(false))
	if r.Outcome != Inconclusive {
		t.Fatalf("a member that does not answer is not a failure: %+v", r)
	}
}

// Every verb pod sync calls on a member is in the table. The calls are
// found by reading the code; this pins the table so that removing a row
// is a conscious change.
func TestRightsTableCoversPodSync(t *testing.T) {
	want := []string{
		"create pods", "delete pods", "get pods", "list pods", "watch pods", "patch pods",
		"update pods/resize", "update pods/ephemeralcontainers",
		"get nodes", "list nodes", "watch nodes",
		"get namespaces", "create namespaces", "patch namespaces",
		"create configmaps", "patch configmaps", "get configmaps", "delete configmaps",
		"create secrets", "patch secrets", "get secrets", "delete secrets",
		"create services", "patch services", "get services", "delete services",
	}
	have := map[string]bool{}
	for _, r := range Rights(false) {
		have[r.String()] = true
	}
	for _, w := range want {
		if !have[w] {
			t.Errorf("the rights table lacks %s", w)
		}
	}
	for _, r := range Rights(true) {
		if r.KubeletAPI && !strings.HasPrefix(r.Resource+"/"+r.Subresource, "pods/") {
			t.Errorf("kubelet API right %s is not a pods subresource", r)
		}
	}
}
