package hysteresis

import (
	"testing"
	"time"
	"unsafe"
)

// The case: the snapshot was written by a leader whose clock ran
// 10 min ahead. The next leader probes a dead member every 5s for 5 min;
// every probe lies before the snapshot's last observation. None may be
// dropped: the leaf is NotReady within notReadyAfter + one probe interval
// of observations (the 19th failed probe, 90s after the first).
func TestRestoreFromClockAheadDoesNotFreeze(t *testing.T) {
	cfg := DefaultConfig() // probeInterval 5s, notReadyAfter 90s
	pi := cfg.ProbeInterval.Duration
	ahead := newFleet(t, cfg)
	run(t, ahead, every(0, sec(60), pi, okAt))
	snap, err := ahead.SnapshotCluster("c")
	if err != nil {
		t.Fatal(err)
	}

	f := newFleet(t, cfg)
	if err := f.RestoreCluster(snap); err != nil {
		t.Fatal(err)
	}
	start := t0.Add(sec(60) - 10*time.Minute + pi) // this process's clock: 10 min behind
	bound := int((cfg.NotReadyAfter.Duration + pi) / pi)
	rejected, notReadyAt := 0, -1
	var st Status
	for i := range 60 {
		st, _, err = f.Observe("c", Observation{Time: start.Add(time.Duration(i) * pi), Class: ClassNetwork, Detail: "i/o timeout"})
		if err != nil {
			rejected++
			continue
		}
		if st.State == NotReady && notReadyAt < 0 {
			notReadyAt = i
		}
	}
	if rejected > 0 {
		t.Errorf("%d of 60 failed probes rejected", rejected)
	}
	if notReadyAt < 0 || notReadyAt > bound {
		t.Fatalf("NotReady at failed probe %d (-1: never), want by probe %d (notReadyAfter %v + one probe interval); final state %s",
			notReadyAt, bound, cfg.NotReadyAfter, st.State)
	}
}

// A step back reports itself once (Status.ClockStep), and leaves every
// time the engine holds in the new clock, at or before LastObserved, with
// the outage's durations intact.
func TestClockStepBackMidOutage(t *testing.T) {
	cfg := DefaultConfig()
	pi := cfg.ProbeInterval.Duration
	f := newFleet(t, cfg)
	run(t, f, concat(every(0, sec(20), pi, okAt), every(sec(25), sec(200), pi, netAt))) // NotReady at 115s
	before, _ := f.Status("c")
	if before.State != NotReady {
		t.Fatalf("setup: %s, want NotReady", before.State)
	}

	const step = 3 * time.Hour
	at := t0.Add(sec(205) - step)
	st, trs, err := f.Observe("c", Observation{Time: at, OK: true})
	if err != nil {
		t.Fatal(err)
	}
	if st.ClockStep != pi-step {
		t.Errorf("ClockStep %v, want %v", st.ClockStep, pi-step)
	}
	if len(trs) != 1 || trs[0].To != Recovering || !trs[0].Time.Equal(at) {
		t.Errorf("transitions %s, want NotReady->Recovering at the observation", fmtTransitions(trs))
	}
	shift := at.Sub(before.LastObserved) - pi
	if !st.OutageSince.Equal(before.OutageSince.Add(shift)) || !st.UnreachableSince.Equal(before.UnreachableSince.Add(shift)) {
		t.Errorf("outage %v..%v not moved with the clock (was %v..%v, shift %v)", st.UnreachableSince, st.OutageSince, before.UnreachableSince, before.OutageSince, shift)
	}
	if got := st.OutageSince.Sub(st.UnreachableSince); got != cfg.NotReadyAfter.Duration {
		t.Errorf("outage began %v before it was confirmed, want notReadyAfter %v", got, cfg.NotReadyAfter)
	}
	for _, tm := range []time.Time{st.Since, st.OutageSince, st.UnreachableSince} {
		if tm.After(st.LastObserved) {
			t.Errorf("a time %v lies after LastObserved %v", tm, st.LastObserved)
		}
	}

	// Recovery continues in the new clock: readyAfter (30s) of success.
	for i := 1; i <= 6; i++ {
		st, _, _ = f.Observe("c", Observation{Time: at.Add(time.Duration(i) * pi), OK: true})
		if st.ClockStep != 0 {
			t.Fatalf("ClockStep %v on a forward observation", st.ClockStep)
		}
	}
	if st.State != Ready {
		t.Errorf("after readyAfter of success in the new clock: %s", st.State)
	}
	k, _ := f.Counters("c")
	if k.ClockSteps != 1 {
		t.Errorf("Counters.ClockSteps %d, want 1", k.ClockSteps)
	}
	for s, d := range k.TimeIn {
		if d < 0 {
			t.Errorf("negative time in %s: %v", State(s), d)
		}
	}
}

