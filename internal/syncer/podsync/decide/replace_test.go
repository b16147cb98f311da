package decide

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/leafsync/leafsync/internal/syncer/podsync/deletes"
	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
)

func ownedPod(name, uid, ownerKind, owner string, created time.Time, ready bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: "apps", UID: types.UID(uid), CreationTimestamp: metav1.NewTime(created),
		OwnerReferences: []metav1.OwnerReference{{Kind: ownerKind, Name: owner, Controller: ptr.To(true)}},
	}}
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
	return p
}

func deferred(name, uid, owner string, deletedAt time.Time) deletes.PendingDelete {
	return deletes.PendingDelete{Kind: deletes.Deferred, Namespace: "apps", Name: name, HostUID: uid, Owner: owner,
		Cause: podmeta.CauseTaintManager, Since: t0, HostDeletedAt: deletedAt}
}

func choose(t *testing.T, r deletes.PendingDelete, taken []string, pods []*corev1.Pod, wantUID string, wantReady bool) {
	t.Helper()
	tk := map[string]bool{}
	for _, u := range taken {
		tk[u] = true
	}
	uid, ready := chooseReplacement(r, tk, map[string]bool{r.HostUID: true}, pods)
	if uid != wantUID || ready != wantReady {
		t.Errorf("chooseReplacement(%s) = %q ready=%v, want %q ready=%v", r.Name, uid, ready, wantUID, wantReady)
	}
}

func TestReplacementStatefulSet(t *testing.T) {
	pods := []*corev1.Pod{
		ownedPod("web-0", "new0", "StatefulSet", "web", t0.Add(time.Minute), true),
		ownedPod("web-1", "new1", "StatefulSet", "web", t0.Add(time.Minute), false),
		ownedPod("web-2", "x", "StatefulSet", "other", t0.Add(time.Minute), true),
	}
	choose(t, deferred("web-0", "old0", "StatefulSet/web", t0), nil, pods, "new0", true)
	choose(t, deferred("web-1", "old1", "StatefulSet/web", t0), nil, pods, "new1", false)
	// The same name under another owner is not a replacement.
	choose(t, deferred("web-2", "old2", "StatefulSet/web", t0), nil, pods, "", false)
}

// TestReplacementOneToOne replays what the e2e test caught: three pods of a
// ReplicaSet evicted together, two replacements Ready, one not. The first
// two deletes are resolved and their records dropped; the third must keep
// waiting for its own replacement, not take one of theirs.
func TestReplacementOneToOne(t *testing.T) {
	const rs = "ReplicaSet/web-5d8"
	pods := []*corev1.Pod{
		// A replica that was there before the evictions is nobody's replacement.
		ownedPod("web-5d8-kept", "kept", "ReplicaSet", "web-5d8", t0.Add(-time.Hour), true),
		ownedPod("web-5d8-x", "x", "ReplicaSet", "web-5d8", t0.Add(500*time.Millisecond), false),
		ownedPod("web-5d8-y", "y", "ReplicaSet", "web-5d8", t0.Add(600*time.Millisecond), false),
		ownedPod("web-5d8-z", "z", "ReplicaSet", "web-5d8", t0.Add(700*time.Millisecond), false),
		// Another owner's pod.
		ownedPod("api-1", "api", "ReplicaSet", "api-7c", t0.Add(time.Second), true),
	}
	a, b, c := deferred("web-5d8-a", "old-a", rs, t0), deferred("web-5d8-b", "old-b", rs, t0), deferred("web-5d8-c", "old-c", rs, t0)
	// Assigned in turn as the deletes are deferred (nothing Ready yet).
	choose(t, a, nil, pods, "x", false)
	a.Replacement = "x"
	choose(t, b, []string{"x"}, pods, "y", false)
	b.Replacement = "y"
	choose(t, c, []string{"x", "y"}, pods, "z", false)
	c.Replacement = "z"
	// x and y become Ready: a and b are resolved, their records dropped.
	pods[1].Status.Conditions[0].Status = corev1.ConditionTrue
	pods[2].Status.Conditions[0].Status = corev1.ConditionTrue
	choose(t, a, []string{"y", "z"}, pods, "x", true)
	choose(t, b, []string{"x", "z"}, pods, "y", true)
	choose(t, c, nil, pods, "z", false) // nothing taken any more, c still waits for z
	pods[3].Status.Conditions[0].Status = corev1.ConditionTrue
	choose(t, c, nil, pods, "z", true)
}

func TestReplacementReassigned(t *testing.T) {
	const rs = "ReplicaSet/web-5d8"
	dying := ownedPod("web-5d8-x", "x", "ReplicaSet", "web-5d8", t0.Add(time.Second), true)
	dying.DeletionTimestamp = ptr.To(metav1.NewTime(t0.Add(time.Minute)))
	failed := ownedPod("web-5d8-f", "f", "ReplicaSet", "web-5d8", t0.Add(time.Second), false)
	failed.Status.Phase = corev1.PodFailed
	pods := []*corev1.Pod{dying, failed, ownedPod("web-5d8-y", "y", "ReplicaSet", "web-5d8", t0.Add(2*time.Second), true)}
	r := deferred("web-5d8-a", "old-a", rs, t0)
	r.Replacement = "x"
	choose(t, r, nil, pods, "y", true)
	// A pod of a pending delete (deleted in the host) is no replacement.
	choose(t, deferred("web-5d8-b", "y", rs, t0), nil, pods, "", false)
}

func TestReplacementOrphanAndNoOwner(t *testing.T) {
	const rs = "ReplicaSet/web-5d8"
	pods := []*corev1.Pod{ownedPod("web-5d8-kept", "kept", "ReplicaSet", "web-5d8", t0.Add(-time.Hour), true)}
	orphan := deferred("web-5d8-o", "orphan", rs, time.Time{})
	orphan.Cause = podmeta.CauseOrphan
	choose(t, orphan, nil, pods, "kept", true)
	choose(t, orphan, []string{"kept"}, pods, "", false)
	choose(t, deferred("bare", "old", "", t0), nil, pods, "", false)
}
