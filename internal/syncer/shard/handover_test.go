package shard

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// oneWriter watches, until the test ends, that no moment has both from
// and to Acting on one of members. to is read first: once to acts, from
// never acts again on that member, so a true read of from after a true
// read of to is a real overlap.
func oneWriter(t *testing.T, from, to *Sharder, members []string) {
	t.Helper()
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			for _, m := range members {
				if to.Acting(m) && from.Acting(m) {
					t.Errorf("%s: %s and %s both acting on it", m, to.Identity(), from.Identity())
					return
				}
			}
		}
	}()
	t.Cleanup(func() {
		stop.Store(true)
		<-done
	})
}

// drainToB has a drain so that b is assigned every member, and returns a's.
func drainToB(t *testing.T, api *fakeAPI, p pair) {
	t.Helper()
	go func() { _ = p.a.Drain(context.Background()) }()
	eventually(t, "b sees a draining and is assigned everything", func() bool {
		for _, m := range testMembers {
			if !p.b.Assigned(m) {
				return false
			}
		}
		return live(p.b) == 1
	})
}

// TestRebalanceHasOneWriterAtEveryMoment: a rebalance take is a
// cooperative handover: the taker asks, the holder stops acting and passes
// the member Lease over; at no moment do both act on the member, and
// every member is acted on by b in the end, at term 2.
func TestRebalanceHasOneWriterAtEveryMoment(t *testing.T) {
	api, clk := newFakeAPI(), clocktesting.NewFakeClock(time.Now())
	p := startPair(t, api, clk, clk)
	a, b, mine := p.a, p.b, p.ofA
	if len(mine) == 0 {
		t.Fatal("a holds no member")
	}
	oneWriter(t, a, b, mine)
	drainToB(t, api, p)
	for _, m := range mine {
		if !a.Acting(m) {
			t.Fatalf("a stopped acting on %s before b asked for it", m)
		}
		eventually(t, "b takes "+m, func() bool {
			ok, err := b.Take(context.Background(), m)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		})
		if a.Acting(m) || !b.Acting(m) {
			t.Fatalf("%s after the handover: a acting %v, b acting %v", m, a.Acting(m), b.Acting(m))
		}
		l := api.lease(t, MemberLeaseName(m))
		if ptr.Deref(l.Spec.LeaseTransitions, 0) != 2 || l.Annotations[AnnotationHandoverTo] != "" {
			t.Fatalf("%s: term %d, handover-to %q after the handover, want 2 and none", m, ptr.Deref(l.Spec.LeaseTransitions, 0), l.Annotations[AnnotationHandoverTo])
		}
	}
	if got := b.metricsState().Handovers["rebalance"]; got != uint64(len(mine)) {
		t.Errorf("b counted %d rebalance handovers, want %d", got, len(mine))
	}
}

// mute makes a's answers to a request fail: a holder that is live but
// does not answer. An answer drops the request from a member Lease
// stamped by a's clock (clkA lags b's by an hour).
func mute(api *fakeAPI, clkB *clocktesting.FakeClock) {
	api.mu.Lock()
	defer api.mu.Unlock()
	api.beforeUpdate = func(l *coordinationv1.Lease) error {
		if l.Labels[LabelLeaseKind] == kindMember && l.Annotations[AnnotationHandoverTo] == "" && l.Spec.AcquireTime != nil && l.Spec.AcquireTime.Time.Before(clkB.Now().Add(-30*time.Minute)) {
			return apierrors.NewServiceUnavailable("muted")
		}
		return nil
	}
}

