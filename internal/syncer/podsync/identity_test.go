package podsync

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/syncer/podsync/deletes"
)

func withOwner(p *corev1.Pod, kind string) *corev1.Pod {
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: "web", UID: "owner-uid", Controller: ptr.To(true)}}
	return p
}

// A new host pod with a stable identity is not created in its member while
// another member (not confirmed down) holds a copy of its name; other pods
// are created as before.
func TestCreationHeldForOldCopy(t *testing.T) {
	held := []otherCopy{{Cluster: "member-b", HostUID: "h0"}}
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
			p := decide(in)
			if !c.held {
				wantActions(t, p, addFinalizer, createMember)
				return
			}
			wantActions(t, p, event)
			if a, _ := p.Get(event); a.Reason != reasonWaitingForOldCopy {
				t.Errorf("event reason %s", a.Reason)
			}
			if p.Result.RequeueAfter != replacementPoll {
				t.Errorf("requeue %s, want %s", p.Result.RequeueAfter, replacementPoll)
			}
			in.OtherCopies = nil
			wantActions(t, decide(in), addFinalizer, createMember)
		})
	}
	t.Run("a member that cannot be read holds it too", func(t *testing.T) {
		in := newInput(hysteresis.Ready, hostPod("h1"), nil)
		in.OtherCopies = []otherCopy{{Cluster: "member-b", Err: "timeout"}}
		wantActions(t, decide(in), event)
	})
}

// The old copy of a stable identity whose new host pod is bound to another
// node is deleted at once, without waiting for that pod to be Ready; a
// Deployment's keeps DeferUntilReplaced, Retain keeps it.
func TestOldCopyDeletedWhenIdentityMoves(t *testing.T) {
	mp := memberOf(hostPod("h1"), "m1")
	deferred := owed(CauseTaintManager)
	deferred.Kind, deferred.Since = deletes.Deferred, t0.Add(-time.Second)
	moved := map[string]string{"h1": "leaf-member-b"}
	for _, r := range []deletes.PendingDelete{deferred, owed(CauseTaintManager), owed(causePodGC)} {
		in := newInput(hysteresis.Ready, nil, mp, r)
		in.IdentityMoved = moved
		p := decide(in)
		wantActions(t, p, deleteMember)
		if a, _ := p.Get(deleteMember); a.Reason != reasonOldCopyDeleted || a.MemberUID != "m1" || a.HostUID != "h1" {
			t.Errorf("%s record: delete %+v", r.Kind, a)
		}
	}
	t.Run("not before the name moves", func(t *testing.T) {
		wantActions(t, decide(newInput(hysteresis.Ready, nil, mp, deferred)))
	})
	t.Run("not while the member is not Ready", func(t *testing.T) {
		in := newInput(hysteresis.Suspect, nil, mp, deferred)
		in.IdentityMoved = moved
		wantActions(t, decide(in))
	})
	t.Run("Retain keeps it", func(t *testing.T) {
		r := deferred
		r.Kind = deletes.Retained
		in := newInput(hysteresis.Ready, nil, mp, r)
		in.Policy, in.IdentityMoved = Retain, moved
		wantActions(t, decide(in))
	})
	t.Run("a Deployment's waits for its replacement", func(t *testing.T) {
		hp := withOwner(hostPod("h1"), "ReplicaSet")
		r := deferred
		r.Owner = "ReplicaSet/web"
		in := newInput(hysteresis.Ready, nil, memberOf(hp, "m1"), r)
		in.IdentityMoved = moved
		wantActions(t, decide(in))
	})
}

func TestMovedTo(t *testing.T) {
	r := owed(CauseTaintManager)
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
		if got := movedTo(r, testLeaf, c.pods); got != c.want {
			t.Errorf("movedTo(%v) = %q, want %q", uids, got, c.want)
		}
	}
}
