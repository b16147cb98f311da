package enginestate_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/syncer/enginestate"
	"github.com/leafsync/leafsync/internal/syncer/store"
)

// sim is one leafsync process as far as state goes: an engine, a Keeper
// and a Persister over a store shared with the processes before and after
// it. Writes are flushed after every observation (an upper bound: the real
// Keeper coalesces).
type sim struct {
	tb     testing.TB
	fleet  *hysteresis.Fleet
	keeper *store.Keeper
	p      *enginestate.Persister
	s      store.Store
	// notReadyAt is the engine time of the first move to NotReady.
	notReadyAt map[string]time.Time
	everReady  map[string]bool
}

// testFleetConfig is the e2e scale: probe 1s, cordon 2s, NotReady 10s,
// Ready 4s, window 60s.
func testFleetConfig() hysteresis.FleetConfig {
	fc := hysteresis.DefaultFleetConfig()
	fc.ProbeInterval = hysteresis.D(time.Second)
	fc.CordonAfter = hysteresis.D(2 * time.Second)
	fc.NotReadyAfter = hysteresis.D(10 * time.Second)
	fc.ReadyAfter = hysteresis.D(4 * time.Second)
	fc.Window = hysteresis.D(time.Minute)
	return fc
}

// startSim starts a process: it restores every cluster before observing.
func startSim(tb testing.TB, s store.Store, fc hysteresis.FleetConfig, po enginestate.Options, clusters ...string) *sim {
	tb.Helper()
	f, err := hysteresis.NewFleet(fc)
	if err != nil {
		tb.Fatal(err)
	}
	k := runKeeper(tb, s, store.KeeperOptions{})
	po.Logger = logr.Discard()
	x := &sim{tb: tb, fleet: f, keeper: k, p: enginestate.New(k, po), s: s,
		notReadyAt: map[string]time.Time{}, everReady: map[string]bool{}}
	for _, c := range clusters {
		if err := f.Add(c, hysteresis.Overrides{}); err != nil {
			tb.Fatal(err)
		}
		if _, err := x.p.Restore(context.Background(), c, owner{f}); err != nil {
			tb.Fatalf("restore %s: %v", c, err)
		}
	}
	return x
}

// runKeeper runs a Keeper until the test ends, on a fake clock that never
// moves: it writes on explicit flushes only.
func runKeeper(tb testing.TB, s store.Store, o store.KeeperOptions) *store.Keeper {
	o.Clock = clocktesting.NewFakeClock(time.Now())
	k := store.NewKeeper(s, logr.Discard(), o)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); k.Run(ctx) }()
	tb.Cleanup(func() { cancel(); <-done })
	return k
}

func (x *sim) observe(c string, at time.Time, ok bool) hysteresis.Status {
	x.tb.Helper()
	return x.decide(c, at, ok).Status
}

// decide feeds one observation and hands its decision to the persister.
func (x *sim) decide(c string, at time.Time, ok bool) hysteresis.Decision {
	x.tb.Helper()
	o := hysteresis.Observation{Time: at, OK: ok}
	if !ok {
		o.Class, o.Detail = hysteresis.ClassNetwork, "connection refused"
	}
	d, err := x.fleet.Step(c, o)
	if err != nil {
		x.tb.Fatal(err)
	}
	x.p.Observed(c, d)
	for _, tr := range d.Transitions {
		if tr.To == hysteresis.NotReady && x.notReadyAt[c].IsZero() {
			x.notReadyAt[c] = tr.Time
		}
	}
	if err := x.keeper.Flush(context.Background()); err != nil {
		x.tb.Fatal(err)
	}
	return d
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// link says whether the member answers at a time.
type link func(at time.Time) bool

func down(from, to time.Duration) link {
	return func(at time.Time) bool { d := at.Sub(t0); return d < from || d >= to }
}

// run observes cluster c every probe from `from` to `to` (offsets from t0),
// with probes at phase+k×probe.
func (x *sim) run(c string, l link, from, to, probe, phase time.Duration) {
	for d := phase; d < to; d += probe {
		if d < from {
			continue
		}
		x.observe(c, t0.Add(d), l(t0.Add(d)))
	}
}

// owner is the engine's owner of a test (in leafsync, the clusters
// Registry): it restores a snapshot into a bare Fleet.
type owner struct{ f *hysteresis.Fleet }

func (o owner) Restore(cluster string, snapshot []byte) (hysteresis.Status, error) {
	if err := o.f.RestoreCluster(snapshot); err != nil {
		return hysteresis.Status{}, err
	}
	st, _ := o.f.Status(cluster)
	return st, nil
}
