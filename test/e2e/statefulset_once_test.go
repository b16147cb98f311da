//go:build e2e

package e2e

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
	"github.com/leafsync/leafsync/test/harness"
)

// onceBound: how soon after the heal the StatefulSet's replacement must
// run on the other leaf. It covers leafsync's host watch coming back, the
// stale eviction finished in the host, KCM lifting the other leaf's
// unreachable taint (a node monitor period), the StatefulSet controller and
// scheduler, the old copy's delete (grace 5s) confirmed gone, and the new
// member pod started.
const onceBound = 45 * time.Second

// TestStatefulSetOnce: a StatefulSet pod has one identity, and its copies
// never run in two members at once. db (1 replica, allowed on both leaves)
// runs on leaf A; the eviction guard is off, and leafsync is cut from the
// host past KCM's grace period and the pod's toleration, so the taint
// manager evicts db-0 while member A is healthy. The user cordons leaf A
// and the link heals: the eviction is stale, db-0 is recreated and lands on
// leaf B. Over every watched version of both members' pods, never two db-0
// Running at once (on 04d21e7 the old copy was kept until the new one was
// Ready, and both ran); the replacement Runs on B within onceBound.
func TestStatefulSetOnce(t *testing.T) {
	f := newPodSyncFleet(t, "member-a", "member-b")
	f.writeConfig(t, noGuardConfig)
	a, b := f.members["member-a"], f.members["member-b"]
	const leafA, leafB = "leaf-member-a", "leaf-member-b"
	f.startLeafsync(t, "leafsync")
	f.register(t, "member-a", nil)
	f.waitLeafReady(t, leafA, time.Minute)
	f.createWorkloads(t, nil, []harness.LeafWorkload{leafWorkload("db", 1, leafA, leafB)})
	old := waitHostPodsReady(t, f, "app=db", 1, 90*time.Second, leafA)[0]
	f.register(t, "member-b", nil)
	f.waitLeafReady(t, leafB, time.Minute)
	waitOneToOne(t, f, "member-a", leafA, 10*time.Second)
	recs := map[string]*podRecorder{"member-a": recordPods(t, a.Cluster, "app=db"), "member-b": recordPods(t, b.Cluster, "app=db")}

	f.hostProxy.Cut()
	cutAt := time.Now()
	harness.Eventually(t, harness.DefaultTestTimings.NodeMonitorGracePeriod+tolerationSeconds*time.Second+30*time.Second,
		"the taint manager evicts db-0", func() error {
			for _, p := range listPods(t, f.host, "app=db") {
				if c := podCondition(&p, corev1.DisruptionTarget); p.UID == old.UID && p.DeletionTimestamp != nil && c != nil && c.Reason == podmeta.CauseTaintManager {
					return nil
				}
			}
			return fmt.Errorf("db-0 (uid %s) not evicted yet", old.UID)
		})
	setUnschedulable(t, f.host.Client(), leafA, true)
	if err := f.hostProxy.Heal(); err != nil {
		t.Fatal(err)
	}
	healAt := time.Now()
	t.Logf("db-0 evicted by the taint manager %s after leafsync was cut from the host; leaf A cordoned, link healed",
		healAt.Sub(cutAt).Round(time.Millisecond))

	waitHostPodsReady(t, f, "app=db", 1, onceBound+60*time.Second, leafB)
	took := time.Since(healAt)
	t.Logf("db-0 Running and Ready on %s %s after the heal (bound %s)", leafB, took.Round(time.Millisecond), onceBound)
	if took > onceBound {
		t.Errorf("the replacement took %s after the heal, beyond %s", took.Round(time.Millisecond), onceBound)
	}
	harness.Eventually(t, maxDeferral+podSyncResync+10*time.Second, "the old copy gone from member-a", func() error {
		if n := len(listPods(t, a.Cluster, "app=db")); n > 0 {
			return fmt.Errorf("%d db pods in member-a", n)
		}
		return nil
	})
	waitOneToOne(t, f, "member-b", leafB, 10*time.Second)

	running, live := copiesOverTime(t, recs)
	t.Logf("db-0 copies in both members at once: Running %s, existing %s; waits reported: %v",
		running.total, live.total, hostEvents(t, f, "WaitingForOldCopy"))
	if running.total > 0 {
		t.Errorf("db-0 Running in two members at once for %s (first at %s: %s)", running.total, running.first.Format(time.StampMilli), running.what)
	}
}

// overlap is how long two copies of one pod name were seen at once.
type overlap struct {
	total time.Duration
	first time.Time
	what  string
}

// copiesOverTime replays the recorded versions of the members' pods in
// time order and measures when two of them (of one name, in different
// members) were Running, and when two existed (not finished, not deleted).
func copiesOverTime(t *testing.T, recs map[string]*podRecorder) (running, live overlap) {
	t.Helper()
	evs := mergedEvents(t, recs)
	type copyKey struct {
		member string
		uid    types.UID
	}
	isRunning, exists := map[string]map[copyKey]bool{}, map[string]map[copyKey]bool{}
	runSince, liveSince := map[string]time.Time{}, map[string]time.Time{}
	account := func(state map[string]map[copyKey]bool, since map[string]time.Time, o *overlap, name string, at time.Time) {
		members := map[string]bool{}
		for k, v := range state[name] {
			if v {
				members[k.member] = true
			}
		}
		switch s, open := since[name]; {
		case len(members) >= 2 && !open:
			since[name] = at
			if o.first.IsZero() {
				o.first, o.what = at, fmt.Sprintf("%s in %d members", name, len(members))
			}
		case len(members) < 2 && open:
			o.total += at.Sub(s)
			delete(since, name)
		}
	}
	for _, e := range evs {
		p := e.pod
		k := copyKey{e.member, p.UID}
		for _, m := range []map[string]map[copyKey]bool{isRunning, exists} {
			if m[p.Name] == nil {
				m[p.Name] = map[copyKey]bool{}
			}
		}
		gone := e.typ == watch.Deleted
		isRunning[p.Name][k] = !gone && p.Status.Phase == corev1.PodRunning
		exists[p.Name][k] = !gone && p.Status.Phase != corev1.PodFailed && p.Status.Phase != corev1.PodSucceeded
		account(isRunning, runSince, &running, p.Name, e.at)
		account(exists, liveSince, &live, p.Name, e.at)
	}
	now := time.Now()
	for _, s := range runSince {
		running.total += now.Sub(s)
	}
	for _, s := range liveSince {
		live.total += now.Sub(s)
	}
	return running, live
}
