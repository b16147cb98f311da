package enginestate_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/syncer/enginestate"
	"github.com/leafsync/leafsync/internal/syncer/podsync/deletes"
	"github.com/leafsync/leafsync/internal/syncer/store"
	"github.com/leafsync/leafsync/internal/syncer/store/storetest"
)

// A restart in the middle of an outage resumes the outage clock: the leaf
// goes NotReady no earlier than without the restart, and later by at most
// what the restart could not know — the streak since the last checkpoint and
// the restart gap beyond the 1.5×probeInterval the engine credits a gap —
// rounded up to the next probe.
func TestRestartMidOutageResumesClocks(t *testing.T) {
	fc := testFleetConfig()
	p := fc.ProbeInterval.Duration
	const c = "m1"
	const outage = 30 * time.Second
	phase := 300 * time.Millisecond
	base := startSim(t, store.NewMemory(), fc, enginestate.Options{}, c)
	base.run(c, down(outage, time.Hour), 0, outage+30*time.Second, p, phase)
	want := base.notReadyAt[c]
	if want.IsZero() {
		t.Fatal("no NotReady without restart")
	}
	t.Logf("without restart: NotReady %s after the outage began", want.Sub(t0.Add(outage)))

	var table strings.Builder
	for _, ci := range []time.Duration{time.Second, 2 * time.Second, 5 * time.Second} {
		for _, gap := range []time.Duration{500 * time.Millisecond, time.Second, 1500 * time.Millisecond, 3 * time.Second} {
			worst := time.Duration(0)
			for r := 500 * time.Millisecond; r < fc.NotReadyAfter.Duration; r += 250 * time.Millisecond {
				m := store.NewMemory()
				po := enginestate.Options{CheckpointInterval: ci}
				before := startSim(t, m, fc, po, c)
				kill := outage + r
				before.run(c, down(outage, time.Hour), 0, kill, p, phase)
				// The new process probes at once when it starts, then
				// every probe interval.
				after := startSim(t, m, fc, po, c)
				start := kill + gap
				for d := start; d < outage+40*time.Second; d += p {
					after.observe(c, t0.Add(d), false)
				}
				got := before.notReadyAt[c]
				if got.IsZero() {
					got = after.notReadyAt[c]
				}
				if got.IsZero() {
					t.Fatalf("ci %s gap %s restart at +%s: never NotReady", ci, gap, r)
				}
				delay := got.Sub(want)
				lost := max(0, ci+gap-p*3/2)
				if delay < -p {
					t.Errorf("ci %s gap %s restart at +%s: NotReady %s earlier than without restart", ci, gap, r, -delay)
				}
				if delay > lost+p {
					t.Errorf("ci %s gap %s restart at +%s: NotReady %s later than without restart, bound %s", ci, gap, r, delay, lost+p)
				}
				worst = max(worst, delay)
			}
			fmt.Fprintf(&table, "\n  checkpoint %-4s restart gap %-5s: NotReady at most %-5s later", ci, gap, worst)
		}
	}
	t.Logf("delay of NotReady caused by a restart mid-outage (probe %s, notReadyAfter %s):%s", p, fc.NotReadyAfter, table.String())
}

// A restart is not a flap: restarting mid-flap counts the flap once (as an
// uninterrupted run does) and never goes NotReady; restarting while Ready
// changes no counter and writes nothing.
func TestRestartIsNotAFlap(t *testing.T) {
	fc := testFleetConfig()
	p := fc.ProbeInterval.Duration
	const c = "m1"
	flap := down(30*time.Second, 37*time.Second) // 7s < notReadyAfter
	phase := 100 * time.Millisecond

	base := startSim(t, store.NewMemory(), fc, enginestate.Options{}, c)
	base.run(c, flap, 0, 90*time.Second, p, phase)
	want, _ := base.fleet.Counters(c)

	m := store.NewMemory()
	x := startSim(t, m, fc, enginestate.Options{}, c)
	x.run(c, flap, 0, 34*time.Second, p, phase) // restart 4s into the flap
	x = startSim(t, m, fc, enginestate.Options{}, c)
	x.run(c, flap, 35*time.Second, 70*time.Second, p, phase)
	puts := m.Puts()
	x = startSim(t, m, fc, enginestate.Options{}, c) // restart while Ready
	if m.Puts() != puts {
		t.Errorf("restoring wrote %d records", m.Puts()-puts)
	}
	x.run(c, flap, 71*time.Second, 90*time.Second, p, phase)
	got, _ := x.fleet.Counters(c)
	if got.FlapsSuppressed != want.FlapsSuppressed || got.FlapsSuppressed != 1 {
		t.Errorf("flaps suppressed %d with restarts, %d without (want 1)", got.FlapsSuppressed, want.FlapsSuppressed)
	}
	if got.Transitions != want.Transitions {
		t.Errorf("transitions with restarts %v, without %v", got.Transitions, want.Transitions)
	}
	if n := got.Transitions[hysteresis.Suspect][hysteresis.NotReady]; n != 0 {
		t.Errorf("%d moves to NotReady during a %s flap", n, 7*time.Second)
	}
	if got.Penalty <= 0 {
		t.Errorf("flap penalty lost over restarts: %g", got.Penalty)
	}
}

