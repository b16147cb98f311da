//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leafsync/leafsync/internal/leafnode"
	"github.com/leafsync/leafsync/test/harness"
)

// TestMemberAdmissionErrorsAreNotOutages: a member whose own admission
// webhook fails every pod create (HTTP 500) while 20 pods are placed on its
// leaf is healthy: its /readyz answers. Probes every 3s (an annotation), so
// several refused creates fall between two probes, as with production's 5s. For twice notReadyAfter the leaf is
// Ready and uncordoned in every watched version, the member's circuit
// breaker never opens, and the host pods carry the create error as Events.
// (Before the probe had its own path, the 500s opened the shared breaker,
// the breaker refused the probes, and the healthy leaf was cordoned, then
// NotReady.)
func TestMemberAdmissionErrorsAreNotOutages(t *testing.T) {
	f := newPodSyncFleet(t, "member-a")
	member := f.members["member-a"]
	hc, mc := f.host.Client(), member.Client()
	ctx := context.Background()
	ls := f.startLeafsync(t, "leafsync")
	// The member's owner made namespace apps (with the failing webhook) and
	// lets host pods run there.
	f.register(t, "member-a", map[string]string{"leafsync.io/probe-interval": "3s", "leafsync.io/member-namespaces": appsNS})
	const leaf = "leaf-member-a"
	f.waitLeafReady(t, leaf, time.Minute)
	if err := member.EnsureNamespace(ctx, appsNS); err != nil {
		t.Fatal(err)
	}
	if err := member.FailPodCreates(context.Background(), appsNS); err != nil {
		t.Fatal(err)
	}

	rec := recordNode(t, f.host, leaf)
	start := time.Now()
	f.createWorkloads(t, []harness.LeafWorkload{leafWorkload("web", 20, leaf)}, nil)

	time.Sleep(time.Until(start.Add(2 * notReadyAfter)))
	obs := rec.observations(t)

	if pods, err := mc.CoreV1().Pods(appsNS).List(ctx, metav1.ListOptions{}); err != nil || len(pods.Items) != 0 {
		t.Fatalf("member pods in %s: %d (%v): the webhook should refuse every create", appsNS, len(pods.Items), err)
	}
	for _, o := range obs {
		if o.ready != corev1.ConditionTrue {
			t.Errorf("%s after the pods were placed: leaf Ready=%s", o.at.Sub(start).Round(time.Millisecond), o.ready)
		}
		if hasTaint(o.node, leafnode.TaintUnreachable, corev1.TaintEffectNoSchedule) {
			t.Errorf("%s after the pods were placed: leaf cordoned", o.at.Sub(start).Round(time.Millisecond))
		}
	}
	t.Logf("%d versions of the leaf watched over %s of refused creates", len(obs), time.Since(start).Round(time.Second))
	m := scrape(t, ls)
	state, ok := m[`leafsync_breaker_state{cluster="member-a"}`]
	if !ok || state != 0 {
		t.Errorf("breaker state %v (present %v), want 0 (closed)", state, ok)
	}
	if opened := m[`leafsync_breaker_transitions_total{cluster="member-a",to="open"}`]; opened != 0 {
		t.Errorf("breaker opened %v times on the member's own 500s", opened)
	}
	if failed := m[`leafsync_probe_results_total{cluster="member-a",result="server"}`] + m[`leafsync_probe_results_total{cluster="member-a",result="network"}`]; failed != 0 {
		t.Errorf("%v failed probes of a healthy member", failed)
	}

	// The fault is real: the member refuses the creates.
	harness.Eventually(t, 10*time.Second, "MemberCreateFailed Events on the host pods", func() error {
		evs, err := hc.EventsV1().Events(appsNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		pods := map[string]bool{}
		for _, ev := range evs.Items {
			if ev.Reason == "MemberCreateFailed" && ev.Regarding.Kind == "Pod" && strings.Contains(ev.Note, "failed calling webhook") {
				pods[ev.Regarding.Name] = true
			}
		}
		if len(pods) < 8 {
			return fmt.Errorf("%d host pods with a MemberCreateFailed Event naming the webhook", len(pods))
		}
		return nil
	})
}

// TestLeafQuietWhileNotReady: once a leaf is NotReady and KCM has marked it
// Unknown (its Lease lapsed), leafsync leaves the conditions to KCM. Over 60
// s of the outage, host writes to the leaf Node are counted from the audit
// log, by writer. (Before, leafsync wrote Ready=False back at every sync and
// KCM flipped it to Unknown again: a write ping-pong and taint swaps.)
func TestLeafQuietWhileNotReady(t *testing.T) {
	f := newFleet(t, harness.HostOptions{}, harness.MemberOptions{Name: "member-a", Nodes: 1})
	member := f.members["member-a"]
	f.startLeafsync(t, "leafsync")
	f.register(t, "member-a", nil)
	const leaf = "leaf-member-a"
	f.waitLeafReady(t, leaf, time.Minute)

	member.proxy.Cut()
	cut := time.Now()
	harness.Eventually(t, notReadyAfter+harness.DefaultTestTimings.NodeMonitorGracePeriod+30*time.Second, "leaf Ready=Unknown (KCM took over)", func() error {
		if s := harness.NodeReady(f.node(t, leaf)); s != corev1.ConditionUnknown {
			return fmt.Errorf("Ready=%q", s)
		}
		return nil
	})
	from := time.Now()
	t.Logf("leaf Unknown %s after the cut", from.Sub(cut).Round(time.Millisecond))
	const window = 60 * time.Second
	time.Sleep(window)
	if s := harness.NodeReady(f.node(t, leaf)); s == corev1.ConditionTrue {
		t.Fatalf("leaf Ready=%s at the end of the outage", s)
	}
	writes, err := f.host.AuditEvents(func(e harness.AuditEvent) bool {
		return e.ObjectRef.Resource == "nodes" && e.ObjectRef.Name == leaf && (e.Verb == "update" || e.Verb == "patch") &&
			!e.RequestReceived.Before(from) && e.RequestReceived.Before(from.Add(window))
	})
	if err != nil {
		t.Fatal(err)
	}
	byLeafsync, byOthers := 0, 0
	for _, e := range writes {
		if strings.HasPrefix(e.UserAgent, "leafsync") {
			byLeafsync++
			t.Logf("leafsync wrote %s/%s at +%s", e.ObjectRef.Resource, e.ObjectRef.Subresource, e.RequestReceived.Sub(from).Round(time.Millisecond))
		} else {
			byOthers++
		}
	}
	t.Logf("host writes to the NotReady leaf over %s: %d by leafsync, %d by others (KCM)", window, byLeafsync, byOthers)
	if byLeafsync > 0 {
		t.Errorf("leafsync wrote the NotReady leaf %d times in %s", byLeafsync, window)
	}
	// KCM's own hand-over (Unknown, the taint swap to unreachable) lands
	// at the start of the window; a ping-pong shows 5 writes every sync.
	if byOthers > 6 {
		t.Errorf("%d writes by others (KCM) in %s: a ping-pong", byOthers, window)
	}
}

// syncLatency measures, on a healthy member's leaf, how long pod sync takes
// for a new Deployment of n pods (created in the host until all are Running
// and Ready there, status from the member) and for user deletes of two of
// them (deleted in the host until gone from the member).
func syncLatency(t *testing.T, f *fleet, member, leaf, name string, n int) (create, del time.Duration) {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	f.createWorkloads(t, []harness.LeafWorkload{leafWorkload(name, int32(n), leaf)}, nil)
	pods := waitHostPodsReady(t, f, "app="+name, n, 2*time.Minute, leaf)
	create = time.Since(start)
	mc := f.members[member].Client()
	var gone []*corev1.Pod
	for _, p := range pods[:2] {
		mp, err := mc.CoreV1().Pods(appsNS).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		gone = append(gone, mp)
	}
	start = time.Now()
	for _, mp := range gone {
		if err := f.host.Client().CoreV1().Pods(appsNS).Delete(ctx, mp.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var last time.Time
	for _, mp := range gone {
		if at := waitGone(t, mc, mp.Name, mp.UID); at.After(last) {
			last = at
		}
	}
	return create, last.Sub(start)
}

// TestPodSyncIsolatedPerMember: a blackholed member whose pods are being
// deleted (every member call hangs until its 30s timeout) does not delay
// another member's pod sync or deletes. The healthy member's latencies are
// measured before and while the other is blackholed, in one run. (With one
// queue and 4 workers for the whole fleet, the blackholed member's deletes
// held every worker for 30s.)
func TestPodSyncIsolatedPerMember(t *testing.T) {
	f := newPodSyncFleet(t, "member-a", "member-b")
	f.startLeafsync(t, "leafsync")
	f.register(t, "member-a", nil)
	f.register(t, "member-b", nil)
	const leafA, leafB = "leaf-member-a", "leaf-member-b"
	f.waitLeafReady(t, leafA, time.Minute)
	f.waitLeafReady(t, leafB, time.Minute)
	ctx := context.Background()

	f.createWorkloads(t, []harness.LeafWorkload{leafWorkload("busy", 8, leafA)}, nil)
	busy := waitHostPodsReady(t, f, "app=busy", 8, 2*time.Minute, leafA)

	baseCreate, baseDelete := syncLatency(t, f, "member-b", leafB, "before", 4)
	t.Logf("member-b alone: 4 pods Ready in %s, 2 deletes done in %s", baseCreate.Round(time.Millisecond), baseDelete.Round(time.Millisecond))

	if err := f.members["member-a"].proxy.Blackhole(); err != nil {
		t.Fatal(err)
	}
	// Eight user deletes on the blackholed member: each is forwarded, and
	// its member DELETE hangs until the member timeout.
	for _, p := range busy {
		if err := f.host.Client().CoreV1().Pods(appsNS).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Second) // let member-a's deletes take their workers
	create, del := syncLatency(t, f, "member-b", leafB, "during", 4)
	t.Logf("member-b while member-a is blackholed with 8 deletes pending: 4 pods Ready in %s, 2 deletes done in %s",
		create.Round(time.Millisecond), del.Round(time.Millisecond))
	// The member timeout is 30s: a worker shared with member-a shows as a
	// delay of that order. 15s of slack over the baseline is liveness.
	if create > baseCreate+15*time.Second {
		t.Errorf("member-b's pod creates took %s while member-a was blackholed, %s before", create, baseCreate)
	}
	if del > baseDelete+15*time.Second {
		t.Errorf("member-b's deletes took %s while member-a was blackholed, %s before", del, baseDelete)
	}
	if err := f.members["member-a"].proxy.Heal(); err != nil {
		t.Fatal(err)
	}
}

// withHysteresis returns testConfig with extra lines in its hysteresis
// section (two-space indented "key: value" lines).
func withHysteresis(t *testing.T, lines string) string {
	t.Helper()
	const anchor = "  window: 60s\n"
	if !strings.Contains(testConfig, anchor) {
		t.Fatal("testConfig has no hysteresis window line to add thresholds after")
	}
	return strings.Replace(testConfig, anchor, anchor+lines, 1)
}

func (f *fleet) writeConfig(t *testing.T, cfg string) {
	t.Helper()
	if err := os.WriteFile(f.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}

// firstNotReady is when a recorded leaf was first seen not Ready (zero if
// never).
func firstNotReady(obs []nodeObservation) time.Time {
	for _, o := range obs {
		if o.ready != corev1.ConditionTrue {
			return o.at
		}
	}
	return time.Time{}
}

// TestMassDisconnectBounded: 3 of 4 members cut at once for longer than the
// guard's maximum. They are held Ready (cordoned) for notReadyAfter +
// massHoldMax, then go NotReady one at a time, massReleaseInterval apart;
// a healed one recovers. (Before, the guard held dead members Ready for
// ever: no eviction, no failover.)
func TestMassDisconnectBounded(t *testing.T) {
	const (
		holdMax = 10 * time.Second
		release = 5 * time.Second
	)
	names := []string{"member-a", "member-b", "member-c", "member-d"}
	var opts []harness.MemberOptions
	for _, n := range names {
		opts = append(opts, harness.MemberOptions{Name: n, Nodes: 1})
	}
	f := newFleet(t, harness.HostOptions{}, opts...)
	f.writeConfig(t, withHysteresis(t, fmt.Sprintf("  massHoldMax: %s\n  massReleaseInterval: %s\n", holdMax, release)))
	f.startLeafsync(t, "leafsync")
	for _, n := range names {
		f.register(t, n, nil)
	}
	for _, n := range names {
		f.waitLeafReady(t, "leaf-"+n, time.Minute)
	}
	down := names[:3]
	recs := map[string]*nodeRecorder{}
	for _, n := range down {
		recs[n] = recordNode(t, f.host, "leaf-"+n)
	}
	for _, n := range down {
		f.members[n].proxy.Cut()
	}
	cut := time.Now()
	// Every dead member is NotReady by notReadyAfter + massHoldMax +
	// 3×(massReleaseInterval + probeInterval) + probeInterval (the
	// engine's bound) plus the write path.
	bound := notReadyAfter + holdMax + 3*(release+probeInterval) + probeInterval
	harness.Eventually(t, bound+writeSlack+20*time.Second, "the three cut members NotReady", func() error {
		for _, n := range down {
			if harness.NodeReady(f.node(t, "leaf-"+n)) == corev1.ConditionTrue {
				return fmt.Errorf("%s still Ready", n)
			}
		}
		return nil
	})
	var at []time.Duration
	for _, n := range down {
		first := firstNotReady(recs[n].observations(t))
		at = append(at, first.Sub(cut))
	}
	slices.Sort(at)
	t.Logf("cut members NotReady at %v after the cut (held until notReadyAfter %s + massHoldMax %s, then one per %s)", at, notReadyAfter, holdMax, release)
	if at[0] < notReadyAfter+holdMax {
		t.Errorf("first NotReady %s after the cut, before notReadyAfter + massHoldMax %s", at[0], notReadyAfter+holdMax)
	}
	for i := 1; i < len(at); i++ {
		// Seen through the write path: allow 1s of jitter on the gap.
		if gap := at[i] - at[i-1]; gap < release-time.Second {
			t.Errorf("NotReady %s apart, release interval %s", gap, release)
		}
	}
	// That the last one comes at all is the Eventually above (the guard
	// once held dead members Ready for ever); its time is logged.
	if got := harness.NodeReady(f.node(t, "leaf-member-d")); got != corev1.ConditionTrue {
		t.Errorf("the healthy member's leaf is Ready=%s", got)
	}

	if err := f.members["member-a"].proxy.Heal(); err != nil {
		t.Fatal(err)
	}
	healAt := time.Now()
	f.waitLeafReady(t, "leaf-member-a", readyAfter+probeInterval+writeSlack+10*time.Second)
	t.Logf("healed member Ready again %s after the heal", time.Since(healAt).Round(time.Millisecond))
}

// TestBlackholeNotReadyBound: with production probe settings (probe 5s,
// probeTimeout 3s; notReadyAfter 30s instead of 90s to keep the test short:
// the bound's shape does not depend on it), a blackholed member's leaf goes
// NotReady no earlier than notReadyAfter and no later than notReadyAfter +
// 2×probeInterval + probeTimeout after the cut (the next probe starts within
// a probe interval and waits out its timeout; the engine then needs
// notReadyAfter of evidence, reached within one more probe interval), plus
// the write path.
func TestBlackholeNotReadyBound(t *testing.T) {
	const (
		prodProbe    = 5 * time.Second
		prodTimeout  = 3 * time.Second
		prodNotReady = 30 * time.Second
	)
	f := newFleet(t, harness.HostOptions{}, harness.MemberOptions{Name: "member-a", Nodes: 1})
	cfg := strings.NewReplacer(
		"  probeInterval: 1s\n", "  probeInterval: 5s\n",
		"  cordonAfter: 2s\n", "  cordonAfter: 10s\n",
		"  notReadyAfter: 10s\n", "  notReadyAfter: 30s\n",
		"  readyAfter: 4s\n", "  readyAfter: 30s\n",
		"  window: 60s\n", "  window: 10m\n",
		"  probeTimeout: 1s\n", "  probeTimeout: 3s\n",
	).Replace(testConfig)
	if !strings.Contains(cfg, "notReadyAfter: 30s") || !strings.Contains(cfg, "probeTimeout: 3s") {
		t.Fatalf("could not set production thresholds in:\n%s", cfg)
	}
	f.writeConfig(t, cfg)
	f.startLeafsync(t, "leafsync")
	f.register(t, "member-a", nil)
	const leaf = "leaf-member-a"
	f.waitLeafReady(t, leaf, time.Minute)
	rec := recordNode(t, f.host, leaf)
	if err := f.members["member-a"].proxy.Blackhole(); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	bound := prodNotReady + 2*prodProbe + prodTimeout
	f.waitLeafNotReady(t, leaf, bound+writeSlack+30*time.Second)
	took := firstNotReady(rec.observations(t)).Sub(cut)
	t.Logf("blackholed member's leaf NotReady %s after the cut (bound notReadyAfter %s + 2×probe interval %s + probe timeout %s = %s)",
		took.Round(time.Millisecond), prodNotReady, prodProbe, prodTimeout, bound)
	if took < prodNotReady {
		t.Errorf("NotReady %s after the cut, before notReadyAfter", took)
	}
	if took > bound+writeSlack {
		t.Errorf("NotReady %s after the cut, later than the bound %s (+%s to write)", took, bound, writeSlack)
	}
}

// waitLeafNotReady waits until the leaf's Ready condition is not True.
func (f *fleet) waitLeafNotReady(t *testing.T, leaf string, timeout time.Duration) {
	t.Helper()
	harness.Eventually(t, timeout, "leaf "+leaf+" NotReady", func() error {
		if s := harness.NodeReady(f.node(t, leaf)); s == corev1.ConditionTrue {
			return fmt.Errorf("Ready=%q", s)
		}
		return nil
	})
}
