package shard

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// live is how many replicas s sees live.
func live(s *Sharder) int { return s.metricsState().Live }

// step moves clk on and waits for the sharders' renewal at the new time.
func step(t *testing.T, clk *clocktesting.FakeClock, d time.Duration, sharders ...*Sharder) {
	t.Helper()
	clk.Step(d)
	for _, s := range sharders {
		eventually(t, s.Replica()+" renewed", func() bool {
			s.mu.RLock()
			defer s.mu.RUnlock()
			return s.renewed.Equal(clk.Now())
		})
	}
}

// takeAll asks every sharder to take every member, as the clusters
// controller does for the members assigned to it.
func takeAll(t *testing.T, sharders ...*Sharder) {
	t.Helper()
	for _, m := range testMembers {
		for _, s := range sharders {
			if _, err := s.Take(context.Background(), m); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// pair is two replicas on one API that have each taken the members
// assigned to them.
type pair struct {
	a, b     *Sharder
	ca, cb   *changes
	ofA, ofB []string
}

// startPair starts replicas leafsync-a and leafsync-b (on clocks clkA and
// clkB, which may be one), waits until each sees both live, and has each
// take every member it is assigned.
func startPair(t *testing.T, api *fakeAPI, clkA, clkB *clocktesting.FakeClock) pair {
	t.Helper()
	p := pair{ca: &changes{}, cb: &changes{}}
	p.a = startSharder(t, api, clkA, "leafsync-a", p.ca)
	p.b = startSharder(t, api, clkB, "leafsync-b", p.cb)
	eventually(t, "both see two live replicas", func() bool { return live(p.a) == 2 && live(p.b) == 2 })
	takeAll(t, p.a, p.b)
	for _, m := range testMembers {
		if p.a.Acting(m) {
			p.ofA = append(p.ofA, m)
		}
		if p.b.Acting(m) {
			p.ofB = append(p.ofB, m)
		}
	}
	return p
}

// TestEachMemberHasExactlyOneWriter: two replicas on one API, every member
// assigned to one of them and acted on by exactly that one.
func TestEachMemberHasExactlyOneWriter(t *testing.T) {
	api, clk := newFakeAPI(), clocktesting.NewFakeClock(time.Now())
	p := startPair(t, api, clk, clk)
	a, b, ca, cb := p.a, p.b, p.ca, p.cb
	for _, m := range testMembers {
		if a.Assigned(m) == b.Assigned(m) {
			t.Fatalf("%s: assigned to a %v, to b %v: want exactly one", m, a.Assigned(m), b.Assigned(m))
		}
		owner, other := a, b
		if b.Assigned(m) {
			owner, other = b, a
		}
		eventually(t, m+" acted on by its owner only", func() bool { return owner.Acting(m) && !other.Acting(m) })
		eventually(t, other.Replica()+" sees "+owner.Replica()+" hold "+m+" at term 1", func() bool {
			h, _ := other.Holder(m)
			return h == Holder{Replica: owner.Replica(), Incarnation: owner.Identity(), Term: 1}
		})
		if err := owner.Confirm(context.Background(), m); err != nil {
			t.Errorf("%s: the owner's Confirm: %v", m, err)
		}
		if err := other.Confirm(context.Background(), m); !errors.Is(err, ErrNotOwner) {
			t.Errorf("%s: the other's Confirm: %v, want ErrNotOwner", m, err)
		}
	}
	if ca.count("alpha") == 0 || cb.count("alpha") == 0 {
		t.Errorf("OnChange never told about alpha (a %d, b %d)", ca.count("alpha"), cb.count("alpha"))
	}
}

// TestPausedReplicaActsOnNothingAndComesBackAsANewIncarnation: renewals
// that do not land for LeaseDuration (a pause, a cut) make Held false at
// once; the replica then acquires as a new incarnation, which holds none
// of the old one's members until it takes them again.
func TestPausedReplicaActsOnNothingAndComesBackAsANewIncarnation(t *testing.T) {
	api, clk := newFakeAPI(), clocktesting.NewFakeClock(time.Now())
	var ch changes
	a := startSharder(t, api, clk, "leafsync-a", &ch)
	eventually(t, "alpha assigned", func() bool { return a.Assigned("alpha") })
	if ok, err := a.Take(context.Background(), "alpha"); !ok || err != nil {
		t.Fatalf("Take: %v %v", ok, err)
	}
	old := a.Identity()
	eventually(t, "acting on alpha, and told so", func() bool { return a.Acting("alpha") && ch.count("alpha") >= 2 })
	told := ch.count("alpha")

	api.mu.Lock()
	api.beforeUpdate = func(*coordinationv1.Lease) error { return apierrors.NewServiceUnavailable("cut") }
	api.mu.Unlock()
	clk.Step(testLeaseDuration - time.Second)
	if !a.Held() {
		t.Fatal("not held before LeaseDuration has passed")
	}
	clk.Step(time.Second)
	if a.Held() || a.Acting("alpha") || a.Identity() != "" {
		t.Fatalf("LeaseDuration without a renewal: held %v, acting %v, identity %q", a.Held(), a.Acting("alpha"), a.Identity())
	}
	if err := a.Confirm(context.Background(), "alpha"); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("Confirm while not held: %v, want ErrNotOwner", err)
	}
	eventually(t, "OnChange told that alpha is no longer acted on", func() bool { return ch.count("alpha") > told })

	api.mu.Lock()
	api.beforeUpdate = nil
	api.mu.Unlock()
	clk.Step(testRenewInterval)
	eventually(t, "held again", a.Held)
	if a.Identity() == old {
		t.Fatalf("held again as the same incarnation %s", old)
	}
	if a.Acting("alpha") {
		t.Fatal("the new incarnation acts on the old one's member before taking it")
	}
	if ok, err := a.Take(context.Background(), "alpha"); !ok || err != nil {
		t.Fatalf("Take by the new incarnation: %v %v", ok, err)
	}
	if h, _ := a.Holder("alpha"); h.Incarnation != a.Identity() || h.Term != 2 {
		t.Fatalf("holder after the retake %+v, want %s at term 2", h, a.Identity())
	}
	if got := a.metricsState().Handovers; got["new"] != 1 || got["failover"] != 1 {
		t.Fatalf("handovers %v, want new 1 and failover 1", got)
	}
}

// TestLapsedReplicaKeepsItsMembersWarm: a replica whose own shard Lease
// lapsed (renewals that did not come back in time) still counts itself in
// the assignment and keeps the members its former incarnation holds
// (KeepWarm) without acting on them; held again, it takes them back from
// that incarnation at once, at the next term. A member another replica
// took meanwhile is not kept.
func TestLapsedReplicaKeepsItsMembersWarm(t *testing.T) {
	api, clk := newFakeAPI(), clocktesting.NewFakeClock(time.Now())
	a := startSharder(t, api, clk, "leafsync-a", &changes{})
	eventually(t, "alpha and bravo assigned", func() bool { return a.Assigned("alpha") && a.Assigned("bravo") })
	for _, m := range []string{"alpha", "bravo"} {
		if ok, err := a.Take(context.Background(), m); !ok || err != nil {
			t.Fatalf("Take %s: %v %v", m, ok, err)
		}
	}
	old := a.Identity()

	// A renewal that hangs: the Lease lapses while tend still waits for
	// it, then renewals fail.
	hung, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	unhang := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unhang)
	api.mu.Lock()
	api.beforeUpdate = func(*coordinationv1.Lease) error {
		select {
		case hung <- struct{}{}:
			<-release
		default:
		}
		return apierrors.NewTimeoutError("slow", 1)
	}
	api.mu.Unlock()
	clk.Step(testRenewInterval)
	<-hung
	clk.Step(testLeaseDuration)
	if a.Held() || a.Acting("alpha") {
		t.Fatalf("lapsed: held %v, acting %v", a.Held(), a.Acting("alpha"))
	}
	a.Invalidate()
	time.Sleep(100 * time.Millisecond) // the recomputation, while tend hangs
	if !a.Assigned("alpha") || !a.KeepWarm("alpha") {
		t.Fatalf("lapsed, the renewal still hanging: alpha assigned %v, kept warm %v", a.Assigned("alpha"), a.KeepWarm("alpha"))
	}
	unhang()
	// Another replica takes bravo meanwhile (written past the failing
	// updates: a create after a delete).
	if err := api.CoordinationV1().Leases(testNamespace).Delete(context.Background(), MemberLeaseName("bravo"), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.CoordinationV1().Leases(testNamespace).Create(context.Background(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: MemberLeaseName("bravo"), Namespace: testNamespace,
			Labels: map[string]string{LabelRing: "leafsync", LabelLeaseKind: kindMember}, Annotations: map[string]string{AnnotationCluster: "bravo"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("leafsync-b-0000000b"), LeaseTransitions: ptr.To[int32](2)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "alpha kept warm while the Lease lapsed, bravo not", func() bool {
		return a.Assigned("alpha") && a.KeepWarm("alpha") && !a.KeepWarm("bravo")
	})
	if ok, err := a.TakeBack(context.Background(), "alpha"); ok || err != nil {
		t.Fatalf("TakeBack while the Lease lapsed: %v %v, want false", ok, err)
	}

	api.mu.Lock()
	api.beforeUpdate = nil
	api.mu.Unlock()
	clk.Step(testRenewInterval)
	eventually(t, "held again", a.Held)
	if a.Identity() == old || !a.KeepWarm("alpha") {
		t.Fatalf("held again: identity %s (was %s), alpha kept warm %v", a.Identity(), old, a.KeepWarm("alpha"))
	}
	if ok, err := a.TakeBack(context.Background(), "bravo"); ok || err != nil {
		t.Fatalf("TakeBack of bravo, which another replica took: %v %v, want false", ok, err)
	}
	if h, _ := a.Holder("bravo"); h.Incarnation != "leafsync-b-0000000b" {
		t.Fatalf("bravo after a refused TakeBack: %+v, want it left to leafsync-b", h)
	}
	if ok, err := a.TakeBack(context.Background(), "alpha"); !ok || err != nil {
		t.Fatalf("taking alpha back: %v %v", ok, err)
	}
	if h, _ := a.Holder("alpha"); h.Incarnation != a.Identity() || h.Term != 2 || !a.Acting("alpha") {
		t.Fatalf("alpha after the take back: %+v, acting %v; want %s at term 2", h, a.Acting("alpha"), a.Identity())
	}
}

// TestTakeLosesTheRaceToAForeignWrite: a take that another writer beats
// between the read and the write conflicts and reports false.
func TestTakeLosesTheRaceToAForeignWrite(t *testing.T) {
	api, clk := newFakeAPI(), clocktesting.NewFakeClock(time.Now())
	a := startSharder(t, api, clk, "leafsync-a", &changes{})
	eventually(t, "alpha assigned", func() bool { return a.Assigned("alpha") })
	if ok, err := a.Take(context.Background(), "alpha"); !ok || err != nil {
		t.Fatalf("Take: %v %v", ok, err)
	}
	if err := a.Release(context.Background(), "alpha"); err != nil {
		t.Fatal(err)
	}
	api.mu.Lock()
	api.beforeUpdate = func(l *coordinationv1.Lease) error {
		if l.Name != MemberLeaseName("alpha") {
			return nil
		}
		foreign := api.lease(t, l.Name)
		foreign.Spec.HolderIdentity = ptr.To("leafsync-b-0badcafe")
		api.write(t, foreign)
		return nil
	}
	api.mu.Unlock()
	if ok, err := a.Take(context.Background(), "alpha"); ok || err != nil {
		t.Fatalf("Take against a foreign write: %v %v, want false and no error", ok, err)
	}
	if h := ptr.Deref(api.lease(t, MemberLeaseName("alpha")).Spec.HolderIdentity, ""); h != "leafsync-b-0badcafe" {
		t.Fatalf("holder %q: the foreign write was overwritten", h)
	}
	if a.Acting("alpha") {
		t.Fatal("acting on a member another replica took")
	}
}

// TestDrainHandsEveryMemberOverBeforeItReturns: a draining replica is
// assigned nothing; the other takes its members while it still serves
// them; Drain returns once it holds none, and the former owner's Confirm
// refuses from then on.
func TestDrainHandsEveryMemberOverBeforeItReturns(t *testing.T) {
	api, clk := newFakeAPI(), clocktesting.NewFakeClock(time.Now())
	p := startPair(t, api, clk, clk)
	a, b, mine := p.a, p.b, p.ofA
	if len(mine) == 0 {
		t.Fatal("a holds no member to drain")
	}
	drained := make(chan error, 1)
	go func() { drained <- a.Drain(context.Background()) }()
	eventually(t, "the draining annotation is written", func() bool {
		return api.lease(t, ShardLeaseName("leafsync-a")).Annotations[AnnotationDraining] == "true"
	})
	eventually(t, "b sees a draining and is assigned everything", func() bool {
		for _, m := range testMembers {
			if !b.Assigned(m) {
				return false
			}
		}
		return live(b) == 1
	})
	select {
	case err := <-drained:
		t.Fatalf("Drain returned (%v) while a still held %v", err, mine)
	default:
	}
	for _, m := range mine {
		if !a.Acting(m) {
			t.Fatalf("a stopped acting on %s before b took it (break before make)", m)
		}
	}
	takeAll(t, b)
	select {
	case err := <-drained:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Drain did not return once b held every member")
	}
	for _, m := range mine {
		if err := a.Confirm(context.Background(), m); !errors.Is(err, ErrNotOwner) {
			t.Errorf("%s: a's Confirm after the handover: %v", m, err)
		}
		// a passed the member over; b acts once its view shows that.
		eventually(t, "b acts on "+m, func() bool { return b.Acting(m) })
		if h, _ := b.Holder(m); h.Term != 2 {
			t.Errorf("%s: term %d after one handover, want 2", m, h.Term)
		}
	}
	if got := b.metricsState().Handovers["rebalance"]; got != uint64(len(mine)) {
		t.Errorf("b counted %d rebalance handovers, want %d", got, len(mine))
	}
}

// TestExpiredReplicasMembersFailOver: when a replica stops renewing, the
// others see its Lease unrenewed for its duration (their clock) and take
// its members.
func TestExpiredReplicasMembersFailOver(t *testing.T) {
	api, clkB := newFakeAPI(), clocktesting.NewFakeClock(time.Now())
	p := startPair(t, api, clocktesting.NewFakeClock(time.Now()), clkB)
	b, lost := p.b, p.ofA
	// a is frozen (its clock stands still: no renewal); b's time runs.
	step(t, clkB, testLeaseDuration-testRenewInterval, b)
	takeAll(t, b)
	for _, m := range lost {
		if b.Acting(m) {
			t.Fatalf("b took %s before a's Lease expired in its view", m)
		}
	}
	step(t, clkB, 2*testRenewInterval, b)
	eventually(t, "b sees a gone", func() bool { return live(b) == 1 })
	takeAll(t, b)
	for _, m := range lost {
		eventually(t, "b acts on "+m, func() bool { return b.Acting(m) })
	}
	if got := b.metricsState().Handovers["failover"]; got != uint64(len(lost)) {
		t.Errorf("b counted %d failovers, want %d", got, len(lost))
	}
}

// TestStopReleases: on the way out a replica releases its members and
// its shard Lease, so the others need not wait for an expiry.
func TestStopReleases(t *testing.T) {
	api, clk := newFakeAPI(), clocktesting.NewFakeClock(time.Now())
	s, err := New(Options{Client: api, Namespace: testNamespace, Ring: "leafsync", Replica: "leafsync-a",
		Members: func() []string { return testMembers }, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	stop := run(t, s)
	eventually(t, "held", s.Held)
	eventually(t, "everything assigned", func() bool { return s.Assigned("alpha") })
	if ok, err := s.Take(context.Background(), "alpha"); !ok || err != nil {
		t.Fatalf("Take: %v %v", ok, err)
	}
	stop()
	if s.Acting("alpha") {
		t.Error("acting after Start returned")
	}
	for _, name := range []string{MemberLeaseName("alpha"), ShardLeaseName("leafsync-a")} {
		if h := api.lease(t, name).Spec.HolderIdentity; h != nil {
			t.Errorf("%s still held by %q after exit", name, *h)
		}
	}
}

func TestMetrics(t *testing.T) {
	api, clk := newFakeAPI(), clocktesting.NewFakeClock(time.Now())
	a := startSharder(t, api, clk, "leafsync-a", &changes{})
	eventually(t, "everything assigned", func() bool { return a.metricsState().Assigned == len(testMembers) })
	for _, m := range testMembers[:3] {
		if ok, err := a.Take(context.Background(), m); !ok || err != nil {
			t.Fatalf("Take %s: %v %v", m, ok, err)
		}
	}
	want := `
# HELP leafsync_shard_assigned_members ` + "Members the assignment (rendezvous hashing with bounded loads over the live replicas) gives this replica. Differs from leafsync_shard_members while a handover is under way." + `
# TYPE leafsync_shard_assigned_members gauge
leafsync_shard_assigned_members{replica="leafsync-a"} 8
# HELP leafsync_shard_members ` + "Members this replica acts on now: it holds its shard Lease and the member's Lease names this replica's incarnation as writer. Summed over the replicas, it equals the registered members when every member has an owner." + `
# TYPE leafsync_shard_members gauge
leafsync_shard_members{replica="leafsync-a"} 3
`
	if err := testutil.CollectAndCompare(a, strings.NewReader(want), "leafsync_shard_members", "leafsync_shard_assigned_members"); err != nil {
		t.Error(err)
	}
	st := a.metricsState()
	if !st.Held || st.Live != 1 || st.Handovers["new"] != 3 {
		t.Errorf("state %+v: want held, 1 live replica, 3 new handovers", st)
	}
}

// TestAStrangerOnTheShardLeaseIsWaitedOut: a shard Lease that names an
// incarnation this process does not know (an earlier process of this
// replica that did not release it, or still runs) is taken only once it
// has not been renewed for its duration; what that incarnation held is
// then taken back at once.
func TestAStrangerOnTheShardLeaseIsWaitedOut(t *testing.T) {
	api, clk := newFakeAPI(), clocktesting.NewFakeClock(time.Now())
	stranger := "leafsync-a-5a5a5a5a"
	for _, l := range []*coordinationv1.Lease{
		{ObjectMeta: metav1.ObjectMeta{Name: ShardLeaseName("leafsync-a"), Namespace: testNamespace,
			Labels: map[string]string{LabelRing: "leafsync", LabelLeaseKind: kindReplica}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(stranger), LeaseDurationSeconds: ptr.To(int32(15))}},
		{ObjectMeta: metav1.ObjectMeta{Name: MemberLeaseName("alpha"), Namespace: testNamespace,
			Labels:      map[string]string{LabelRing: "leafsync", LabelLeaseKind: kindMember},
			Annotations: map[string]string{AnnotationCluster: "alpha"}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(stranger), LeaseTransitions: ptr.To(int32(4))}},
	} {
		if _, err := api.CoordinationV1().Leases(testNamespace).Create(context.Background(), l, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := New(Options{Client: api, Namespace: testNamespace, Ring: "leafsync", Replica: "leafsync-a",
		LeaseDuration: testLeaseDuration, RenewInterval: testRenewInterval,
		Members: func() []string { return testMembers }, Clock: clk, Logger: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	run(t, s)

	// The stranger renews twice, then stops.
	for range 2 {
		clk.Step(testRenewInterval)
		l := api.lease(t, ShardLeaseName("leafsync-a"))
		l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(clk.Now()))
		api.write(t, l)
		time.Sleep(50 * time.Millisecond)
		if s.Held() {
			t.Fatal("took the shard Lease from a holder that renews it")
		}
	}
	for elapsed := time.Duration(0); elapsed < testLeaseDuration-testRenewInterval; elapsed += testRenewInterval {
		clk.Step(testRenewInterval)
		time.Sleep(50 * time.Millisecond)
		if s.Held() {
			t.Fatalf("took the shard Lease %s after the stranger's last renewal", elapsed+testRenewInterval)
		}
	}
	clk.Step(2 * testRenewInterval)
	eventually(t, "held once the stranger is silent for the Lease's duration", s.Held)
	eventually(t, "alpha assigned", func() bool { return s.Assigned("alpha") })
	if ok, err := s.Take(context.Background(), "alpha"); !ok || err != nil {
		t.Fatalf("Take from the stranger: %v %v", ok, err)
	}
	if h, _ := s.Holder("alpha"); h.Term != 5 {
		t.Fatalf("term %d after the take, want 5", h.Term)
	}
	if got := s.metricsState().Handovers["failover"]; got != 1 {
		t.Fatalf("failovers %d, want 1", got)
	}
}

// TestResumedReplicaDoesNotTrustItsStaleView: a replica paused for longer
// than a Lease's duration finds, on resuming, the others' last renewals
// long past on its clock; they are not expired for that: it does not take
// their members as failovers.
func TestResumedReplicaDoesNotTrustItsStaleView(t *testing.T) {
	api, clkA := newFakeAPI(), clocktesting.NewFakeClock(time.Now())
	p := startPair(t, api, clkA, clocktesting.NewFakeClock(time.Now()))
	a, b, bs := p.a, p.b, p.ofB
	old := a.Identity()
	clkA.Step(60 * time.Second) // a was paused; b's renewals went unseen
	eventually(t, "a held again as a new incarnation", func() bool { return a.Held() && a.Identity() != old })
	takeAll(t, a)
	for _, m := range bs {
		if a.Acting(m) || !b.Acting(m) {
			t.Errorf("%s: the resumed a took it from live b (a acting %v, b acting %v)", m, a.Acting(m), b.Acting(m))
		}
	}
	if got := a.metricsState().Handovers["failover"]; got > uint64(len(testMembers)-len(bs)) {
		t.Errorf("a counted %d failovers, more than its own former members", got)
	}
}

// TestFailoverReadsTheHoldersLeaseAfresh: a view that fell behind (a
// stalled watch) shows a live replica expired; a take for failover reads
// that replica's shard Lease first and takes nothing from it.
func TestFailoverReadsTheHoldersLeaseAfresh(t *testing.T) {
	api, clk := newFakeAPI(), clocktesting.NewFakeClock(time.Now())
	p := startPair(t, api, clk, clk)
	a, b, bs := p.a, p.b, p.ofB
	stale := api.lease(t, ShardLeaseName("leafsync-b")).ResourceVersion
	step(t, clk, testRenewInterval, a, b)
	fresh := api.lease(t, ShardLeaseName("leafsync-b")).ResourceVersion
	eventually(t, "a saw b's renewal", func() bool {
		a.mu.RLock()
		defer a.mu.RUnlock()
		return a.replicas["leafsync-b"].version == fresh
	})
	// a's watch missed b's renewals for an hour.
	a.mu.Lock()
	o := a.replicas["leafsync-b"]
	o.version, o.seen = stale, clk.Now().Add(-time.Hour)
	a.replicas["leafsync-b"] = o
	m := a.members[bs[0]]
	m.since = clk.Now().Add(-time.Hour)
	a.members[bs[0]] = m
	a.mu.Unlock()
	if _, err := a.recompute(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	if !a.Assigned(bs[0]) {
		t.Fatalf("a's stale view does not assign it %s: the test shows nothing", bs[0])
	}
	if ok, err := a.Take(context.Background(), bs[0]); ok || err != nil {
		t.Fatalf("a took %s from live b on a stale view: %v %v", bs[0], ok, err)
	}
	if h := ptr.Deref(api.lease(t, MemberLeaseName(bs[0])).Spec.HolderIdentity, ""); h != b.Identity() {
		t.Fatalf("%s held by %q, want b's %s", bs[0], h, b.Identity())
	}
}