func TestRestoreAfterObservationRefused(t *testing.T) {
	f, _ := hysteresis.NewFleet(testFleetConfig())
	_ = f.Add("m1", hysteresis.Overrides{})
	k := store.NewKeeper(store.NewMemory(), logr.Discard())
	p := enginestate.New(k, enginestate.Options{})
	d, _ := f.Step("m1", hysteresis.Observation{Time: t0, OK: true})
	p.Observed("m1", d)
	if _, err := p.Restore(context.Background(), "m1", owner{f}); !errors.Is(err, enginestate.ErrRestoreTooLate) {
		t.Fatalf("restore after an observation: %v, want ErrRestoreTooLate", err)
	}
}

func owed(name string) deletes.PendingDelete {
	return deletes.PendingDelete{Kind: deletes.Owed, Namespace: "ns", Name: name, HostUID: "uid-" + name,
		Cause: "DeletionByTaintManager", Since: time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)}
}

// With the store down when the leader starts, members start fresh after
// RestoreTimeout (only the first waits), and the saved owed deletes are
// merged, not overwritten, once the store is back.
func TestRestoreWhileStoreDown(t *testing.T) {
	ctx := context.Background()
	fc := testFleetConfig()
	m := store.NewMemory()
	prev := startSim(t, m, fc, enginestate.Options{}, "a", "b")
	prev.run("a", down(10*time.Second, time.Hour), 0, 20*time.Second, time.Second, 0)
	storetest.Update(prev.keeper, "a", func(st *storetest.State) { st.Deletes = []deletes.PendingDelete{owed("owed-before-restart")} })
	if err := prev.keeper.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	f := &storetest.Faulty{Store: m}
	f.Fail(storetest.ErrDown)
	fleet, _ := hysteresis.NewFleet(fc)
	k := runKeeper(t, f, store.KeeperOptions{MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	clk := clocktesting.NewFakeClock(t0)
	p := enginestate.New(k, enginestate.Options{RestoreTimeout: 300 * time.Millisecond, Clock: clk})
	for i, c := range []string{"a", "b"} {
		_ = fleet.Add(c, hysteresis.Overrides{})
		start := clk.Now()
		restored, err := restoreStepping(t, p, clk, c, owner{fleet})
		took := clk.Since(start)
		if restored || err == nil {
			t.Fatalf("%s restored=%v err=%v with the store down", c, restored, err)
		}
		if i == 0 && took < 300*time.Millisecond {
			t.Errorf("first restore gave up after %s, before RestoreTimeout", took)
		}
		if i == 1 && took > 0 {
			t.Errorf("second restore waited %s: the deadline is per term, not per member", took)
		}
	}
	if p.Stats().Unrestored != 2 {
		t.Errorf("stats %+v", p.Stats())
	}
	// Decisions go on from memory; pod sync records another owed delete.
	d, _ := fleet.Step("a", hysteresis.Observation{Time: t0.Add(25 * time.Second), Class: hysteresis.ClassNetwork})
	p.Observed("a", d)
	storetest.Update(k, "a", func(st *storetest.State) { st.Deletes = append(st.Deletes, owed("owed-after-restart")) })
	f.Fail(nil)
	if err := k.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cs, err := store.ReadCluster(ctx, m, "a")
	rec, _ := storetest.Read(cs)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range rec.Deletes {
		names = append(names, d.Name)
	}
	if got := fmt.Sprint(names); got != "[owed-after-restart owed-before-restart]" {
		t.Errorf("record after the store came back: deletes %s", got)
	}
	var snap struct {
		Last *struct {
			Time time.Time `json:"t"`
		} `json:"last"`
	}
	if err := json.Unmarshal(rec.Hysteresis, &snap); err != nil || snap.Last == nil || !snap.Last.Time.Equal(t0.Add(25*time.Second)) {
		t.Errorf("record's snapshot is not the running engine's (last observation at 25s): %s (%v)", rec.Hysteresis, err)
	}
}

// restoreStepping runs p.Restore, moving clk on by 50ms whenever the
// restore waits on it.
func restoreStepping(t *testing.T, p *enginestate.Persister, clk *clocktesting.FakeClock, cluster string, into enginestate.Target) (bool, error) {
	t.Helper()
	type result struct {
		restored bool
		err      error
	}
	done := make(chan result, 1)
	go func() {
		restored, err := p.Restore(context.Background(), cluster, into)
		done <- result{restored, err}
	}()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case r := <-done:
			return r.restored, r.err
		case <-deadline:
			t.Fatal("restore did not return")
		default:
		}
		if clk.HasWaiters() {
			clk.Step(50 * time.Millisecond)
		}
		runtime.Gosched()
	}
}

