package hysteresis

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// Property tests over generated probe traces (pgregory.net/rapid). Each
// property draws a valid config and a trace; a failure is shrunk to a
// minimal trace and reported.

type event struct {
	cluster string
	obs     Observation
}

type outputs struct {
	st  Status
	trs []Transition
}

func genConfig(t *rapid.T) Config {
	s := func(lo, hi int, label string) time.Duration {
		return time.Duration(rapid.IntRange(lo, hi).Draw(t, label)) * time.Second
	}
	c := Config{}
	c.ProbeInterval = D(s(1, 10, "probeInterval"))
	c.CordonAfter = D(s(0, 30, "cordonAfter"))
	c.NotReadyAfter = D(c.CordonAfter.Duration + s(1, 120, "notReadyAfter-cordonAfter"))
	c.ReadyAfter = D(s(1, 60, "readyAfter"))
	c.Window = D(c.NotReadyAfter.Duration + s(0, 600, "window-notReadyAfter"))
	c.MinAvailability = rapid.SampledFrom([]float64{0, 0.3, 0.5, 0.9, 1}).Draw(t, "minAvailability")
	c.PenaltyPerFlap = rapid.SampledFrom([]float64{0, 500, 1000}).Draw(t, "penaltyPerFlap")
	c.HalfLife = D(s(10, 1200, "halfLife"))
	c.Suppress = float64(rapid.IntRange(500, 3000).Draw(t, "suppress"))
	c.Reuse = float64(rapid.IntRange(1, int(c.Suppress)-1).Draw(t, "reuse"))
	c.MaxPenalty = c.Suppress + float64(rapid.IntRange(1, 10000).Draw(t, "maxPenalty-suppress"))
	c.MassFraction = rapid.SampledFrom([]float64{0.1, 0.3, 0.55, 1}).Draw(t, "massFraction")
	c.MassMin = rapid.IntRange(2, 4).Draw(t, "massMin")
	c.MassHoldMax = D(s(1, 600, "massHoldMax"))
	c.MassReleaseInterval = D(s(0, 60, "massReleaseInterval"))
	if err := c.Validate(); err != nil {
		t.Fatalf("generated invalid config: %v", err)
	}
	return c
}

func genClusters(t *rapid.T, lo, hi int) []string {
	n := rapid.IntRange(lo, hi).Draw(t, "clusters")
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("m%d", i)
	}
	return names
}

// modes of a generated cluster: what its probes return for a while.
const (
	modeOK = iota
	modeNetwork
	modeServer
	modeAuth
	modeConfig
	modeMixed // any outcome, each probe
	numModes
)

func outcomeFor(t *rapid.T, mode int) (bool, Class) {
	if mode == modeMixed {
		mode = rapid.IntRange(modeOK, modeConfig).Draw(t, "mixed")
	}
	switch mode {
	case modeOK:
		return true, 0
	case modeNetwork:
		return false, ClassNetwork
	case modeServer:
		return false, ClassServer
	case modeAuth:
		return false, ClassAuth
	default:
		return false, ClassConfig
	}
}

// genTrace draws rounds of probes. Time advances mostly by up to one probe
// interval, sometimes by more, rarely by a long gap; each cluster sticks to a
// mode for a while (so streaks of every length occur), sometimes all clusters
// fail at once (a mass disconnect), and probes are sometimes missing.
func genTrace(t *rapid.T, cfg Config, clusters []string, start time.Time, maxRounds int) []event {
	pi := int64(cfg.ProbeInterval.Duration / time.Millisecond)
	rounds := rapid.IntRange(1, maxRounds).Draw(t, "rounds")
	mode := make([]int, len(clusters))
	at := start
	var out []event
	for range rounds {
		var dt int64
		switch k := rapid.IntRange(0, 39).Draw(t, "dtKind"); {
		case k == 0:
			dt = rapid.Int64Range(0, int64(30*time.Minute/time.Millisecond)).Draw(t, "gap")
		case k < 4:
			dt = rapid.Int64Range(pi, 3*pi).Draw(t, "late")
		case k < 20:
			dt = pi
		default:
			dt = rapid.Int64Range(0, pi).Draw(t, "dt")
		}
		at = at.Add(time.Duration(dt) * time.Millisecond)
		if rapid.IntRange(0, 59).Draw(t, "mass") == 0 {
			for i := range mode {
				mode[i] = modeNetwork
			}
		}
		for i, c := range clusters {
			if rapid.IntRange(0, 24).Draw(t, "switch") == 0 {
				mode[i] = rapid.IntRange(0, numModes-1).Draw(t, "mode")
			}
			if rapid.IntRange(0, 29).Draw(t, "skip") == 0 {
				continue
			}
			ok, class := outcomeFor(t, mode[i])
			out = append(out, event{c, Observation{Time: at, OK: ok, Class: class, Detail: class.String()}})
		}
	}
	return out
}

