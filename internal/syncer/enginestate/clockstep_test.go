package enginestate_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/syncer/enginestate"
	"github.com/leafsync/leafsync/internal/syncer/store"
)

// A leader whose clock ran 10 min ahead saved the member's state; the next
// leader's probes all lie before it. The member is dead: the leaf is
// NotReady within notReadyAfter + one probe interval of probes, one Warning
// Event says what happened, and the state saved from then on is in the new
// leader's clock (a third leader restoring it sees no step).
func TestRestartOnSnapshotFromClockAhead(t *testing.T) {
	fc := testFleetConfig() // probe 1s, notReadyAfter 10s
	p := fc.ProbeInterval.Duration
	const c = "m1"
	m := store.NewMemory()
	ahead := startSim(t, m, fc, enginestate.Options{}, c)
	for d := time.Duration(0); d < 30*time.Second; d += p { // a 3s flap gets the state written
		ahead.observe(c, t0.Add(10*time.Minute+d), d < 10*time.Second || d >= 13*time.Second)
	}
	if saved, _ := ahead.fleet.Status(c); saved.State != hysteresis.Ready {
		t.Fatalf("setup: %s", saved.State)
	}

	rec := events.NewFakeRecorder(10)
	secret := &corev1.ObjectReference{Kind: "Secret", APIVersion: "v1", Namespace: "leafsync", Name: "m1"}
	opts := enginestate.Options{Recorder: rec, Regarding: func(string) runtime.Object { return secret }}
	x := startSim(t, m, fc, opts, c)
	start := t0.Add(30 * time.Second) // this leader's clock: 10 min behind
	notReadyAt := -1
	for i := range 300 {
		st := x.observe(c, start.Add(time.Duration(i)*p), false)
		if st.State == hysteresis.NotReady && notReadyAt < 0 {
			notReadyAt = i
		}
	}
	if bound := int((fc.NotReadyAfter.Duration + p) / p); notReadyAt < 0 || notReadyAt > bound {
		t.Errorf("NotReady at failed probe %d (-1: never), want by probe %d", notReadyAt, bound)
	}
	if k, _ := x.fleet.Counters(c); k.ClockSteps != 1 {
		t.Errorf("clock steps counted: %d, want 1", k.ClockSteps)
	}
	select {
	case e := <-rec.Events:
		if !strings.HasPrefix(e, "Warning ClockStepped ") || !strings.Contains(e, "stamped 2026-03-01T12:00:30Z, 9m53s before the one before it") {
			t.Errorf("event %q", e)
		}
	default:
		t.Error("no ClockStepped Event")
	}
	if len(rec.Events) != 0 {
		t.Errorf("%d more Events, want one per step", len(rec.Events))
	}

	last, _ := x.fleet.Status(c)
	third := startSim(t, m, fc, opts, c)
	restored, _ := third.fleet.Status(c)
	if restored.LastObserved.After(last.LastObserved) || restored.State != hysteresis.NotReady {
		t.Errorf("saved state: %s last observed %v, want NotReady at or before %v (the new clock)", restored.State, restored.LastObserved, last.LastObserved)
	}
	third.observe(c, last.LastObserved.Add(p), false)
	if len(rec.Events) != 0 {
		t.Errorf("a restore of state saved after the step reports another step: %q", <-rec.Events)
	}
}

// A step ahead (seen by the engine against the monotonic clock) is reported
// too, and the state is written at once.
func TestClockStepAheadReported(t *testing.T) {
	fc := testFleetConfig()
	const c = "m1"
	m := store.NewMemory()
	rec := events.NewFakeRecorder(10)
	secret := &corev1.ObjectReference{Kind: "Secret", APIVersion: "v1", Namespace: "leafsync", Name: "m1"}
	x := startSim(t, m, fc, enginestate.Options{Recorder: rec, Regarding: func(string) runtime.Object { return secret }}, c)
	d := x.decide(c, t0, true)
	puts := m.Puts()
	d.Status.ClockStep, d.Status.LastObserved = 10*time.Minute, t0.Add(10*time.Minute+time.Second)
	d.Transitions = nil
	x.p.Observed(c, d)
	if err := x.keeper.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if m.Puts() == puts {
		t.Error("state not written after a clock step")
	}
	select {
	case e := <-rec.Events:
		if !strings.HasPrefix(e, "Warning ClockStepped leafsync's wall clock stepped 10m0s ahead between two probes of member m1") {
			t.Errorf("event %q", e)
		}
	default:
		t.Error("no ClockStepped Event")
	}
}
