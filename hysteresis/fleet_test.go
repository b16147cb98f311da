package hysteresis

import (
	"errors"
	"strings"
	"testing"
	"time"
)

const s5 = 5 * time.Second

func TestTransitionsAndEdges(t *testing.T) {
	win2m := func(c *Config) { c.Window = D(2 * time.Minute) }
	net := func(from, to time.Duration) []ev { return every(from, to, s5, netAt) }
	oks := func(from, to time.Duration) []ev { return every(from, to, s5, okAt) }
	auths := func(from, to time.Duration) []ev {
		return every(from, to, s5, func(d time.Duration) ev { return failAt(d, ClassAuth) })
	}
	one := func(e ...ev) []ev { return e }
	// outage: NotReady at 90s (network failures every 5s from 0).
	outage := net(0, sec(90))

	cases := []struct {
		name     string
		cfg      func(*Config)
		trace    []ev
		state    State
		cordoned bool
		reason   string
		flaps    uint64
	}{
		{name: "new cluster with a success stays Ready", trace: one(okAt(0)), state: Ready},
		{name: "Ready->Suspect on first network failure", trace: one(okAt(0), netAt(s5)), state: Suspect, reason: ReasonNetworkFailure},
		{name: "Ready->Suspect on first server failure", trace: one(okAt(0), failAt(s5, ClassServer)), state: Suspect, reason: ReasonServerFailure},
		{name: "auth failure keeps Ready", trace: one(okAt(0), failAt(s5, ClassAuth)), state: Ready, reason: ReasonAuthFailure},
		{name: "config failure keeps Ready", trace: one(failAt(0, ClassConfig)), state: Ready, reason: ReasonConfigFailure},

		// cordonAfter = 10s
		{name: "cordon: one tick before", trace: one(netAt(0), netAt(s5), netAt(sec(9.999))), state: Suspect, reason: ReasonNetworkFailure},
		{name: "cordon: exactly at cordonAfter", trace: net(0, sec(10)), state: Suspect, cordoned: true, reason: ReasonNetworkFailure},
		{name: "cordon: one tick after", trace: one(netAt(0), netAt(s5), netAt(sec(10.001))), state: Suspect, cordoned: true, reason: ReasonNetworkFailure},
		{name: "cordon: cordonAfter 0 cordons at once", cfg: func(c *Config) { c.CordonAfter = D(0) }, trace: one(okAt(0), netAt(s5)), state: Suspect, cordoned: true, reason: ReasonNetworkFailure},
		{name: "cordon: auth failures cordon but stay Ready", trace: auths(0, sec(10)), state: Ready, cordoned: true, reason: ReasonAuthFailure},
		{name: "cordon: auth one tick before", trace: one(failAt(0, ClassAuth), failAt(sec(9.999), ClassAuth)), state: Ready, reason: ReasonAuthFailure},
		{name: "cordon: success uncordons", trace: concat(net(0, sec(20)), one(okAt(sec(21)))), state: Ready, flaps: 1},

		// notReadyAfter = 90s
		{name: "NotReady: one tick before", trace: concat(net(0, sec(85)), one(netAt(sec(89.999)))), state: Suspect, cordoned: true, reason: ReasonNetworkFailure},
		{name: "NotReady: exactly at notReadyAfter", trace: outage, state: NotReady, cordoned: true, reason: ReasonNetworkFailure},
		{name: "NotReady: one tick after", trace: concat(net(0, sec(85)), one(netAt(sec(90.001)))), state: NotReady, cordoned: true, reason: ReasonNetworkFailure},
		{name: "NotReady: server failures count", trace: every(0, sec(90), s5, func(d time.Duration) ev { return failAt(d, ClassServer) }), state: NotReady, cordoned: true, reason: ReasonServerFailure},
		{name: "NotReady: mixed network and server count", trace: concat(net(0, sec(45)), every(sec(50), sec(90), s5, func(d time.Duration) ev { return failAt(d, ClassServer) })), state: NotReady, cordoned: true, reason: ReasonServerFailure},
		{name: "NotReady: auth forever never NotReady", trace: auths(0, time.Hour), state: Ready, cordoned: true, reason: ReasonAuthFailure},
		{name: "NotReady: config forever never NotReady", trace: every(0, time.Hour, s5, func(d time.Duration) ev { return failAt(d, ClassConfig) }), state: Ready, cordoned: true, reason: ReasonConfigFailure},
		{name: "NotReady: auth neither extends nor breaks the streak (before)", trace: concat(net(0, sec(80)), one(failAt(sec(85), ClassAuth)), net(sec(90), sec(95))), state: Suspect, cordoned: true, reason: ReasonNetworkFailure},
		{name: "NotReady: auth neither extends nor breaks the streak (at)", trace: concat(net(0, sec(80)), one(failAt(sec(85), ClassAuth)), net(sec(90), sec(100))), state: NotReady, cordoned: true, reason: ReasonNetworkFailure},
		{name: "NotReady: probes 1.5 intervals apart count in full", trace: every(0, sec(90), sec(7.5), netAt), state: NotReady, cordoned: true, reason: ReasonNetworkFailure},
		{name: "NotReady: probes 8s apart count 7.5s each (before)", trace: every(0, sec(88), sec(8), netAt), state: Suspect, cordoned: true, reason: ReasonNetworkFailure},
		{name: "NotReady: probes 8s apart count 7.5s each (at)", trace: every(0, sec(96), sec(8), netAt), state: NotReady, cordoned: true, reason: ReasonNetworkFailure},

		// gaps are not failures
		{name: "gap: two failures an hour apart", trace: one(netAt(0), netAt(time.Hour)), state: Suspect, reason: ReasonNetworkFailure},
		{name: "gap: counts at most 1.5 probe intervals (before)", trace: concat(net(0, sec(60)), net(sec(600), sec(620))), state: Suspect, cordoned: true, reason: ReasonNetworkFailure},
		{name: "gap: counts at most 1.5 probe intervals (at)", trace: concat(net(0, sec(60)), net(sec(600), sec(620)), one(netAt(sec(622.5)))), state: NotReady, cordoned: true, reason: ReasonNetworkFailure},
		{name: "gap: of successes is not success", trace: concat(outage, one(okAt(sec(95)), okAt(time.Hour))), state: Recovering, cordoned: true, reason: ReasonRecovering},

		// Suspect -> Ready is a suppressed flap
		{name: "Suspect->Ready before notReadyAfter", trace: concat(net(0, sec(85)), one(okAt(sec(89.999)))), state: Ready, flaps: 1},

		// NotReady <-> Recovering, readyAfter = 30s
		{name: "NotReady->Recovering on first success", trace: concat(outage, one(okAt(sec(95)))), state: Recovering, cordoned: true, reason: ReasonRecovering},
		{name: "NotReady stays on auth failure", trace: concat(outage, one(failAt(sec(95), ClassAuth))), state: NotReady, cordoned: true, reason: ReasonAuthFailure},
		{name: "Recovering->NotReady on failure", trace: concat(outage, oks(sec(95), sec(120)), one(netAt(sec(121)))), state: NotReady, cordoned: true, reason: ReasonNetworkFailure},
		{name: "Recovering stays on auth failure", trace: concat(outage, oks(sec(95), sec(120)), one(failAt(sec(121), ClassAuth))), state: Recovering, cordoned: true, reason: ReasonAuthFailure},
		{name: "Recovering->Ready: one tick before", trace: concat(outage, oks(sec(95), sec(120)), one(okAt(sec(124.999)))), state: Recovering, cordoned: true, reason: ReasonRecovering},
		{name: "Recovering->Ready: exactly at readyAfter", trace: concat(outage, oks(sec(95), sec(125))), state: Ready},
		{name: "Recovering->Ready: one tick after", trace: concat(outage, oks(sec(95), sec(120)), one(okAt(sec(125.001)))), state: Ready},
		{name: "Recovering: auth failure restarts the success streak", trace: concat(outage, oks(sec(95), sec(115)), one(failAt(sec(120), ClassAuth)), oks(sec(125), sec(150))), state: Recovering, cordoned: true, reason: ReasonRecovering},
		{name: "Recovering: ...and readyAfter later it is Ready", trace: concat(outage, oks(sec(95), sec(115)), one(failAt(sec(120), ClassAuth)), oks(sec(125), sec(155))), state: Ready},

		// availability
		// window 2m; 60s down, 5s up, then down again: 60s+25s of failure < 90s
		// streak each, but 85s of failures in 95s: one tick before / at 90s.
		{name: "availability: one tick before", cfg: win2m, trace: concat(flapping(sec(60), sec(5), 1), net(sec(75), sec(100))), state: Suspect, cordoned: true, reason: ReasonNetworkFailure, flaps: 1},
		{name: "availability: flapping link goes NotReady", cfg: win2m, trace: concat(flapping(sec(60), sec(5), 1), net(sec(75), sec(105))), state: NotReady, cordoned: true, reason: ReasonLowAvailability, flaps: 1},
		{name: "availability: needs half a window of evidence", trace: concat(flapping(sec(60), sec(5), 1), net(sec(75), sec(105))), state: Suspect, cordoned: true, reason: ReasonNetworkFailure, flaps: 1},
		{name: "availability: stays LowAvailability while failing", cfg: win2m, trace: concat(flapping(sec(60), sec(5), 1), net(sec(75), sec(300))), state: NotReady, cordoned: true, reason: ReasonLowAvailability, flaps: 1},
		{name: "availability: disabled with minAvailability 0", cfg: func(c *Config) { c.MinAvailability = 0 },
			trace: flapping(sec(60), sec(5), 20), state: Ready, cordoned: true, reason: ReasonFlapDamped, flaps: 20},
		{name: "availability: enough success keeps it up", cfg: func(c *Config) { c.MinAvailability = 0.5; c.PenaltyPerFlap = 0 },
			trace: flapping(sec(60), sec(90), 20), state: Ready, flaps: 20},

		// flap damping: suppress 2000, reuse 750, halfLife 10m
		{name: "damping: two flaps reach exactly suppress, not above", trace: flapsAt(0, 2), state: Ready, flaps: 2},
		{name: "damping: third flap cordons", trace: flapsAt(0, 3), state: Ready, cordoned: true, reason: ReasonFlapDamped, flaps: 3},
		{name: "damping: decayed to exactly reuse still cordoned", trace: concat(flapsAt(0, 3), one(okAt(20*time.Minute))), state: Ready, cordoned: true, reason: ReasonFlapDamped, flaps: 3},
		{name: "damping: one tick before reuse", trace: concat(flapsAt(0, 3), one(okAt(20*time.Minute-time.Nanosecond))), state: Ready, cordoned: true, reason: ReasonFlapDamped, flaps: 3},
		{name: "damping: one tick after reuse uncordons", trace: concat(flapsAt(0, 3), one(okAt(20*time.Minute+time.Nanosecond))), state: Ready, flaps: 3},
		{name: "damping: disabled by penaltyPerFlap 0", cfg: func(c *Config) { c.PenaltyPerFlap = 0 }, trace: flapsAt(0, 10), state: Ready, flaps: 10},
		{name: "damping: never NotReady", cfg: func(c *Config) { c.MinAvailability = 0 }, trace: flapping(sec(85), 0, 50), state: Ready, cordoned: true, reason: ReasonFlapDamped, flaps: 50},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			f := newFleet(t, cfg)
			st, trs := run(t, f, tc.trace)
			if st.State != tc.state || st.Cordoned != tc.cordoned || st.Reason != tc.reason {
				t.Errorf("got %s cordoned=%v reason=%q, want %s cordoned=%v reason=%q\ntransitions:\n%s",
					st.State, st.Cordoned, st.Reason, tc.state, tc.cordoned, tc.reason, fmtTransitions(trs))
			}
			k, _ := f.Counters("c")
			if k.FlapsSuppressed != tc.flaps {
				t.Errorf("flaps = %d, want %d", k.FlapsSuppressed, tc.flaps)
			}
			if k.Penalty > cfg.MaxPenalty {
				t.Errorf("penalty %g above maxPenalty", k.Penalty)
			}
		})
	}
}