func newPropFleet(t *rapid.T, cfg Config, clusters []string) *RawFleet {
	f, err := NewRawFleet(FleetConfig{Config: cfg})
	if err != nil {
		t.Fatalf("NewRawFleet: %v", err)
	}
	for _, c := range clusters {
		if err := f.Add(c, Overrides{}); err != nil {
			t.Fatalf("Add: %v", err)
		}
	}
	return f
}

func replay(t *rapid.T, f *RawFleet, trace []event) []outputs {
	out := make([]outputs, len(trace))
	for i, e := range trace {
		st, trs, err := f.Observe(e.cluster, e.obs)
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		out[i] = outputs{st, trs}
		checkInvariants(t, f, e, st)
	}
	return out
}

// checkInvariants holds after every observation.
func checkInvariants(t *rapid.T, f *RawFleet, e event, st Status) {
	cfg, _ := f.Config(e.cluster)
	if (st.State == NotReady || st.State == Recovering) && !st.Cordoned {
		t.Fatalf("%s %s but not cordoned", e.cluster, st.State)
	}
	if st.Damped && !st.Cordoned {
		t.Fatalf("damped but not cordoned")
	}
	if st.Penalty < 0 || st.Penalty > cfg.MaxPenalty {
		t.Fatalf("penalty %g outside [0, %g]", st.Penalty, cfg.MaxPenalty)
	}
	if st.Held && st.State != Suspect && st.State != Recovering {
		t.Fatalf("held in %s", st.State)
	}
	if (st.OutageSince.IsZero()) != (st.State != NotReady && st.State != Recovering) {
		t.Fatalf("OutageSince %v in %s", st.OutageSince, st.State)
	}
	if st.UnreachableSince.IsZero() != st.OutageSince.IsZero() || st.UnreachableSince.After(st.OutageSince) {
		t.Fatalf("UnreachableSince %v, OutageSince %v", st.UnreachableSince, st.OutageSince)
	}
}

// The same trace always yields the same outputs.
func TestPropDeterministic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := genConfig(t)
		cl := genClusters(t, 1, 5)
		trace := genTrace(t, cfg, cl, t0, 200)
		a := replay(t, newPropFleet(t, cfg, cl), trace)
		b := replay(t, newPropFleet(t, cfg, cl), trace)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("two runs of the same trace differ")
		}
	})
}

// Snapshot → restore at any point yields the same outputs as an
// uninterrupted run (whole-fleet or per-cluster snapshots).
func TestPropSnapshotRestore(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := genConfig(t)
		cl := genClusters(t, 1, 5)
		trace := genTrace(t, cfg, cl, t0, 200)
		cut := rapid.IntRange(0, len(trace)).Draw(t, "cut")
		perCluster := rapid.Bool().Draw(t, "perCluster")

		ref := newPropFleet(t, cfg, cl)
		want := replay(t, ref, trace)

		f := newPropFleet(t, cfg, cl)
		replay(t, f, trace[:cut])
		g, err := NewRawFleet(FleetConfig{Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		if perCluster {
			for _, c := range cl {
				snap, err := f.SnapshotCluster(c)
				if err != nil {
					t.Fatal(err)
				}
				if err := g.RestoreCluster(snap); err != nil {
					t.Fatalf("RestoreCluster: %v", err)
				}
			}
		} else {
			snap, err := f.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			if err := g.Restore(snap); err != nil {
				t.Fatalf("Restore: %v", err)
			}
		}
		got := replay(t, g, trace[cut:])
		if !reflect.DeepEqual(got, want[cut:]) {
			for i := range got {
				if !reflect.DeepEqual(got[i], want[cut+i]) {
					t.Fatalf("after restore at %d, event %d %+v:\n got %+v\nwant %+v", cut, cut+i, trace[cut+i], got[i], want[cut+i])
				}
			}
		}
		s1, _ := ref.Snapshot()
		s2, _ := g.Snapshot()
		if string(s1) != string(s2) {
			t.Fatalf("final snapshots differ:\n%s\n%s", s1, s2)
		}
	})
}

