//go:build e2e

package e2e

import (
	"fmt"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
	"github.com/leafsync/leafsync/test/harness"
)

// outage is what happened in runOutage.
type outage struct {
	f                   *fleet
	ls                  *harness.Leafsync
	leaf                string
	cutAt, healAt       time.Time
	readyAt, settledAt  time.Time
	hostBefore          []corev1.Pod          // host pods before the outage
	memberBefore        map[string]corev1.Pod // member pods before the outage, by name
	memberEvs, hostEvs  []podEvent
	evictedAt, reapedAt time.Time
}

// runOutage runs the scenario of the guard: a Deployment (3 replicas) and
// a StatefulSet (2) pinned to one member's leaf; the member is cut long
// enough for KCM to evict every pod and for the reaper to finish the
// StatefulSet's (which the StatefulSet controller recreates, Pending while
// the leaf is down); then the link heals. It waits until the member's pods
// and the host's match one to one again, and returns what both sides saw.
func runOutage(t *testing.T, annotations map[string]string) *outage {
	f := newPodSyncFleet(t, "member-a")
	member := f.members["member-a"]
	o := &outage{f: f, leaf: "leaf-member-a"}
	o.ls = f.startLeafsync(t, "leafsync")
	f.register(t, "member-a", annotations)
	f.waitLeafReady(t, o.leaf, time.Minute)
	f.createWorkloads(t, []harness.LeafWorkload{leafWorkload("web", 3, o.leaf)}, []harness.LeafWorkload{leafWorkload("db", 2, o.leaf)})
	o.hostBefore = waitHostPodsReady(t, f, "app in (web,db)", 5, 90*time.Second, o.leaf)
	waitOneToOne(t, f, "member-a", o.leaf, 10*time.Second)
	o.memberBefore = map[string]corev1.Pod{}
	for _, p := range listPods(t, member.Cluster, managedPodSelector) {
		o.memberBefore[p.Name] = p
	}
	memberRec := recordPods(t, member.Cluster, managedPodSelector)
	hostRec := recordPods(t, f.host, "app in (web,db)")

	member.proxy.Cut()
	o.cutAt = time.Now()
	oldUID := map[types.UID]bool{}
	for _, p := range o.hostBefore {
		oldUID[p.UID] = true
	}
	harness.Eventually(t, notReadyAfter+tolerationSeconds*time.Second+reapAfter+90*time.Second,
		"every host pod evicted by the taint manager, the StatefulSet's reaped and recreated", func() error {
			evicted := map[types.UID]time.Time{}
			for _, e := range hostRec.events(t) {
				if c := podCondition(e.pod, corev1.DisruptionTarget); c != nil && c.Reason == podmeta.CauseTaintManager && e.pod.DeletionTimestamp != nil {
					if _, ok := evicted[e.pod.UID]; !ok {
						evicted[e.pod.UID] = e.at
					}
				}
			}
			for uid := range oldUID {
				if _, ok := evicted[uid]; !ok {
					return fmt.Errorf("%d of %d pods evicted", len(evicted), len(oldUID))
				}
				if o.evictedAt.IsZero() || evicted[uid].Before(o.evictedAt) {
					o.evictedAt = evicted[uid]
				}
			}
			for _, p := range listPods(t, f.host, "app=db") {
				if oldUID[p.UID] {
					return fmt.Errorf("StatefulSet pod %s not reaped yet", p.Name)
				}
			}
			if n := len(listPods(t, f.host, "app=db")); n != 2 {
				return fmt.Errorf("%d StatefulSet pods recreated", n)
			}
			return nil
		})
	for _, e := range deletedUIDs(hostRec.events(t)) {
		if e.pod.Labels["app"] == "db" && oldUID[e.pod.UID] && (o.reapedAt.IsZero() || e.at.After(o.reapedAt)) {
			o.reapedAt = e.at
		}
	}
	t.Logf("outage: first taint-manager eviction %s after the cut; StatefulSet pods reaped by %s after the cut",
		o.evictedAt.Sub(o.cutAt).Round(time.Millisecond), o.reapedAt.Sub(o.cutAt).Round(time.Millisecond))

	if err := member.proxy.Heal(); err != nil {
		t.Fatal(err)
	}
	o.healAt = time.Now()
	f.waitLeafReady(t, o.leaf, readyAfter+probeInterval+writeSlack+20*time.Second)
	o.readyAt = time.Now()
	waitHostPodsReady(t, f, "app in (web,db)", 5, 90*time.Second, o.leaf)
	// Deferred deletes end when their replacement is Ready, at the latest
	// maxDeferral after the member is Ready again.
	waitOneToOne(t, f, "member-a", o.leaf, maxDeferral+podSyncResync+15*time.Second)
	o.settledAt = time.Now()
	o.memberEvs, o.hostEvs = memberRec.events(t), hostRec.events(t)
	t.Logf("healed after %s; leaf Ready %s after the heal; member and host one to one %s after the heal",
		o.healAt.Sub(o.cutAt).Round(time.Millisecond), o.readyAt.Sub(o.healAt).Round(time.Millisecond), o.settledAt.Sub(o.healAt).Round(time.Millisecond))
	return o
}

