package decide

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/syncer/podsync/deletes"
	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
)

func withOwner(p *corev1.Pod, kind string) *corev1.Pod {
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: "web", UID: "owner-uid", Controller: ptr.To(true)}}
	return p
}

// A new host pod with a stable identity is not created in its member while
// another member (not confirmed down) holds a copy of its name; other pods
// are created as before.
func TestCreationHeldForOldCopy(t *testing.T) {
	held := []OtherCopy{{Cluster: "member-b", HostUID: "h0"}}
	bare := hostPod("h1")
	bare.OwnerReferences = nil
	bare.Spec.Hostname = "web-0"
	for name, c := range map[string]struct {
		hp   *corev1.Pod
		held bool
	}{
		"StatefulSet":               {hostPod("h1"), true},
		"hostname, no owner":        {bare, true},
		"ReplicaSet":                {withOwner(hostPod("h1"), "ReplicaSet"), false},
		"ReplicaSet with subdomain": {func() *corev1.Pod { p := withOwner(hostPod("h1"), "ReplicaSet"); p.Spec.Subdomain = "web"; return p }(), true},
	} {
		t.Run(name, func(t *testing.T) {
			in := newInput(hysteresis.Ready, c.hp, nil)
			in.OtherCopies = held
			p := Decide(in)
			if !c.held {
				wantActions(t, p, AddFinalizer, CreateMember)
				return
			}
			wantActions(t, p, Event)
			if a, _ := p.Get(Event); a.Reason != reasonWaitingForOldCopy {
				t.Errorf("event reason %s", a.Reason)
			}
			if p.RequeueAfter != replacementPoll {
				t.Errorf("requeue %s, want %s", p.RequeueAfter, replacementPoll)
			}
			in.OtherCopies = nil
			wantActions(t, Decide(in), AddFinalizer, CreateMember)
		})
	}
	t.Run("a member that cannot be read holds it too", func(t *testing.T) {
		in := newInput(hysteresis.Ready, hostPod("h1"), nil)
		in.OtherCopies = []OtherCopy{{Cluster: "member-b", Err: "timeout"}}
		wantActions(t, Decide(in), Event)
	})
}

// The old copy of a stable identity whose new host pod is bound to another
// node is deleted at once, without waiting for that pod to be Ready; a
// Deployment's keeps DeferUntilReplaced, Retain keeps it.
func TestOldCopyDeletedWhenIdentityMoves(t *testing.T) {
	mp := memberOf(hostPod("h1"), "m1")
	deferred := owed(podmeta.CauseTaintManager)
	deferred.Kind, deferred.Since = deletes.Deferred, t0.Add(-time.Second)
	moved := map[string]string{"h1": "leaf-member-b"}
	for _, r := range []deletes.PendingDelete{deferred, owed(podmeta.CauseTaintManager), owed(podmeta.CausePodGC)} {
		in := newInput(hysteresis.Ready, nil, mp, r)
		in.IdentityMoved = moved
		p := Decide(in)
		wantActions(t, p, DeleteMember)
		if a, _ := p.Get(DeleteMember); a.Reason != reasonOldCopyDeleted || a.MemberUID != "m1" || a.HostUID != "h1" {
			t.Errorf("%s record: delete %+v", r.Kind, a)
		}
	}
	t.Run("not before the name moves", func(t *testing.T) {
		wantActions(t, Decide(newInput(hysteresis.Ready, nil, mp, deferred)))
	})
	t.Run("not while the member is not Ready", func(t *testing.T) {
		in := newInput(hysteresis.Suspect, nil, mp, deferred)
		in.IdentityMoved = moved
		wantActions(t, Decide(in))
	})
	t.Run("Retain keeps it", func(t *testing.T) {
		r := deferred
		r.Kind = deletes.Retained
		in := newInput(hysteresis.Ready, nil, mp, r)
		in.Policy, in.IdentityMoved = podmeta.Retain, moved
		wantActions(t, Decide(in))
	})
	t.Run("a Deployment's waits for its replacement", func(t *testing.T) {
		hp := withOwner(hostPod("h1"), "ReplicaSet")
		r := deferred
		r.Owner = "ReplicaSet/web"
		in := newInput(hysteresis.Ready, nil, memberOf(hp, "m1"), r)
		in.IdentityMoved = moved
		wantActions(t, Decide(in))
	})
}

func TestMovedTo(t *testing.T) {
	r := owed(podmeta.CauseTaintManager)
	pod := func(uid, node string) *corev1.Pod {
		p := hostPod(uid)
		p.Spec.NodeName = node
		return p
	}
	terminating := pod("h2", "leaf-member-b")
	terminating.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
	other := pod("h3", "leaf-member-b")
	other.Name = "web-1"
	for _, c := range []struct {
		pods []*corev1.Pod
		want string
	}{
		{nil, ""},
		{[]*corev1.Pod{pod("h1", "leaf-member-b")}, ""}, // the deleted pod itself
		{[]*corev1.Pod{pod("h2", "")}, ""},              // not bound yet: it may land here and adopt
		{[]*corev1.Pod{pod("h2", testLeaf)}, ""},        // here: adopted
		{[]*corev1.Pod{terminating}, ""},
		{[]*corev1.Pod{other}, ""},
		{[]*corev1.Pod{pod("h2", "leaf-member-b")}, "leaf-member-b"},
		{[]*corev1.Pod{pod("h2", "worker-1")}, "worker-1"},
	} {
		var uids []types.UID
		for _, p := range c.pods {
			uids = append(uids, p.UID)
		}
		if got := MovedTo(r, testLeaf, c.pods); got != c.want {
			t.Errorf("movedTo(%v) = %q, want %q", uids, got, c.want)
		}
	}
}