// A Suspect cluster goes NotReady only if its current network/server
// failure streak has lasted notReadyAfter (wall time), or the failures in
// the window add up to notReadyAfter (the availability rule). In particular
// failure streaks shorter than notReadyAfter never yield NotReady when the
// availability rule is off or the window holds no other failures.
func TestPropShortStreaksNeverNotReady(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := genConfig(t)
		cl := genClusters(t, 1, 4)
		trace := genTrace(t, cfg, cl, t0, 300)
		f := newPropFleet(t, cfg, cl)
		type pair struct {
			at time.Time
			dt time.Duration
		}
		type hist struct {
			hardStart time.Time // first network/server failure since the last success
			inHard    bool
			last      event
			hasLast   bool
			pairs     []pair // consecutive failure/failure (network/server) observations
		}
		h := map[string]*hist{}
		for _, c := range cl {
			h[c] = &hist{}
		}
		width := cfg.Window.Duration / windowBuckets
		for i, e := range trace {
			x := h[e.cluster]
			hardNow := !e.obs.OK && e.obs.Class.counts()
			if e.obs.OK {
				x.inHard = false
			} else if hardNow && !x.inHard {
				x.inHard, x.hardStart = true, e.obs.Time
			}
			if hardNow && x.hasLast && !x.last.obs.OK && x.last.obs.Class.counts() {
				x.pairs = append(x.pairs, pair{e.obs.Time, e.obs.Time.Sub(x.last.obs.Time)})
			}
			x.last, x.hasLast = e, true

			st, trs, err := f.Observe(e.cluster, e.obs)
			if err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, f, e, st)
			for _, tr := range trs {
				if tr.To != NotReady || tr.From == NotReady || tr.From == Recovering {
					continue
				}
				streak := e.obs.Time.Sub(x.hardStart)
				var inWindow time.Duration
				for _, p := range x.pairs {
					if p.at.After(e.obs.Time.Add(-cfg.Window.Duration - width)) {
						inWindow += p.dt
					}
				}
				if streak < cfg.NotReadyAfter.Duration && (cfg.MinAvailability == 0 || inWindow < cfg.NotReadyAfter.Duration) {
					t.Fatalf("event %d: NotReady after a %v streak (%v of failures in the window), notReadyAfter %v, minAvailability %g",
						i, streak, inWindow, cfg.NotReadyAfter, cfg.MinAvailability)
				}
			}
		}
	})
}

// A continuous outage (network/server failures at least every
// probeInterval) yields NotReady no later than notReadyAfter after the first
// failure, i.e. by the first probe at or after that: at most notReadyAfter +
// probeInterval.
func TestPropContinuousOutage(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := genConfig(t)
		f := newPropFleet(t, cfg, []string{"c"})
		prefix := genTrace(t, cfg, []string{"c"}, t0, 100)
		replay(t, f, prefix)
		at := t0
		if len(prefix) > 0 {
			at = prefix[len(prefix)-1].obs.Time
		}
		at = at.Add(time.Duration(rapid.Int64Range(0, int64(cfg.ProbeInterval.Duration)).Draw(t, "start")))
		first := at
		deadline := first.Add(cfg.NotReadyAfter.Duration)
		var lastState State
		for !at.After(deadline.Add(cfg.ProbeInterval.Duration)) {
			class := rapid.SampledFrom([]Class{ClassNetwork, ClassServer}).Draw(t, "class")
			st, _, err := f.Observe("c", Observation{Time: at, Class: class})
			if err != nil {
				t.Fatal(err)
			}
			lastState = st.State
			if !at.Before(deadline) && st.State != NotReady {
				t.Fatalf("%v into a continuous outage: %s (notReadyAfter %v)", at.Sub(first), st.State, cfg.NotReadyAfter)
			}
			at = at.Add(time.Duration(rapid.Int64Range(1, int64(cfg.ProbeInterval.Duration)).Draw(t, "dt")))
		}
		if lastState != NotReady {
			t.Fatalf("not NotReady %v after the outage began", cfg.NotReadyAfter.Duration+cfg.ProbeInterval.Duration)
		}
	})
}