// flapping: n cycles of network failures every 5s for down, then successes
// every 5s for up (a single success when up is 0), starting at 0.
func flapping(down, up time.Duration, n int) []ev {
	var out []ev
	at := time.Duration(0)
	for range n {
		out = append(out, every(at, at+down, s5, netAt)...)
		at += down + s5
		out = append(out, every(at, at+up, s5, okAt)...)
		at += up + s5
	}
	return out
}

// flapsAt: n flaps (failure then success) all at the same instant, so the
// penalty is exactly n × penaltyPerFlap.
func flapsAt(at time.Duration, n int) []ev {
	var out []ev
	for range n {
		out = append(out, netAt(at), okAt(at))
	}
	return out
}

func TestExactTransitions(t *testing.T) {
	f := newFleet(t, DefaultConfig())
	trace := concat(
		every(0, sec(10), s5, okAt),
		every(sec(15), sec(105), s5, netAt), // outage from 15s: cordon at 25s, NotReady at 105s
		every(sec(110), sec(120), s5, okAt), // Recovering at 110s
		[]ev{netAt(sec(125))},               // relapse
		every(sec(130), sec(160), s5, okAt), // Recovering, Ready at 160s
	)
	_, trs := run(t, f, trace)
	want := `15s c Ready->Suspect cordoned=false NetworkFailure
25s c Suspect->Suspect cordoned=true NetworkFailure
1m45s c Suspect->NotReady cordoned=true NetworkFailure
1m50s c NotReady->Recovering cordoned=true Recovering
2m5s c Recovering->NotReady cordoned=true NetworkFailure
2m10s c NotReady->Recovering cordoned=true Recovering
2m40s c Recovering->Ready cordoned=false 
`
	if got := fmtTransitions(trs); got != want {
		t.Errorf("transitions:\n%s\nwant:\n%s", got, want)
	}
	st, _ := f.Status("c")
	if !st.OutageSince.IsZero() || !st.Since.Equal(t0.Add(sec(160))) {
		t.Errorf("status %+v", st)
	}
	k, _ := f.Counters("c")
	if k.Transitions[Suspect][NotReady] != 1 || k.Transitions[Recovering][NotReady] != 1 || k.Transitions[NotReady][Recovering] != 2 || k.Transitions[Recovering][Ready] != 1 {
		t.Errorf("transition counters %v", k.Transitions)
	}
	if k.TimeIn[NotReady] != 10*time.Second || k.TimeIn[Recovering] != 45*time.Second || k.TimeIn[Suspect] != 90*time.Second || k.TimeIn[Ready] != 15*time.Second {
		t.Errorf("time in state %v", k.TimeIn)
	}
	if k.Cordoned != 135*time.Second {
		t.Errorf("cordoned %v", k.Cordoned)
	}
}

