package kubeletapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/leafnode"
	"github.com/leafsync/leafsync/internal/syncer/clusters"
	"github.com/leafsync/leafsync/internal/syncer/member"
	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
	"github.com/leafsync/leafsync/internal/syncer/registration"
)

type fakeMembers struct {
	m  clusters.Member
	st hysteresis.Status
}

func (f fakeMembers) Member(cluster string) (clusters.Member, bool) {
	return f.m, cluster == f.m.Cluster()
}

func (f fakeMembers) Hysteresis(cluster string) (hysteresis.Status, bool) {
	return f.st, cluster == f.m.Cluster()
}

// TestHandlerRefuses: every refusal comes before anything reaches a
// member, with the status a kubelet would give and a message that says why.
func TestHandlerRefuses(t *testing.T) {
	leaf := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "leaf-a", Labels: map[string]string{leafnode.LabelCluster: "a"}}}
	worker := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker"}}
	nodes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, n := range []*corev1.Node{leaf, worker} {
		if err := nodes.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	pod := func(name, node string, synced bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)}, Spec: corev1.PodSpec{NodeName: node}}
		if synced {
			p.Annotations = map[string]string{podmeta.AnnotationMemberUID: "m-1"}
		}
		return p
	}
	host := fake.NewClientset(pod("synced", "leaf-a", true), pod("unsynced", "leaf-a", false), pod("on-worker", "worker", true))
	rt, err := member.New(member.Options{Cluster: "a", RESTConfig: &rest.Config{Host: "https://127.0.0.1:1"}, Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	m := clusters.Member{Spec: &registration.Spec{Cluster: "a"}, Runtime: rt}
	authn := authenticator.RequestFunc(func(r *http.Request) (*authenticator.Response, bool, error) {
		name := r.Header.Get("X-Test-User")
		if name == "" {
			return nil, false, nil
		}
		return &authenticator.Response{User: &user.DefaultInfo{Name: name}}, true, nil
	})
	var asked []authorizer.Attributes
	authz := authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		asked = append(asked, a)
		// The API server may proxy to every node ("" in a check), carol
		// only to leaf-a.
		allowed := map[string][]string{"apiserver": {"", "leaf-a"}, "carol": {"leaf-a"}}[a.GetUser().GetName()]
		if a.GetResource() == "nodes" && a.GetSubresource() == "proxy" && slices.Contains(allowed, a.GetName()) {
			return authorizer.DecisionAllow, "", nil
		}
		return authorizer.DecisionNoOpinion, "no RBAC rule", nil
	})
	serve := func(st hysteresis.Status, userName, path string) (int, string) {
		s, err := New(Options{Host: host, Leaves: corelisters.NewNodeLister(nodes), Members: fakeMembers{m: m, st: st}, BindAddress: ":0"})
		if err != nil {
			t.Fatal(err)
		}
		h := &handler{s: s, authn: authn, authz: authz}
		req := httptest.NewRequest(http.MethodGet, path, nil)
		if userName != "" {
			req.Header.Set("X-Test-User", userName)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code, w.Body.String()
	}
	ready := hysteresis.Status{State: hysteresis.Ready}
	down := hysteresis.Status{State: hysteresis.NotReady, Since: time.Unix(0, 0), Detail: "dial tcp: connection refused"}
	cases := []struct {
		name, user, path string
		st               hysteresis.Status
		code             int
		says             string
	}{
		{"no credentials", "", "/containerLogs/ns/synced/app", ready, 401, "Unauthorized"},
		{"not a kubelet path", "apiserver", "/run/ns/synced/app", ready, 404, "unsupported"},
		{"no such pod", "apiserver", "/containerLogs/ns/nope/app", ready, 404, "not found"},
		{"pod on an ordinary node", "apiserver", "/exec/ns/on-worker/app?command=true", ready, 404, "not on a leaf"},
		// One address serves every leaf: a user not allowed on every node
		// learns nothing of pods it may not reach.
		{"no such pod, no nodes/proxy", "alice", "/containerLogs/ns/nope/app", ready, 403, "user=alice, verb=get, resource=nodes, subresource=proxy)"},
		{"pod on an ordinary node, no nodes/proxy", "carol", "/exec/ns/on-worker/app?command=true", ready, 403, "user=carol, verb=create"},
		{"allowed on the pod's leaf only", "carol", "/containerLogs/ns/unsynced/app", ready, 404, "not synced"},
		{"no nodes/proxy on the leaf", "alice", "/containerLogs/ns/synced/app", ready, 403, "user=alice, verb=get, resource=nodes, subresource=proxy, name=leaf-a"},
		{"exec needs create", "alice", "/exec/ns/synced/app?command=true", ready, 403, "verb=create"},
		{"another pod of that name", "apiserver", "/exec/ns/synced/other-uid/app", ready, 404, "has UID"},
		{"not synced", "apiserver", "/containerLogs/ns/unsynced/app", ready, 404, "not synced"},
		{"member confirmed down", "apiserver", "/containerLogs/ns/synced/app", down, 502, "member cluster a is unreachable (NotReady since 1970-01-01T00:00:00Z): dial tcp: connection refused"},
		{"no member pod", "apiserver", "/portForward/ns/synced", ready, 404, "no member pod"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, body := serve(c.st, c.user, c.path)
			if code != c.code || !strings.Contains(body, c.says) {
				t.Errorf("%s: %d %q; want %d with %q", c.path, code, body, c.code, c.says)
			}
		})
	}
	for _, a := range asked {
		if a.GetResource() != "nodes" || a.GetSubresource() != "proxy" || (a.GetName() != "leaf-a" && a.GetName() != "") {
			t.Errorf("authorised %+v: want nodes/proxy on leaf-a or every node", a)
		}
	}
}