// NotReady returns to Ready only after readyAfter of continuous success.
func TestPropReadyOnlyAfterReadyAfter(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := genConfig(t)
		cl := genClusters(t, 1, 3)
		trace := genTrace(t, cfg, cl, t0, 300)
		f := newPropFleet(t, cfg, cl)
		okSince := map[string]time.Time{}
		inOK := map[string]bool{}
		wasDown := map[string]bool{}
		for i, e := range trace {
			if !e.obs.OK {
				inOK[e.cluster] = false
			} else if !inOK[e.cluster] {
				inOK[e.cluster], okSince[e.cluster] = true, e.obs.Time
			}
			st, trs, err := f.Observe(e.cluster, e.obs)
			if err != nil {
				t.Fatal(err)
			}
			for _, tr := range trs {
				if tr.To == Ready && (tr.From == Recovering || tr.From == NotReady) {
					if !wasDown[e.cluster] {
						t.Fatalf("event %d: %s->Ready without having been NotReady", i, tr.From)
					}
					if d := e.obs.Time.Sub(okSince[e.cluster]); d < cfg.ReadyAfter.Duration {
						t.Fatalf("event %d: Ready after only %v of success (readyAfter %v)", i, d, cfg.ReadyAfter)
					}
				}
			}
			wasDown[e.cluster] = st.State == NotReady || st.State == Recovering
		}
	})
}

// Damping alone never yields NotReady: the same trace with damping off gives
// exactly the same states; damping only adds cordons.
func TestPropDampingNeverNotReady(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := genConfig(t)
		cfg.PenaltyPerFlap = rapid.SampledFrom([]float64{500, 1000, 5000}).Draw(t, "penalty")
		off := cfg
		off.PenaltyPerFlap = 0
		cl := genClusters(t, 1, 4)
		trace := genTrace(t, cfg, cl, t0, 300)
		a := replay(t, newPropFleet(t, cfg, cl), trace)
		b := replay(t, newPropFleet(t, off, cl), trace)
		for i := range a {
			if a[i].st.State != b[i].st.State || a[i].st.Held != b[i].st.Held {
				t.Fatalf("event %d: with damping %s, without %s", i, a[i].st.State, b[i].st.State)
			}
			if b[i].st.Cordoned && !a[i].st.Cordoned {
				t.Fatalf("event %d: damping removed a cordon", i)
			}
		}
	})
}

// While at least massFraction of the clusters and at least massMin are
// failing, a cluster moves to NotReady only when the guard releases it:
// after massHoldMax of failure evidence while held, and at least
// massReleaseInterval after the previous release. Checked against an
// independent count over the trace.
func TestPropMassGuard(t *testing.T) {
	held, releases := 0, 0
	rapid.Check(t, func(t *rapid.T) {
		cfg := genConfig(t)
		cl := genClusters(t, 2, 8)
		trace := genTrace(t, cfg, cl, t0, 300)
		f := newPropFleet(t, cfg, cl)
		hardRun := map[string]bool{}
		released := map[string]bool{}
		state := map[string]State{}
		heldFor := map[string]time.Duration{}
		var lastRelease time.Time
		for i, e := range trace {
			if e.obs.OK {
				hardRun[e.cluster] = false
				released[e.cluster] = false
			} else if e.obs.Class.counts() {
				hardRun[e.cluster] = true
			}
			failing := 0
			for _, c := range cl {
				if hardRun[c] && (state[c] != NotReady || released[c]) {
					failing++
				}
			}
			mass := failing >= cfg.MassMin && float64(failing) >= cfg.MassFraction*float64(len(cl))-1e-9
			st, trs, err := f.Observe(e.cluster, e.obs)
			if err != nil {
				t.Fatal(err)
			}
			for _, tr := range trs {
				if tr.To != NotReady || tr.From == NotReady {
					continue
				}
				released[e.cluster] = mass
				if !mass {
					continue
				}
				releases++
				if heldFor[e.cluster]+cfg.ProbeInterval.Duration*3/2 < cfg.MassHoldMax.Duration {
					t.Fatalf("event %d: %s %s->NotReady during a mass disconnect (%d of %d failing) after %v held, massHoldMax %v",
						i, e.cluster, tr.From, failing, len(cl), heldFor[e.cluster], cfg.MassHoldMax)
				}
				if !lastRelease.IsZero() && e.obs.Time.Sub(lastRelease) < cfg.MassReleaseInterval.Duration {
					t.Fatalf("event %d: %s released %v after the previous release, massReleaseInterval %v",
						i, e.cluster, e.obs.Time.Sub(lastRelease), cfg.MassReleaseInterval)
				}
				lastRelease = e.obs.Time
				if !st.Released {
					t.Fatalf("event %d: released by the guard but Status.Released is false", i)
				}
				if tr.From != Recovering && !st.UnreachableSince.Equal(st.OutageSince) {
					t.Fatalf("event %d: released by the guard, but the outage is backdated to %v (NotReady at %v)", i, st.UnreachableSince, st.OutageSince)
				}
			}
			if st.Held {
				held++
				if !mass {
					t.Fatalf("event %d: held without a mass disconnect", i)
				}
			}
			heldFor[e.cluster] = st.HeldFor
			state[e.cluster] = st.State
		}
	})
	if held == 0 || releases == 0 {
		t.Errorf("the generator did not exercise the guard: %d held, %d released", held, releases)
	}
}