func TestOutageSinceKeptThroughRelapse(t *testing.T) {
	f := newFleet(t, DefaultConfig())
	st, _ := run(t, f, concat(every(0, sec(90), s5, netAt), []ev{okAt(sec(95)), netAt(sec(100))}))
	if st.State != NotReady || !st.OutageSince.Equal(t0.Add(sec(90))) || !st.Since.Equal(t0.Add(sec(100))) {
		t.Fatalf("status %+v", st)
	}
}

// The outage began with the failure streak, notReadyAfter before it was
// confirmed; a relapse keeps that beginning, a recovery clears it.
func TestUnreachableSince(t *testing.T) {
	f := newFleet(t, DefaultConfig())
	st, _ := run(t, f, concat([]ev{okAt(0)}, every(s5, sec(95), s5, netAt)))
	if st.State != NotReady || !st.UnreachableSince.Equal(t0.Add(s5)) || !st.OutageSince.Equal(t0.Add(sec(95))) {
		t.Fatalf("status %+v, want NotReady since 95s, unreachable since 5s", st)
	}
	st, _ = run(t, f, []ev{okAt(sec(100)), netAt(sec(105))})
	if st.State != NotReady || !st.UnreachableSince.Equal(t0.Add(s5)) {
		t.Fatalf("after a relapse %+v, want unreachable since 5s", st)
	}
	st, _ = run(t, f, every(sec(110), sec(300), s5, okAt))
	if st.State != Ready || !st.UnreachableSince.IsZero() {
		t.Fatalf("recovered %+v, want no outage", st)
	}
}