// lostBeforeReplaced lists the Deployment's member pods of the outage that
// were deleted before a replacement of their owner was Ready in the host:
// the k-th deleted pod of an owner needs k of the owner's new host pods
// Ready. The StatefulSet's are left out: for a pod with a stable identity
// the order is the reverse, the old copy goes before its replacement starts
// in another member (TestStatefulSetOnce).
func (o *outage) lostBeforeReplaced() (lost []string, deleted map[string]time.Duration) {
	deleted = map[string]time.Duration{}
	readyAt := firstReady(o.hostEvs)
	oldHost := map[types.UID]bool{}
	for _, p := range o.hostBefore {
		oldHost[p.UID] = true
	}
	// New host pods per app, with when they became Ready.
	replReady := map[string][]time.Time{}
	seen := map[types.UID]bool{}
	for _, e := range o.hostEvs {
		if oldHost[e.pod.UID] || seen[e.pod.UID] {
			continue
		}
		if at, ok := readyAt[e.pod.UID]; ok {
			seen[e.pod.UID] = true
			replReady[e.pod.Labels["app"]] = append(replReady[e.pod.Labels["app"]], at)
		}
	}
	dels := map[string][]podEvent{}
	for _, e := range deletedUIDs(o.memberEvs) {
		if b, ok := o.memberBefore[e.pod.Name]; ok && b.UID == e.pod.UID && e.pod.Labels["app"] != "db" {
			dels[e.pod.Labels["app"]] = append(dels[e.pod.Labels["app"]], e)
			deleted[e.pod.Name] = e.at.Sub(o.healAt)
		}
	}
	for app, ds := range dels {
		sort.Slice(ds, func(i, j int) bool { return ds[i].at.Before(ds[j].at) })
		ready := replReady[app]
		sort.Slice(ready, func(i, j int) bool { return ready[i].Before(ready[j]) })
		for k, d := range ds {
			if k >= len(ready) || d.at.Before(ready[k]) {
				lost = append(lost, fmt.Sprintf("%s (deleted %s after the heal, %d of its owner's replacements Ready by then)",
					d.pod.Name, d.at.Sub(o.healAt).Round(time.Millisecond), countBefore(ready, d.at)))
			}
		}
	}
	sort.Strings(lost)
	return lost, deleted
}

func countBefore(ts []time.Time, at time.Time) int {
	n := 0
	for _, t := range ts {
		if !t.After(at) {
			n++
		}
	}
	return n
}

