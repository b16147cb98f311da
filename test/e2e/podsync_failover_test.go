//go:build e2e

package e2e

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/watch"

	"github.com/leafsync/leafsync/test/harness"
)

// failoverMargin covers what the bound notReadyAfter + tolerationSeconds +
// reapAfter leaves out: a probe interval to see the outage, the leaf's
// write, KCM's node monitor period and taint, the StatefulSet controller
// and scheduler, and the new member pod starting and reporting Ready.
const failoverMargin = 10 * time.Second

// TestPodSyncFailover: a member goes down for good. Its StatefulSet's pods
// are evicted, reaped and recreated on the other member's leaf, Ready
// within notReadyAfter + tolerationSeconds + reapAfter (+ a small margin).
// When the member comes back, its stale copies are removed; the other
// member's pods are untouched. Run with the eviction guard and without:
// the guard lets the evictions of a confirmed outage through (its record
// says NotReady before the leaf does), so the bound is the same.
func TestPodSyncFailover(t *testing.T) {
	guardCases(t, []string{"member-a", "member-b"}, testPodSyncFailover)
}

// startStatefulSetOnA starts leafsync with member-a registered alone, so
// that the StatefulSet "db" (2 pods, allowed on both leaves) starts on
// leaf-member-a; then registers member-b. Both leaves are Ready.
func (f *fleet) startStatefulSetOnA(t *testing.T) {
	t.Helper()
	const leafA, leafB = "leaf-member-a", "leaf-member-b"
	f.startLeafsync(t, "leafsync")
	f.register(t, "member-a", nil)
	f.waitLeafReady(t, leafA, time.Minute)
	f.createWorkloads(t, nil, []harness.LeafWorkload{leafWorkload("db", 2, leafA, leafB)})
	waitHostPodsReady(t, f, "app=db", 2, 90*time.Second, leafA)
	f.register(t, "member-b", nil)
	f.waitLeafReady(t, leafB, time.Minute)
}

func testPodSyncFailover(t *testing.T, f *fleet, guarded bool) {
	a, b := f.members["member-a"], f.members["member-b"]
	const leafA, leafB = "leaf-member-a", "leaf-member-b"
	f.startStatefulSetOnA(t)
	waitOneToOne(t, f, "member-a", leafA, 10*time.Second)
	staleCopies := len(listPods(t, a.Cluster, managedPodSelector))

	a.proxy.Cut()
	cutAt := time.Now()
	bound := notReadyAfter + tolerationSeconds*time.Second + reapAfter + failoverMargin
	moved := waitHostPodsReady(t, f, "app=db", 2, bound+60*time.Second, leafB)
	took := time.Since(cutAt)
	t.Logf("StatefulSet pods Running and Ready on %s %s after member-a was cut (bound: notReadyAfter %s + tolerationSeconds %ds + reapAfter %s + margin %s = %s)",
		leafB, took.Round(time.Millisecond), notReadyAfter, tolerationSeconds, reapAfter, failoverMargin, bound)
	if took > bound {
		t.Errorf("fail-over took %s, beyond %s", took.Round(time.Millisecond), bound)
	}
	waitOneToOne(t, f, "member-b", leafB, 10*time.Second)
	if refused := hostEvents(t, f, "EvictionRefused"); len(refused) > 0 {
		t.Errorf("evictions of a confirmed outage refused (guard %v): %v", guarded, refused)
	}
	bRec := recordPods(t, b.Cluster, managedPodSelector)

	// member-a comes back: its copies of the pods are stale.
	if err := a.proxy.Heal(); err != nil {
		t.Fatal(err)
	}
	healAt := time.Now()
	harness.Eventually(t, readyAfter+maxDeferral+podSyncResync+20*time.Second, "stale copies removed from member-a", func() error {
		if n := len(listPods(t, a.Cluster, managedPodSelector)); n > 0 {
			return fmt.Errorf("%d of %d stale copies left", n, staleCopies)
		}
		return nil
	})
	t.Logf("member-a's %d stale copies removed %s after it came back (readyAfter %s)", staleCopies, time.Since(healAt).Round(time.Millisecond), readyAfter)
	for _, e := range bRec.events(t) {
		if e.typ == watch.Deleted || e.pod.DeletionTimestamp != nil {
			t.Errorf("member-b pod %s deleted when member-a came back", e.pod.Name)
		}
	}
	for _, p := range waitHostPodsReady(t, f, "app=db", 2, 10*time.Second, leafB) {
		if p.UID != findPod(moved, p.Name).UID {
			t.Errorf("host pod %s replaced again when member-a came back", p.Name)
		}
	}
	waitOneToOne(t, f, "member-b", leafB, 10*time.Second)
}

// TestPodSyncFailoverAcrossRestart: leafsync restarts in the middle of a
// real outage, before the evictions. The new process never reaches the
// member, so its member caches never sync; owing and reaping must not need
// them. The StatefulSet's pods still move to the other member within
// notReadyAfter + tolerationSeconds + reapAfter + the restart (+ margin).
// (Before, the new process waited for the member's caches and nothing was
// owed or reaped until the member came back.)
func TestPodSyncFailoverAcrossRestart(t *testing.T) {
	f := newPodSyncFleet(t, "member-a", "member-b")
	a := f.members["member-a"]
	const leafA, leafB = "leaf-member-a", "leaf-member-b"
	first := f.startLeafsync(t, "leafsync-1")
	f.register(t, "member-a", nil)
	f.waitLeafReady(t, leafA, time.Minute)
	db := leafWorkload("db", 2, leafA, leafB)
	db.TolerationSeconds = 8 // room for the restart before the evictions
	f.createWorkloads(t, nil, []harness.LeafWorkload{db})
	waitHostPodsReady(t, f, "app=db", 2, 90*time.Second, leafA)
	f.register(t, "member-b", nil)
	f.waitLeafReady(t, leafB, time.Minute)
	waitOneToOne(t, f, "member-a", leafA, 10*time.Second)

	a.proxy.Cut()
	cutAt := time.Now()
	f.waitLeafNotReady(t, leafA, notReadyAfter+probeInterval+writeSlack+10*time.Second)
	first.Kill()
	killedAt := time.Now()
	time.Sleep(2 * time.Second)
	f.startLeafsync(t, "leafsync-2")
	restart := time.Since(killedAt)
	bound := notReadyAfter + time.Duration(db.TolerationSeconds)*time.Second + reapAfter + restart + failoverMargin
	waitHostPodsReady(t, f, "app=db", 2, bound+60*time.Second, leafB)
	took := time.Since(cutAt)
	t.Logf("StatefulSet pods Running and Ready on %s %s after member-a was cut, leafsync restarted mid-outage (down %s) (bound %s)",
		leafB, took.Round(time.Millisecond), restart.Round(time.Millisecond), bound)
	if took > bound {
		t.Errorf("fail-over across a restart took %s, beyond %s", took.Round(time.Millisecond), bound)
	}
	waitOneToOne(t, f, "member-b", leafB, 10*time.Second)
}