func TestChainReadySuspectNotReady(t *testing.T) {
	// Successes can make the window hold enough evidence (half a window) to
	// be judged while availability is still too low: when the Ready cluster
	// then fails, two transitions at once.
	cfg := DefaultConfig()
	cfg.NotReadyAfter, cfg.Window = D(20*time.Second), D(100*time.Second) // judged from 50s of evidence
	f := newFleet(t, cfg)
	trace := concat(
		every(0, sec(15), s5, netAt),       // 15s failure
		[]ev{okAt(sec(20))},                // flap
		every(sec(25), sec(40), s5, netAt), // 30s failure, 30s evidence: not judged
		every(sec(45), sec(65), s5, okAt),  // 20s success: 50s evidence, 40% available
	)
	st, _ := run(t, f, trace)
	if st.State != Ready {
		t.Fatalf("before: %+v", st)
	}
	st, trs, err := f.Observe("c", netAt(sec(70)).obs())
	if err != nil {
		t.Fatal(err)
	}
	want := "1m10s c Ready->Suspect cordoned=false NetworkFailure\n1m10s c Suspect->NotReady cordoned=true LowAvailability\n"
	if got := fmtTransitions(trs); got != want || st.State != NotReady {
		t.Fatalf("got\n%swant\n%s", got, want)
	}
}