// Scenario: enough clusters fail together and keep failing. None becomes
// NotReady before notReadyAfter + massHoldMax; then they go NotReady one at a
// time, at least massReleaseInterval apart, and all of them within
// notReadyAfter + massHoldMax + n×(massReleaseInterval + probeInterval) +
// probeInterval of the first failure, whatever the other clusters do (n
// counts the releases of other clusters in the meantime too: each takes a
// slot of the release rate).
func TestPropMassDisconnectScenario(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := genConfig(t)
		cl := genClusters(t, 2, 8)
		need := max(cfg.MassMin, int(cfg.MassFraction*float64(len(cl))+0.999999))
		if need > len(cl) {
			t.Skip("fleet too small for this guard")
		}
		down := cl[:rapid.IntRange(need, len(cl)).Draw(t, "down")]
		others := genTrace(t, cfg, cl[len(down):], t0, 200)
		f := newPropFleet(t, cfg, cl)
		pi := cfg.ProbeInterval.Duration
		earliest := t0.Add(cfg.NotReadyAfter.Duration + cfg.MassHoldMax.Duration)
		deadline := earliest.Add(time.Duration(len(down))*(cfg.MassReleaseInterval.Duration+pi) + pi)
		var releases []time.Time
		notReady := map[string]bool{}
		at := t0
		probeDown := func() {
			for _, c := range down {
				st, _, err := f.Observe(c, Observation{Time: at, Class: ClassNetwork})
				if err != nil {
					t.Fatal(err)
				}
				if st.State == NotReady && !notReady[c] {
					if at.Before(earliest) {
						t.Fatalf("%s NotReady %v into a mass disconnect (notReadyAfter %v + massHoldMax %v)",
							c, at.Sub(t0), cfg.NotReadyAfter, cfg.MassHoldMax)
					}
					if n := len(releases); n > 0 && at.Sub(releases[n-1]) < cfg.MassReleaseInterval.Duration {
						t.Fatalf("%s released %v after the previous one (massReleaseInterval %v)", c, at.Sub(releases[n-1]), cfg.MassReleaseInterval)
					}
					notReady[c] = true
					releases = append(releases, at)
				}
			}
		}
		for _, e := range others {
			for ; !at.After(e.obs.Time); at = at.Add(pi) {
				probeDown()
			}
			st, trs, err := f.Observe(e.cluster, e.obs)
			if err != nil {
				t.Fatal(err)
			}
			for _, tr := range trs {
				if tr.To == NotReady && tr.From != NotReady && st.Released {
					// Another cluster took a release slot: the dead ones
					// wait one more.
					deadline = deadline.Add(cfg.MassReleaseInterval.Duration + pi)
				}
			}
		}
		for ; !at.After(deadline); at = at.Add(pi) {
			probeDown()
		}
		if len(notReady) != len(down) {
			t.Fatalf("%d of %d dead clusters NotReady %v after the mass disconnect began (bound %v)",
				len(notReady), len(down), at.Sub(t0), deadline.Sub(t0))
		}
	})
}

// withClockSteps stamps a trace the way a process whose wall clock steps
// would: at random points the clock jumps back or ahead by up to 3h and
// stays offset from then on. The true spacing of the probes is the
// original trace's.
func withClockSteps(t *rapid.T, trace []event) []event {
	out := make([]event, len(trace))
	var off time.Duration
	for i, e := range trace {
		if rapid.IntRange(0, 19).Draw(t, "clockStep") == 0 {
			off += time.Duration(rapid.Int64Range(-int64(3*time.Hour), int64(3*time.Hour)).Draw(t, "stepBy"))
		}
		e.obs.Time = e.obs.Time.Add(off)
		out[i] = e
	}
	return out
}

