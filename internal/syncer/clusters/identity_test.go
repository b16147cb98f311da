package clusters

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/syncer/member/membertest"
	"github.com/leafsync/leafsync/internal/syncer/registration"
)

// First contact records the member's identity and claims the member for
// this host; a kubeconfig that then reaches another cluster is refused
// while the recorded member keeps being served; put back, nothing changed.
func TestMemberIdentityPinned(t *testing.T) {
	e := newEnv(t)
	e.srv.SetIdentity("uid-a")
	e.create("east", "east", e.srv.Kubeconfig("token"), nil, 0)
	e.mustReconcile("east")
	e.eventually("east", "Connected", func() bool { return e.phase("east") == "Connected/MemberConnected" })
	if got := e.get("east").Annotations[registration.AnnotationMemberIdentity]; got != "uid-a" {
		t.Fatalf("recorded identity = %q, want uid-a", got)
	}
	cm := e.srv.ConfigMap(claimNamespace, claimName("east"))
	if cm == nil || cm.Data[claimKeyHost] != testHost || cm.Data[claimKeyCluster] != "east" {
		t.Fatalf("claim = %+v", cm)
	}
	first, _ := e.ctl.Registry().Member("east")

	// Repointed at another cluster (same token).
	other := membertest.NewServer(t, nil, nil)
	other.SetIdentity("uid-b")
	e.update("east", func(s *corev1.Secret) { s.Data[registration.KeyKubeconfig] = other.Kubeconfig("token") })
	e.mustReconcile("east")
	e.eventually("east", "refused", func() bool { return e.phase("east") == "Connected/"+reasonMemberIdentityChanged })
	ev, ok := e.rec.find(reasonMemberIdentityChanged, "east")
	if !ok || !strings.HasPrefix(ev, "Warning") || !strings.Contains(ev, "uid-a") || !strings.Contains(ev, "uid-b") ||
		!strings.Contains(ev, registration.AnnotationMemberIdentity+"-") {
		t.Errorf("event = %q, want a Warning naming both identities and how to confirm", ev)
	}
	e.ticks(5) // several probe intervals: nothing is promoted
	if m, _ := e.ctl.Registry().Member("east"); m.Runtime != first.Runtime || m.Generation != 1 {
		t.Errorf("the refused kubeconfig replaced the runtime: generation %d", m.Generation)
	}
	if other.ConfigMap(claimNamespace, claimName("east")) != nil {
		t.Error("a claim was written into the refused cluster")
	}
	if got := e.get("east").Annotations[registration.AnnotationMemberIdentity]; got != "uid-a" {
		t.Errorf("recorded identity changed to %q", got)
	}

	// Put back: the refusal clears, still the same runtime.
	e.update("east", func(s *corev1.Secret) { s.Data[registration.KeyKubeconfig] = e.srv.Kubeconfig("token") })
	e.eventually("east", "restored", func() bool { return e.phase("east") == "Connected/MemberConnected" })
	if m, _ := e.ctl.Registry().Member("east"); m.Runtime != first.Runtime {
		t.Error("restoring the kubeconfig replaced the runtime")
	}
}

// leafsync starting with a kubeconfig that reaches another cluster than
// the recorded one: the runtime never starts (no member cache, so pod sync
// touches nothing), the engine sees config failures (cordon, never
// NotReady); clearing the annotation confirms the new member.
func TestMemberIdentityMismatchAtStart(t *testing.T) {
	e := newEnv(t)
	e.srv.SetIdentity("uid-b")
	e.create("east", "east", e.srv.Kubeconfig("token"), map[string]string{registration.AnnotationMemberIdentity: "uid-a"}, 0)
	e.mustReconcile("east")
	e.eventually("east", "refused", func() bool { return e.phase("east") == "Refused/"+reasonMemberIdentityChanged })
	m, _ := e.ctl.Registry().Member("east")
	e.ticks(3)
	if m.Runtime.HasSynced() {
		t.Error("the runtime of a refused member started its informers")
	}
	if hs, _ := e.eng.Status("east"); hs.State != hysteresis.Ready || hs.LastObserved.IsZero() {
		t.Errorf("hysteresis = %+v, want Ready with config-failure observations", hs)
	}
	if e.srv.ConfigMap(claimNamespace, claimName("east")) != nil {
		t.Error("a claim was written into the refused cluster")
	}

	e.update("east", func(s *corev1.Secret) { delete(s.Annotations, registration.AnnotationMemberIdentity) })
	e.eventually("east", "confirmed", func() bool { return e.phase("east") == "Connected/MemberConnected" })
	if got := e.get("east").Annotations[registration.AnnotationMemberIdentity]; got != "uid-b" {
		t.Errorf("recorded identity = %q, want uid-b", got)
	}
	if !m.Runtime.WaitForCacheSync(e.ctx) {
		t.Error("caches did not sync after the confirmation")
	}
}

// A member another host claims under the same cluster name is refused.
func TestMemberClaimedByAnotherHost(t *testing.T) {
	e := newEnv(t)
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: claimName("east"), Namespace: claimNamespace},
		Data: map[string]string{claimKeyHost: "other-host", claimKeyCluster: "east"}}
	if _, err := e.srvClient(t).CoreV1().ConfigMaps(claimNamespace).Create(e.ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.create("east", "east", e.srv.Kubeconfig("token"), nil, 0)
	e.mustReconcile("east")
	e.eventually("east", "refused", func() bool { return e.phase("east") == "Refused/"+reasonMemberClaimed })
	if ev, _ := e.rec.find(reasonMemberClaimed, "east"); !strings.Contains(ev, "other-host") || !strings.Contains(ev, claimName("east")) {
		t.Errorf("event = %q, want the other host and the claim named", ev)
	}
	if got := e.get("east").Annotations[registration.AnnotationMemberIdentity]; got != "" {
		t.Errorf("identity %q recorded for a refused member", got)
	}
	if cm := e.srv.ConfigMap(claimNamespace, claimName("east")); cm.Data[claimKeyHost] != "other-host" {
		t.Errorf("the other host's claim was changed: %+v", cm)
	}
}

func (e *env) srvClient(t *testing.T) kubernetes.Interface {
	c, err := kubernetes.NewForConfig(e.srv.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The Secret as a lagging cache returns it: once leafsync has written it
// (the finalizer), one write behind. The first contact's identity is
// recorded at once all the same: its write does not depend on the
// version read, so the registration's own status write cannot make it
// fail and wait a probe interval.
func TestIdentityRecordedFromALaggingCache(t *testing.T) {
	e := newEnv(t, interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if err := c.Get(ctx, key, obj, opts...); err != nil {
			return err
		}
		if s, ok := obj.(*corev1.Secret); ok && controllerutil.ContainsFinalizer(s, registration.Finalizer) {
			rv, err := strconv.Atoi(s.ResourceVersion)
			if err != nil {
				return err
			}
			s.ResourceVersion = strconv.Itoa(rv - 1)
		}
		return nil
	}})
	e.srv.SetIdentity("uid-a")
	e.create("east", "east", e.srv.Kubeconfig("token"), nil, 0)
	e.mustReconcile("east")
	// No clock step: a retry a probe interval later would never come.
	deadline := time.Now().Add(10 * time.Second)
	for e.get("east").Annotations[registration.AnnotationMemberIdentity] != "uid-a" {
		if time.Now().After(deadline) {
			t.Fatalf("identity not recorded without a retry: annotations %v", e.get("east").Annotations)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
