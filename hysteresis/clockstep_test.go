package hysteresis

import (
	"testing"
	"time"
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

// A step back reports itself once (Status.ClockStepBack), and leaves every
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
	if st.ClockStepBack != step-pi {
		t.Errorf("ClockStepBack %v, want %v", st.ClockStepBack, step-pi)
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
		if st.ClockStepBack != 0 {
			t.Fatalf("ClockStepBack %v on a forward observation", st.ClockStepBack)
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