// checkClockInvariants: whatever the clock did, no time the engine reports
// lies after the last observation, which is the observation's own time.
func checkClockInvariants(t *rapid.T, e event, st Status) {
	if !st.LastObserved.Equal(e.obs.Time) {
		t.Fatalf("LastObserved %v, observation at %v", st.LastObserved, e.obs.Time)
	}
	for _, tm := range []time.Time{st.Since, st.OutageSince, st.UnreachableSince} {
		if tm.After(st.LastObserved) {
			t.Fatalf("%v lies after LastObserved %v (%+v)", tm, st.LastObserved, st)
		}
	}
	if st.HeldFor < 0 || st.ClockStep > 0 {
		t.Fatalf("negative HeldFor %v, or a step ahead %v seen without monotonic readings", st.HeldFor, st.ClockStep)
	}
}

// With clock steps both ways, no observation is refused, the same trace
// gives the same outputs, and a snapshot restored at any point continues
// exactly as the uninterrupted run.
func TestPropClockStepsDeterministic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := genConfig(t)
		cl := genClusters(t, 1, 5)
		trace := withClockSteps(t, genTrace(t, cfg, cl, t0, 200))
		replayStepped := func(f *RawFleet, trace []event) []outputs {
			out := make([]outputs, len(trace))
			for i, e := range trace {
				out[i].st, out[i].trs, _ = f.Observe(e.cluster, e.obs)
				checkInvariants(t, f, e, out[i].st)
				checkClockInvariants(t, e, out[i].st)
				// No evidence lies ahead of the clock after a step.
				c := f.clusters[e.cluster]
				now := floorDiv(c.last.UnixNano(), c.width)
				for _, sl := range c.slots {
					if (sl.ok != 0 || sl.fail != 0) && sl.epoch > now {
						t.Fatalf("event %d: window bucket %d ahead of the clock's %d", i, sl.epoch, now)
					}
					if sl.ok < 0 || sl.fail < 0 {
						t.Fatalf("event %d: negative evidence in the window", i)
					}
				}
			}
			return out
		}
		a := replayStepped(newPropFleet(t, cfg, cl), trace)
		b := replayStepped(newPropFleet(t, cfg, cl), trace)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("two runs of the same trace differ")
		}
		cut := rapid.IntRange(0, len(trace)).Draw(t, "cut")
		f := newPropFleet(t, cfg, cl)
		replay(t, f, trace[:cut])
		snap, err := f.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		g, err := NewRawFleet(FleetConfig{Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Restore(snap); err != nil {
			t.Fatal(err)
		}
		if got := replayStepped(g, trace[cut:]); !reflect.DeepEqual(got, a[cut:]) {
			t.Fatalf("after restore at %d the outputs differ", cut)
		}
	})
}

// outageProbe is one probe of a continuous outage: real is the true time
// since the first failed probe, at the time the engine is given (clock steps
// included).
type outageProbe struct {
	real time.Duration
	at   time.Time
	fwd  int // forward clock steps so far
	back int // backward clock steps so far
}

// genOutage draws a continuous outage's probes: true spacing up to one
// probe interval, and now and then a clock step of up to 3h, back or ahead
// (on a probe that came a full probe interval after the previous one).
func genOutage(t *rapid.T, cfg Config, first time.Time, until time.Duration) []outageProbe {
	pi := cfg.ProbeInterval.Duration
	var out []outageProbe
	p := outageProbe{at: first}
	for {
		out = append(out, p)
		if p.real >= until {
			return out
		}
		dt := time.Duration(rapid.Int64Range(1, int64(pi)).Draw(t, "dt"))
		p.real += dt
		p.at = p.at.Add(dt)
		if rapid.IntRange(0, 9).Draw(t, "clockStep") == 0 {
			p.real += pi - dt
			p.at = p.at.Add(pi - dt)
			step := time.Duration(rapid.Int64Range(1, int64(3*time.Hour)).Draw(t, "stepBy"))
			if rapid.Bool().Draw(t, "ahead") {
				p.at = p.at.Add(step)
				p.fwd++
			} else {
				p.at = p.at.Add(-step)
				p.back++
			}
		}
	}
}

