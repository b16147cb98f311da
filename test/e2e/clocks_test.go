//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
	"github.com/leafsync/leafsync/test/harness"
)

// TestClockBehindEvictionsDeferred: leafsync's clock runs 60s behind the
// host's (the test-only LEAFSYNC_TEST_CLOCK_SKEW). A Deployment of 1 on
// member-a's leaf tolerates unreachable for 25s; member-a is cut, leafsync
// confirms the outage and evicts the pod itself (EvictionCompleted, 25s+5s
// after the first failed probe, before the taint manager's 25s after its
// taint), then the link heals. That eviction is stale once the member is
// back: its member pod is kept until the replacement is Ready (deferred),
// not deleted at once as a user's delete would be. leafsync stamps the
// condition of its eviction with the host's time (measured from the host's
// answers), so the delete that follows it is classified as that eviction.
func TestClockBehindEvictionsDeferred(t *testing.T) {
	const leaf, skew = "leaf-member-a", -60 * time.Second
	t.Setenv("LEAFSYNC_TEST_CLOCK_SKEW", skew.String())
	f := newPodSyncFleet(t, "member-a")
	member := f.members["member-a"]
	ls := f.startLeafsync(t, "leafsync")
	f.register(t, "member-a", nil)
	f.waitLeafReady(t, leaf, time.Minute)
	w := leafWorkload("web", 1, leaf)
	w.TolerationSeconds = 25
	f.createWorkloads(t, []harness.LeafWorkload{w}, nil)
	before := waitHostPodsReady(t, f, "app=web", 1, 90*time.Second, leaf)[0]
	waitOneToOne(t, f, "member-a", leaf, 10*time.Second)
	oldMember := listPods(t, member.Cluster, managedPodSelector)[0]
	memberRec := recordPods(t, member.Cluster, managedPodSelector)
	hostRec := recordPods(t, f.host, "app=web")

	member.proxy.Cut()
	cutAt := time.Now()
	var evicted *corev1.Pod
	harness.Eventually(t, notReadyAfter+45*time.Second, "the host pod evicted", func() error {
		for _, e := range hostRec.events(t) {
			if e.pod.UID == before.UID && e.pod.DeletionTimestamp != nil {
				evicted = e.pod
				return nil
			}
		}
		return fmt.Errorf("not yet")
	})
	c := podCondition(evicted, corev1.DisruptionTarget)
	if c == nil || c.Reason != podmeta.CauseTaintManager || !strings.HasPrefix(c.Message, "leafsync:") {
		t.Fatalf("the scenario needs leafsync to complete the eviction; the host pod was deleted with condition %+v", c)
	}
	t.Logf("leafsync evicted %s %s after the cut; condition at %s, deletionTimestamp %s (grace %ds)",
		before.Name, time.Since(cutAt).Round(time.Millisecond), c.LastTransitionTime.UTC().Format(time.RFC3339),
		evicted.DeletionTimestamp.UTC().Format(time.RFC3339), *evicted.DeletionGracePeriodSeconds)
	if err := member.proxy.Heal(); err != nil {
		t.Fatal(err)
	}
	healAt := time.Now()
	f.waitLeafReady(t, leaf, readyAfter+probeInterval+writeSlack+20*time.Second)
	waitHostPodsReady(t, f, "app=web", 1, 60*time.Second, leaf)
	waitOneToOne(t, f, "member-a", leaf, maxDeferral+podSyncResync+15*time.Second)
	settled := time.Since(healAt)

	// The old member pod went only after a replacement host pod was Ready.
	readyAt := firstReady(hostRec.events(t))
	var replacementReady time.Time
	for uid, at := range readyAt {
		if uid != before.UID && (replacementReady.IsZero() || at.Before(replacementReady)) {
			replacementReady = at
		}
	}
	deletedAt, ok := deletedUIDs(memberRec.events(t))[oldMember.UID]
	switch {
	case !ok:
		t.Errorf("the old member pod %s was not deleted", oldMember.Name)
	case replacementReady.IsZero():
		t.Errorf("no replacement host pod was seen Ready")
	case deletedAt.at.Before(replacementReady):
		t.Errorf("the old member pod was deleted %s after the heal, %s before its replacement was Ready: the eviction leafsync completed was forwarded as a user's delete",
			deletedAt.at.Sub(healAt).Round(time.Millisecond), replacementReady.Sub(deletedAt.at).Round(time.Millisecond))
	default:
		t.Logf("old member pod deleted %s after the heal, %s after its replacement was Ready; one to one %s after the heal",
			deletedAt.at.Sub(healAt).Round(time.Millisecond), deletedAt.at.Sub(replacementReady).Round(time.Millisecond), settled.Round(time.Millisecond))
	}
	m := scrape(t, ls)
	tm := metricValue(m, "leafsync_pod_deletes_total", "cluster", "member-a", "cause", "taint_manager", "outcome", "owed") +
		metricValue(m, "leafsync_pod_deletes_total", "cluster", "member-a", "cause", "taint_manager", "outcome", "stale_deferred")
	user := metricValue(m, "leafsync_pod_deletes_total", "cluster", "member-a", "cause", "user", "outcome", "owed") +
		metricValue(m, "leafsync_pod_deletes_total", "cluster", "member-a", "cause", "user", "outcome", "forwarded")
	if tm == 0 || user != 0 {
		t.Errorf("leafsync_pod_deletes_total: taint_manager owed/stale_deferred %v, user owed/forwarded %v; want the eviction counted as the taint manager's", tm, user)
	}
}
