package podsync

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/leafsync/leafsync/syncer/store"
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
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
	return p
}

func deferred(name, uid, owner string, deletedAt time.Time) store.PendingDelete {
	return store.PendingDelete{Kind: store.Deferred, Namespace: "apps", Name: name, HostUID: uid, Owner: owner,
		Cause: CauseTaintManager, Since: t0, HostDeletedAt: deletedAt}
}

func TestReplacedStatefulSet(t *testing.T) {
	recs := []store.PendingDelete{deferred("web-0", "old0", "StatefulSet/web", t0), deferred("web-1", "old1", "StatefulSet/web", t0)}
	pods := []*corev1.Pod{
		ownedPod("web-0", "new0", "StatefulSet", "web", t0.Add(time.Minute), true),
		ownedPod("web-1", "new1", "StatefulSet", "web", t0.Add(time.Minute), false), // not Ready yet
	}
	if got, want := Replaced(recs, pods), map[string]bool{"old0": true}; !reflect.DeepEqual(got, want) {
		t.Errorf("Replaced = %v, want %v", got, want)
	}
	// The same name under another owner is not a replacement.
	pods = []*corev1.Pod{ownedPod("web-0", "x", "StatefulSet", "other", t0.Add(time.Minute), true)}
	if got := Replaced(recs, pods); len(got) != 0 {
		t.Errorf("Replaced = %v, want none", got)
	}
}

func TestReplacedOneToOne(t *testing.T) {
	const rs = "ReplicaSet/web-5d8"
	recs := []store.PendingDelete{
		deferred("web-5d8-a", "old-a", rs, t0),
		deferred("web-5d8-b", "old-b", rs, t0.Add(time.Second)),
		deferred("web-5d8-c", "old-c", rs, t0.Add(2*time.Second)),
		{Kind: store.Owed, Namespace: "apps", Name: "web-5d8-z", HostUID: "old-z", Owner: rs, Cause: CauseTaintManager},
	}
	pods := []*corev1.Pod{
		// A replica that was there before the evictions does not count.
		ownedPod("web-5d8-kept", "kept", "ReplicaSet", "web-5d8", t0.Add(-time.Hour), true),
		// Two replacements Ready, one not.
		ownedPod("web-5d8-x", "x", "ReplicaSet", "web-5d8", t0.Add(500*time.Millisecond), true),
		ownedPod("web-5d8-y", "y", "ReplicaSet", "web-5d8", t0.Add(3*time.Second), true),
		ownedPod("web-5d8-w", "w", "ReplicaSet", "web-5d8", t0.Add(3*time.Second), false),
		// Terminating pods and other owners do not count.
		func() *corev1.Pod {
			p := ownedPod("web-5d8-t", "t", "ReplicaSet", "web-5d8", t0.Add(4*time.Second), true)
			p.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
			return p
		}(),
		ownedPod("api-1", "api", "ReplicaSet", "api-7c", t0.Add(4*time.Second), true),
	}
	got := Replaced(recs, pods)
	if want := map[string]bool{"old-a": true, "old-b": true}; !reflect.DeepEqual(got, want) {
		t.Errorf("Replaced = %v, want %v (oldest deletes first, one replacement each)", got, want)
	}
	// One more Ready replacement frees the third.
	pods[3].Status.Conditions[0].Status = corev1.ConditionTrue
	if got := Replaced(recs, pods); len(got) != 3 || !got["old-c"] {
		t.Errorf("Replaced = %v, want old-a, old-b, old-c", got)
	}
}

func TestReplacedOrphansClaimLast(t *testing.T) {
	const rs = "ReplicaSet/web-5d8"
	orphan := deferred("web-5d8-o", "orphan", rs, time.Time{})
	orphan.Cause = CauseOrphan
	recs := []store.PendingDelete{orphan, deferred("web-5d8-a", "old-a", rs, t0)}
	pods := []*corev1.Pod{ownedPod("web-5d8-x", "x", "ReplicaSet", "web-5d8", t0.Add(time.Second), true)}
	if got, want := Replaced(recs, pods), map[string]bool{"old-a": true}; !reflect.DeepEqual(got, want) {
		t.Errorf("Replaced = %v, want %v", got, want)
	}
	pods = append(pods, ownedPod("web-5d8-kept", "kept", "ReplicaSet", "web-5d8", t0.Add(-time.Hour), true))
	if got := Replaced(recs, pods); !got["orphan"] {
		t.Errorf("Replaced = %v: an orphan takes any Ready pod of its owner left", got)
	}
}

func TestReplacedNoOwner(t *testing.T) {
	recs := []store.PendingDelete{deferred("bare", "old", "", t0)}
	pods := []*corev1.Pod{ownedPod("bare", "new", "ReplicaSet", "x", t0.Add(time.Second), true)}
	if got := Replaced(recs, pods); len(got) != 0 {
		t.Errorf("Replaced = %v, want none: a bare pod has no replacement", got)
	}
}