// TestPodSyncOutageGuard: an outage long enough for KCM to evict every pod,
// then healing. With the default policy (DeferUntilReplaced) no member pod
// of the Deployment is deleted before its host replacement is Ready, the StatefulSet's pods
// are adopted by their recreated host pods (same member UID, no restart),
// and member and host pods end one to one.
func TestPodSyncOutageGuard(t *testing.T) {
	o := runOutage(t, nil)
	lost, deleted := o.lostBeforeReplaced()
	for _, l := range lost {
		t.Errorf("member pod deleted before its replacement was Ready: %s", l)
	}
	t.Logf("member pods deleted after the heal (each after its replacement was Ready): %v", deleted)
	if n := len(deleted); n != 3 {
		t.Errorf("%d old member pods deleted, want the Deployment's 3 (deferred until replaced)", n)
	}
	member := o.f.members["member-a"]
	host := map[string]corev1.Pod{}
	for _, p := range listPods(t, o.f.host, "app=db") {
		host[p.Name] = p
	}
	for _, p := range listPods(t, member.Cluster, "app=db") {
		b := o.memberBefore[p.Name]
		if p.UID != b.UID {
			t.Errorf("StatefulSet member pod %s restarted: uid %s, before %s", p.Name, p.UID, b.UID)
			continue
		}
		if restarts(&p) != restarts(&b) {
			t.Errorf("StatefulSet member pod %s: %d restarts, before %d", p.Name, restarts(&p), restarts(&b))
		}
		if hp := host[p.Name]; p.Labels[podmeta.LabelHostUID] != string(hp.UID) || hp.UID == findPod(o.hostBefore, p.Name).UID {
			t.Errorf("StatefulSet member pod %s not adopted by the recreated host pod (labels %v, host uid %s)", p.Name, p.Labels, hp.UID)
		}
	}
	if d := o.settledAt.Sub(o.readyAt); d > maxDeferral+podSyncResync+5*time.Second {
		t.Errorf("orphans remained %s after the member was Ready again, beyond maxDeferral %s", d, maxDeferral)
	}
	// leafsync's metrics tell the same story: no eviction forwarded, every
	// one owed or deferred, the StatefulSet pods reaped and then adopted.
	m := scrape(t, o.ls)
	sel := func(outcome string) string {
		return `leafsync_pod_deletes_total{cause="taint_manager",cluster="member-a",outcome="` + outcome + `"}`
	}
	if v := m[sel("forwarded")]; v != 0 {
		t.Errorf("%s = %v, want 0", sel("forwarded"), v)
	}
	if v := m[sel("owed")] + m[sel("stale_deferred")]; v < 5 {
		t.Errorf("owed + deferred taint-manager evictions = %v, want >= 5 (metrics %v)", v, m)
	}
	if v := m[sel("reaped")]; v < 2 {
		t.Errorf("%s = %v, want >= 2", sel("reaped"), v)
	}
	if v := m[sel("adopted")]; v < 2 {
		t.Errorf("%s = %v, want >= 2", sel("adopted"), v)
	}
}

// TestPodSyncOutageForward is the same outage with policy Forward and
// hysteresis thresholds at KCM-like values (NotReady after KCM's grace
// period, Ready again at the first success): the naive behaviour of other
// virtual-node systems. Member pods are deleted before their replacements
// are Ready, and StatefulSet pods restart: what the guard prevents.
func TestPodSyncOutageForward(t *testing.T) {
	o := runOutage(t, map[string]string{
		podmeta.AnnotationStaleEvictionPolicy: string(podmeta.Forward),
		"leafsync.io/cordon-after":            "1s",
		"leafsync.io/not-ready-after":         harness.DefaultTestTimings.NodeMonitorGracePeriod.String(),
		"leafsync.io/ready-after":             "1s",
	})
	lost, deleted := o.lostBeforeReplaced()
	t.Logf("member pods deleted after the heal: %v", deleted)
	if len(lost) == 0 {
		t.Fatal("policy Forward lost no member pod: the scenario does not show what the guard prevents")
	}
	for _, l := range lost {
		t.Logf("lost: %s", l)
	}
	restarted := 0
	for _, p := range listPods(t, o.f.members["member-a"].Cluster, "app=db") {
		if p.UID != o.memberBefore[p.Name].UID {
			restarted++
		}
	}
	if restarted == 0 {
		t.Error("policy Forward restarted no StatefulSet pod")
	}
	t.Logf("policy Forward: %d member pods deleted before their replacement was Ready, %d StatefulSet pods restarted", len(lost), restarted)
}