func TestMassDisconnectGuard(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e"} // massMin 3, massFraction 0.55 → 3 of 5
	outage := func(f *RawFleet, failing []string, from, to time.Duration) map[string]Status {
		t.Helper()
		st := map[string]Status{}
		for at := from; at <= to; at += s5 {
			for _, n := range f.Clusters() {
				e := okAt(at)
				for _, x := range failing {
					if x == n {
						e = netAt(at)
					}
				}
				s, _, err := f.Observe(n, e.obs())
				if err != nil {
					t.Fatal(err)
				}
				st[n] = s
			}
		}
		return st
	}
	t.Run("three of five failing are held", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.MassHoldMax = D(time.Hour)
		f := newFleet(t, cfg, names...)
		st := outage(f, []string{"a", "b", "c"}, 0, 10*time.Minute)
		for _, n := range []string{"a", "b", "c"} {
			if st[n].State != Suspect || !st[n].Held || !st[n].Cordoned || st[n].Reason != ReasonMassDisconnect {
				t.Errorf("%s: %+v", n, st[n])
			}
		}
		// The guard lifts when b and c recover; a (still failing, with
		// evidence accrued meanwhile) goes NotReady at its next failure.
		st = outage(f, []string{"a"}, 10*time.Minute+s5, 10*time.Minute+2*s5)
		if st["a"].State != NotReady || st["a"].Held || st["b"].State != Ready {
			t.Errorf("after: a %+v b %+v", st["a"], st["b"])
		}
	})
	t.Run("held for massHoldMax, then released one per massReleaseInterval", func(t *testing.T) {
		// Defaults: notReadyAfter 90s, massHoldMax 5m, massReleaseInterval
		// 10s, probes every 5s. Before this bound the guard held dead
		// members Ready for ever.
		f := newFleet(t, DefaultConfig(), names...)
		down := []string{"a", "b", "c"}
		notReadyAt := map[string]time.Duration{}
		for at := time.Duration(0); at <= 10*time.Minute; at += s5 {
			st := outage(f, down, at, at)
			for _, n := range down {
				if _, seen := notReadyAt[n]; !seen && st[n].State == NotReady {
					notReadyAt[n] = at
					if !st[n].Released || st[n].Held {
						t.Errorf("%s at %v: %+v", n, at, st[n])
					}
					// Pod tolerations count from the release, not from
					// the streak: the pacing holds for evictions too.
					if !st[n].UnreachableSince.Equal(st[n].OutageSince) {
						t.Errorf("%s released at %v, outage backdated to %v", n, at, st[n].UnreachableSince)
					}
				}
			}
		}
		// The first hold starts at 90s (notReadyAfter); 5m of held
		// evidence later, at 6m30s, the first goes; the others follow
		// 10s apart.
		want := map[string]time.Duration{"a": 6*time.Minute + sec(30), "b": 6*time.Minute + sec(40), "c": 6*time.Minute + sec(50)}
		for n, w := range want {
			if notReadyAt[n] != w {
				t.Errorf("%s NotReady at %v, want %v (all: %v)", n, notReadyAt[n], w, notReadyAt)
			}
		}
		// A healed member recovers; the guard episode ends for it.
		st := outage(f, []string{"a", "c"}, 10*time.Minute+s5, 10*time.Minute+sec(40))
		if st["b"].State != Ready || st["b"].Released {
			t.Errorf("healed b: %+v", st["b"])
		}
		if st["a"].State != NotReady || st["c"].State != NotReady {
			t.Errorf("a %+v c %+v", st["a"], st["c"])
		}
	})
	t.Run("two of five failing are not held", func(t *testing.T) {
		f := newFleet(t, DefaultConfig(), names...)
		st := outage(f, []string{"a", "b"}, 0, sec(90))
		if st["a"].State != NotReady || st["b"].State != NotReady {
			t.Errorf("a %+v b %+v", st["a"], st["b"])
		}
	})
	t.Run("fraction below massFraction is not held", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.MassFraction = 0.8 // needs 4 of 5
		f := newFleet(t, cfg, names...)
		st := outage(f, []string{"a", "b", "c"}, 0, sec(90))
		if st["a"].State != NotReady {
			t.Errorf("a %+v", st["a"])
		}
		f = newFleet(t, cfg, names...)
		st = outage(f, []string{"a", "b", "c", "d"}, 0, sec(90))
		if st["a"].State != Suspect || !st["a"].Held {
			t.Errorf("a %+v", st["a"])
		}
	})
	t.Run("clusters already NotReady do not count", func(t *testing.T) {
		f := newFleet(t, DefaultConfig(), names...)
		outage(f, []string{"a", "b"}, 0, sec(90)) // a, b NotReady
		st := outage(f, []string{"a", "b", "c"}, sec(95), sec(185))
		if st["c"].State != NotReady {
			t.Errorf("c %+v", st["c"])
		}
	})
	t.Run("Recovering is held out of NotReady too", func(t *testing.T) {
		f := newFleet(t, DefaultConfig(), names...)
		outage(f, []string{"a"}, 0, sec(90)) // a NotReady
		outage(f, nil, sec(95), sec(95))     // a Recovering
		outage(f, []string{"b", "c"}, sec(100), sec(100))
		st := outage(f, []string{"a", "b", "c"}, sec(105), sec(105)) // 3 failing
		if st["a"].State != Recovering || !st["a"].Held {
			t.Errorf("a %+v", st["a"])
		}
	})
	t.Run("Remove updates the count", func(t *testing.T) {
		f := newFleet(t, DefaultConfig(), names...)
		outage(f, []string{"a", "b", "c"}, 0, sec(60))
		f.Remove("c")
		f.Remove("d")
		f.Remove("e")
		f.Remove("nope")
		// 2 of 2 failing but massMin 3: not held.
		st := outage(f, []string{"a", "b"}, sec(65), sec(90))
		_ = st
		s, _ := f.Status("a")
		if s.State != NotReady {
			t.Errorf("a %+v", s)
		}
		if f.failing != 0 {
			t.Errorf("failing = %d", f.failing)
		}
	})
}