// scanClock is a store whose reads of every record are stamped with clk.
type scanClock struct {
	*storetest.Faulty
	clk   *clocktesting.FakeClock
	scans []time.Time
}

func (s *scanClock) Scan(ctx context.Context) ([]store.Record, error) {
	s.scans = append(s.scans, s.clk.Now())
	return s.Faulty.Scan(ctx)
}

// An unavailable store is read again after 100ms, doubling to at most 2s,
// and once more at RestoreTimeout, the deadline, before the member starts
// fresh.
func TestRestoreRetriesUntilRestoreTimeout(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	s := &scanClock{Faulty: &storetest.Faulty{Store: store.NewMemory()}, clk: clk}
	s.Fail(storetest.ErrDown)
	k := runKeeper(t, s, store.KeeperOptions{})
	p := enginestate.New(k, enginestate.Options{RestoreTimeout: 4 * time.Second, Clock: clk})
	fleet, _ := hysteresis.NewFleet(testFleetConfig())
	_ = fleet.Add("a", hysteresis.Overrides{})
	if restored, err := restoreStepping(t, p, clk, "a", owner{fleet}); restored || !errors.Is(err, storetest.ErrDown) {
		t.Fatalf("restored=%v err=%v with the store down; want the store's error", restored, err)
	}
	var at []string
	for _, s := range s.scans {
		at = append(at, s.Sub(t0).String())
	}
	if got, want := strings.Join(at, " "), "0s 100ms 300ms 700ms 1.5s 3.1s 4s"; got != want {
		t.Errorf("reads at %s, want %s", got, want)
	}
}

// snapshotTarget records the snapshot a restore hands over.
type snapshotTarget struct{ got string }

func (s *snapshotTarget) Restore(_ string, snapshot []byte) (hysteresis.Status, error) {
	s.got = string(snapshot)
	return hysteresis.Status{}, nil
}

// Sharded, a member taken over after the replica started is restored from
// its records as they are then, not from a copy read at the first restore:
// the member's previous writer kept checkpointing it meanwhile.
func TestShardedRestoreReadsTheMemberAfresh(t *testing.T) {
	ctx := context.Background()
	m := store.NewMemory()
	ring := storetest.NewRing()
	ring.Take("m1", "one")
	ring.Take("m2", "two")
	one := store.NewKeeper(m, logr.Discard(), store.KeeperOptions{Owners: ring.Owners("one")})
	two := store.NewKeeper(m, logr.Discard(), store.KeeperOptions{Owners: ring.Owners("two")})
	for _, k := range []*store.Keeper{one, two} {
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); k.Run(runCtx) }()
		t.Cleanup(func() { cancel(); <-done })
	}
	checkpoint := func(v int) {
		storetest.Update(one, "m1", func(st *storetest.State) { st.Hysteresis = []byte(fmt.Sprintf(`{"v":%d}`, v)) })
		if err := one.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	checkpoint(1)
	p := enginestate.New(two, enginestate.Options{})
	if _, err := p.Restore(ctx, "m2", &snapshotTarget{}); err != nil {
		t.Fatal(err)
	}
	checkpoint(2)
	ring.Take("m1", "two", "one")
	var got snapshotTarget
	if _, err := p.Restore(ctx, "m1", &got); err != nil {
		t.Fatal(err)
	}
	if got.got != `{"v":2}` {
		t.Errorf("m1 restored from %s, want its last checkpoint {\"v\":2}", got.got)
	}
}

// Sharded, a member that was observed here, left for another replica and
// came back is restored again, from what that replica wrote.
func TestShardedRestoreOfAMemberThatCameBack(t *testing.T) {
	ctx := context.Background()
	f, _ := hysteresis.NewFleet(testFleetConfig())
	_ = f.Add("m1", hysteresis.Overrides{})
	m := store.NewMemory()
	ring := storetest.NewRing()
	ring.Take("m1", "one")
	k := store.NewKeeper(m, logr.Discard(), store.KeeperOptions{Owners: ring.Owners("one")})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); k.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })
	p := enginestate.New(k, enginestate.Options{})
	d, _ := f.Step("m1", hysteresis.Observation{Time: t0, OK: true})
	p.Observed("m1", d)
	if err := k.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	ring.Take("m1", "two")
	_, v, _ := m.Get(ctx, "m1") // "" if the observation wrote nothing
	theirs := storetest.Record(storetest.State{Hysteresis: []byte(`{"v":"two"}`), Term: 2, Writer: "two"})
	if _, err := m.Put(ctx, "m1", theirs, v); err != nil {
		t.Fatal(err)
	}
	ring.Take("m1", "one")
	var got snapshotTarget
	if _, err := p.Restore(ctx, "m1", &got); err != nil {
		t.Fatalf("restore of a member that came back: %v", err)
	}
	if got.got != `{"v":"two"}` {
		t.Errorf("restored from %s, want the other replica's {\"v\":\"two\"}", got.got)
	}
}