// TestUnansweredRequestFallsBackToATake: a holder that stays live but does
// not pass the member over within LeaseDuration of the request: the taker
// takes it by compare-and-swap (rebalance).
func TestUnansweredRequestFallsBackToATake(t *testing.T) {
	api := newFakeAPI()
	clkA := clocktesting.NewFakeClock(time.Now())
	clkB := clocktesting.NewFakeClock(clkA.Now().Add(time.Hour))
	p := startPair(t, api, clkA, clkB)
	a, b, m := p.a, p.b, p.ofA[0]
	mute(api, clkB)
	drainToB(t, api, p)
	if ok, err := b.Take(context.Background(), m); ok || err != nil {
		t.Fatalf("the first Take: %v %v, want a request", ok, err)
	}
	eventually(t, "a sees the request and stops acting", func() bool { return !a.Acting(m) })
	for elapsed := time.Duration(0); elapsed < testLeaseDuration-testRenewInterval; elapsed += testRenewInterval {
		step(t, clkA, testRenewInterval, a)
		step(t, clkB, testRenewInterval, b)
		if ok, _ := b.Take(context.Background(), m); ok {
			t.Fatalf("b took %s %s after its request, before LeaseDuration", m, elapsed+testRenewInterval)
		}
	}
	step(t, clkA, 2*testRenewInterval, a)
	step(t, clkB, 2*testRenewInterval, b)
	b.mu.RLock()
	alive := b.aliveLocked(a.Identity(), clkB.Now())
	b.mu.RUnlock()
	if !alive {
		t.Fatal("b does not see a live: the test shows nothing")
	}
	if ok, err := b.Take(context.Background(), m); !ok || err != nil {
		t.Fatalf("the fallback Take: %v %v", ok, err)
	}
	eventually(t, "only b acts on "+m, func() bool { return b.Acting(m) && !a.Acting(m) })
	if got := b.metricsState().Handovers; got["rebalance"] != 1 || got["failover"] != 0 {
		t.Errorf("handovers %v, want one rebalance", got)
	}
}

// TestRequestToAHolderThatDies: the holder stops renewing after the
// request: a failover as without one, LeaseDuration after b last saw it
// renew.
func TestRequestToAHolderThatDies(t *testing.T) {
	api := newFakeAPI()
	clkA := clocktesting.NewFakeClock(time.Now())
	clkB := clocktesting.NewFakeClock(clkA.Now().Add(time.Hour))
	p := startPair(t, api, clkA, clkB)
	b, m := p.b, p.ofA[0]
	mute(api, clkB)
	drainToB(t, api, p)
	if ok, err := b.Take(context.Background(), m); ok || err != nil {
		t.Fatalf("the first Take: %v %v, want a request", ok, err)
	}
	// a is frozen from now on (no renewal); b's time runs.
	step(t, clkB, testLeaseDuration-testRenewInterval, b)
	if ok, err := b.Take(context.Background(), m); ok || err != nil {
		t.Fatalf("b took %s while a was live: %v %v", m, ok, err)
	}
	step(t, clkB, 2*testRenewInterval, b)
	eventually(t, "b sees a gone", func() bool {
		b.mu.RLock()
		defer b.mu.RUnlock()
		return !b.aliveLocked(p.a.Identity(), clkB.Now())
	})
	if ok, err := b.Take(context.Background(), m); !ok || err != nil {
		t.Fatalf("the Take after a died: %v %v", ok, err)
	}
	if got := b.metricsState().Handovers; got["failover"] != 1 || got["rebalance"] != 0 {
		t.Errorf("handovers %v, want one failover", got)
	}
	if l := api.lease(t, MemberLeaseName(m)); l.Annotations[AnnotationHandoverTo] != "" {
		t.Errorf("handover-to %q left on the Lease after the failover", l.Annotations[AnnotationHandoverTo])
	}
}

// TestPassOverWakesTheTaker: the taker hears of the pass-over from its
// informer (Changed, the member's next recomputation), with no clock
// moving: the holder answers the request as its informer shows it, and the
// taker acts once its view names it holder, not at a timed next try.
func TestPassOverWakesTheTaker(t *testing.T) {
	api, clk := newFakeAPI(), clocktesting.NewFakeClock(time.Now())
	p := startPair(t, api, clk, clk)
	a, b, m := p.a, p.b, p.ofA[0]
	oneWriter(t, a, b, []string{m})
	drainToB(t, api, p)
	changed := b.Changed(m)
	if ok, err := b.Take(context.Background(), m); ok || err != nil {
		t.Fatalf("the first Take: %v %v, want a request", ok, err)
	}
	// Only a wake says when to look: the view may change for other
	// reasons first (the holder's liveness), never the clocks here.
	for !b.Acting(m) {
		select {
		case <-changed:
		case <-time.After(10 * time.Second):
			t.Fatalf("b was not woken by the pass-over of %s (holder %+v)", m, api.lease(t, MemberLeaseName(m)).Spec)
		}
		changed = b.Changed(m)
	}
	if ok, err := b.Take(context.Background(), m); !ok || err != nil {
		t.Fatalf("the Take after the wake: %v %v", ok, err)
	}
	if a.Acting(m) {
		t.Fatalf("a still acts on %s after passing it over", m)
	}
}