func TestErrors(t *testing.T) {
	f := newFleet(t, DefaultConfig())
	if _, _, err := f.Observe("nope", okAt(0).obs()); !errors.Is(err, ErrUnknownCluster) {
		t.Errorf("unknown cluster: %v", err)
	}
	if _, _, err := f.Observe("c", Observation{Time: t0}); !errors.Is(err, ErrBadClass) {
		t.Errorf("no class: %v", err)
	}
	if _, _, err := f.Observe("c", Observation{Time: t0, Class: 9}); !errors.Is(err, ErrBadClass) {
		t.Errorf("bad class: %v", err)
	}
	if _, _, err := f.Observe("c", okAt(sec(10)).obs()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.Observe("c", okAt(sec(10)).obs()); err != nil {
		t.Errorf("equal time: %v", err)
	}
	if st, _, err := f.Observe("c", netAt(sec(9)).obs()); err != nil || st.ClockStep != -sec(1) {
		t.Errorf("backwards: accepted with error %v, ClockStep %v (want nil, -1s)", err, st.ClockStep)
	}
	if err := f.Add("", Overrides{}); err == nil {
		t.Error("empty name accepted")
	}
	bad := 10.0
	if err := f.Add("x", Overrides{Reuse: &bad, Suppress: &bad}); err == nil || !strings.Contains(err.Error(), `cluster "x": hysteresis.reuse (10) must be below hysteresis.suppress (10)`) {
		t.Errorf("bad overrides: %v", err)
	}
	if _, err := NewRawFleet(FleetConfig{}); err == nil {
		t.Error("zero FleetConfig accepted")
	}
	if _, ok := f.Status("nope"); ok {
		t.Error("status of unknown cluster")
	}
	if _, ok := f.Counters("nope"); ok {
		t.Error("counters of unknown cluster")
	}
}

func TestAddUpdatesOverridesKeepingState(t *testing.T) {
	fc := DefaultFleetConfig()
	fc.Clusters = map[string]Overrides{"c": {NotReadyAfter: &Duration{60 * time.Second}}}
	f, err := NewRawFleet(fc)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Add("c", Overrides{}); err != nil {
		t.Fatal(err)
	}
	if cfg, _ := f.Config("c"); cfg.NotReadyAfter.Duration != 60*time.Second {
		t.Fatalf("file override not applied: %v", cfg.NotReadyAfter)
	}
	run(t, f, every(0, sec(55), s5, netAt))
	// Annotation override wins over the file's; state is kept.
	if err := f.Add("c", Overrides{NotReadyAfter: &Duration{120 * time.Second}}); err != nil {
		t.Fatal(err)
	}
	st, _ := run(t, f, every(sec(60), sec(115), s5, netAt))
	if st.State != Suspect {
		t.Fatalf("at 115s: %+v", st)
	}
	st, _ = run(t, f, []ev{netAt(sec(120))})
	if st.State != NotReady {
		t.Fatalf("at 120s: %+v", st)
	}
	if got := f.Clusters(); len(got) != 1 || got[0] != "c" {
		t.Errorf("Clusters() = %v", got)
	}
}

func TestTimeNormalisation(t *testing.T) {
	// Times with a monotonic reading or another zone decide the same.
	f := newFleet(t, DefaultConfig())
	now := time.Now()
	loc := time.FixedZone("x", 3600)
	if _, _, err := f.Observe("c", Observation{Time: now, Class: ClassNetwork}); err != nil {
		t.Fatal(err)
	}
	st, _, err := f.Observe("c", Observation{Time: now.Add(sec(5)).In(loc), Class: ClassNetwork})
	if err != nil {
		t.Fatal(err)
	}
	if st.LastObserved.Location() != time.UTC || !st.LastObserved.Equal(now.Add(sec(5))) {
		t.Errorf("LastObserved %v", st.LastObserved)
	}
}

func TestStateAndClassText(t *testing.T) {
	for s := range State(NumStates) {
		b, err := s.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back State
		if err := back.UnmarshalText(b); err != nil || back != s {
			t.Errorf("%v round trip: %v %v", s, back, err)
		}
	}
	if Ready.String() != "Ready" || Suspect.String() != "Suspect" || NotReady.String() != "NotReady" || Recovering.String() != "Recovering" {
		t.Error("state names")
	}
	if !Ready.LeafReady() || !Suspect.LeafReady() || NotReady.LeafReady() || Recovering.LeafReady() {
		t.Error("LeafReady")
	}
	for _, n := range []string{"network", "server", "auth", "config"} {
		c, err := ParseClass(n)
		if err != nil || c.String() != n {
			t.Errorf("class %s: %v %v", n, c, err)
		}
	}
	if _, err := ParseClass("dns"); err == nil {
		t.Error("unknown class accepted")
	}
	if _, err := State(7).MarshalText(); err == nil {
		t.Error("invalid state marshalled")
	}
}