// A continuous outage observed across clock steps of any size, either way,
// still yields NotReady no later than notReadyAfter + back×probeInterval of
// true probe time after its first failure, back being the backward steps
// (a step back costs at most the interval it falls into), whatever came
// before it. And it never yields NotReady before
// notReadyAfter - fwd×probeInterval/2 of true probe time, fwd being the
// forward steps: a step ahead counts as a probe at most half an interval
// late (evidence per observation is capped at 1.5×probeInterval), a step
// back as one on time.
func TestPropContinuousOutageAcrossClockSteps(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := genConfig(t)
		clean := rapid.Bool().Draw(t, "clean") // no history: the lower bound applies
		if clean {
			cfg.MinAvailability = 0
		}
		f := newPropFleet(t, cfg, []string{"c"})
		at := t0
		if !clean {
			prefix := withClockSteps(t, genTrace(t, cfg, []string{"c"}, t0, 100))
			replay(t, f, prefix)
			if len(prefix) > 0 {
				at = prefix[len(prefix)-1].obs.Time
			}
		} else if _, _, err := f.Observe("c", Observation{Time: at, OK: true}); err != nil {
			t.Fatal(err)
		}
		at = at.Add(time.Duration(rapid.Int64Range(0, int64(cfg.ProbeInterval.Duration)).Draw(t, "start")))
		nra, pi := cfg.NotReadyAfter.Duration, cfg.ProbeInterval.Duration
		var st Status
		for _, p := range genOutage(t, cfg, at, nra+3*pi) {
			var err error
			was := st.State
			st, _, err = f.Observe("c", Observation{Time: p.at, Class: ClassNetwork})
			if err != nil {
				t.Fatal(err)
			}
			checkClockInvariants(t, event{"c", Observation{Time: p.at}}, st)
			if p.real >= nra+time.Duration(p.back)*pi && st.State != NotReady {
				t.Fatalf("%v of probes and %d steps back into a continuous outage: %s (notReadyAfter %v, probeInterval %v)", p.real, p.back, st.State, nra, pi)
			}
			if clean && st.State == NotReady && was != NotReady && p.real+time.Duration(p.fwd)*pi/2 < nra {
				t.Fatalf("NotReady after %v of probes and %d forward steps (notReadyAfter %v, probeInterval %v)", p.real, p.fwd, nra, pi)
			}
		}
	})
}

// Snapshot → restore in the middle of an outage, into a process whose clock
// is up to 3h behind or ahead of the writer's: NotReady still comes within
// notReadyAfter + probeInterval of true probe time after the first failure
// (the restore is a clock step; more steps may follow, as above).
func TestPropRestoreAcrossClocksMidOutage(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := genConfig(t)
		f := newPropFleet(t, cfg, []string{"c"})
		prefix := genTrace(t, cfg, []string{"c"}, t0, 100)
		replay(t, f, prefix)
		at := t0
		if len(prefix) > 0 {
			at = prefix[len(prefix)-1].obs.Time
		}
		at = at.Add(time.Duration(rapid.Int64Range(0, int64(cfg.ProbeInterval.Duration)).Draw(t, "start")))
		nra, pi := cfg.NotReadyAfter.Duration, cfg.ProbeInterval.Duration
		probes := genOutage(t, cfg, at, nra+3*pi)
		cut := rapid.IntRange(0, len(probes)-1).Draw(t, "cut")
		skew := time.Duration(rapid.Int64Range(-int64(3*time.Hour), int64(3*time.Hour)).Draw(t, "skew"))
		for i, p := range probes {
			if i == cut {
				snap, err := f.SnapshotCluster("c")
				if err != nil {
					t.Fatal(err)
				}
				if f, err = NewRawFleet(FleetConfig{Config: cfg}); err != nil {
					t.Fatal(err)
				}
				if err := f.RestoreCluster(snap); err != nil {
					t.Fatal(err)
				}
			}
			if i >= cut {
				p.at = p.at.Add(skew)
			}
			st, _, err := f.Observe("c", Observation{Time: p.at, Class: ClassServer})
			if err != nil {
				t.Fatal(err)
			}
			checkClockInvariants(t, event{"c", Observation{Time: p.at}}, st)
			if p.real >= nra+time.Duration(p.back+1)*pi && st.State != NotReady {
				t.Fatalf("%v of probes and %d steps back into a continuous outage, restored at probe %d into a clock %v off: %s (notReadyAfter %v)",
					p.real, p.back, cut, skew, st.State, nra)
			}
		}
	})
}