// Flap damping decays in the new clock after a step back: the penalty is
// neither lost nor frozen.
func TestClockStepBackKeepsPenalty(t *testing.T) {
	cfg := DefaultConfig()
	f := newFleet(t, cfg)
	run(t, f, []ev{okAt(0), netAt(sec(5)), okAt(sec(10))}) // one flap
	before, _ := f.Status("c")
	st, _, err := f.Observe("c", okAt(sec(10)-time.Hour).obs())
	if err != nil {
		t.Fatal(err)
	}
	if before.Penalty == 0 || st.Penalty > before.Penalty || st.Penalty < 0.99*before.Penalty {
		t.Errorf("penalty %g after the step, %g before: want it decayed over one probe interval only", st.Penalty, before.Penalty)
	}
	at := sec(10) - time.Hour + cfg.HalfLife.Duration
	st, _, _ = f.Observe("c", okAt(at).obs())
	if want := before.Penalty / 2; st.Penalty > want || st.Penalty < 0.98*want {
		t.Errorf("one half-life after the step: penalty %g, want about %g", st.Penalty, want)
	}
}

// Another cluster's release stamped by a clock that ran ahead does not
// hold the mass guard's pacing for as long as that clock is ahead.
func TestReleaseFromClockAheadDoesNotHoldPacing(t *testing.T) {
	cfg := DefaultConfig()
	f := newFleet(t, cfg, "a", "b", "c")
	ff := f.clusters["a"]
	ff.releasedAt = t0.Add(10 * time.Hour)
	last := f.lastRelease(t0)
	if !last.Equal(t0) || !ff.releasedAt.Equal(t0) {
		t.Errorf("release in the future taken as %v (stored %v), want %v", last, ff.releasedAt, t0)
	}
}

// stepWall returns t, which must come from time.Now, as time.Now would
// return it had the system clock been stepped by d (whole seconds) just
// before: the wall reading moved, the monotonic reading kept. The time
// package has no API for it; the layout it relies on (wall seconds since
// 1885 in bits 30-62 of the first word when the monotonic bit is set) is
// checked, so a change of Go's layout fails the test instead of fooling it.
func stepWall(t *testing.T, now time.Time, d time.Duration) time.Time {
	t.Helper()
	if !monotonic(now) || d%time.Second != 0 {
		t.Fatalf("stepWall needs a time from time.Now and whole seconds")
	}
	stepped := now
	p := (*struct {
		wall uint64
		ext  int64
		loc  *time.Location
	})(unsafe.Pointer(&stepped))
	p.wall = uint64(int64(p.wall) + int64(d/time.Second)<<30)
	if !stepped.Round(0).Equal(now.Round(0).Add(d)) || stepped.Sub(now) != 0 || !monotonic(stepped) {
		t.Fatalf("time.Time layout changed: cannot step the wall clock alone")
	}
	return stepped
}

// Within one process (times from time.Now), a wall-clock step either way
// is measured exactly against the monotonic clock: the outage goes
// NotReady at the same probe as without the step, not one earlier (a step
// ahead is not a gap) nor later (a step back costs nothing), and its times
// read in the new clock.
func TestMonotonicClockStep(t *testing.T) {
	cfg := DefaultConfig()
	pi := cfg.ProbeInterval.Duration
	for _, step := range []time.Duration{-3 * time.Hour, -2 * time.Second, 2 * time.Second, 10 * time.Minute, 3 * time.Hour} {
		t.Run(step.String(), func(t *testing.T) {
			base := time.Now()
			f := newFleet(t, cfg)
			var st Status
			notReadyAt := -1
			for i := range 30 {
				at := base.Add(time.Duration(i) * pi)
				if i >= 10 {
					at = stepWall(t, at, step) // stepped before probe 10
				}
				o := Observation{Time: at, OK: i < 5, Class: ClassNetwork}
				if o.OK {
					o.Class = 0
				}
				var err error
				if st, _, err = f.Observe("c", o); err != nil {
					t.Fatal(err)
				}
				if want := time.Duration(0); i == 10 {
					want = step
					if st.ClockStep != want {
						t.Errorf("probe %d: ClockStep %v, want %v", i, st.ClockStep, want)
					}
				} else if st.ClockStep != 0 {
					t.Errorf("probe %d: ClockStep %v, want 0", i, st.ClockStep)
				}
				if st.State == NotReady && notReadyAt < 0 {
					notReadyAt = i
				}
			}
			if want := 5 + int(cfg.NotReadyAfter.Duration/pi); notReadyAt != want {
				t.Errorf("NotReady at probe %d, want %d as without a step", notReadyAt, want)
			}
			if want := base.Add(5 * pi).Add(step).Round(0).UTC(); !st.UnreachableSince.Equal(want) {
				t.Errorf("UnreachableSince %v, want %v (the first failure, in the new clock)", st.UnreachableSince, want)
			}
		})
	}
}

// Times with monotonic readings and no step decide exactly as the same
// times without them.
func TestMonotonicReadingsChangeNothingWithoutAStep(t *testing.T) {
	base := time.Now()
	trace := concat(every(0, sec(20), sec(5), okAt), every(sec(25), sec(40), sec(5), netAt), every(sec(45), sec(200), sec(4.9), netAt),
		every(sec(205), sec(260), sec(5.2), okAt))
	a, b := newFleet(t, DefaultConfig()), newFleet(t, DefaultConfig())
	for _, e := range trace {
		o := e.obs()
		o.Time = base.Add(e.at)
		sa, ta, _ := a.Observe("c", o)
		o.Time = o.Time.Round(0)
		sb, tb, _ := b.Observe("c", o)
		if sa != sb || fmtTransitions(ta) != fmtTransitions(tb) {
			t.Fatalf("at %v: with monotonic readings %+v, without %+v", e.at, sa, sb)
		}
	}
}
