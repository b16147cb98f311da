package clusters

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/leafsync/leafsync/hysteresis"
)

// Options.Restore runs before the member's first probe is fed to the
// engine, and the first observation lands on the restored state; OnObserve
// sees every observation with its transitions.
func TestRestoreBeforeFirstObservation(t *testing.T) {
	e := newEnv(t)
	// Saved state of a previous process: east NotReady, last probed 1s ago.
	fc := hysteresis.DefaultFleetConfig()
	fc.ProbeInterval = hysteresis.D(100 * time.Millisecond)
	prev, err := hysteresis.NewFleet(fc)
	if err != nil {
		t.Fatal(err)
	}
	_ = prev.Add("east", hysteresis.Overrides{})
	start := time.Now().Add(-100 * time.Second)
	for at := start; at.Before(time.Now().Add(-time.Second)); at = at.Add(100 * time.Millisecond) {
		if _, _, err := prev.Observe("east", hysteresis.Observation{Time: at, Class: hysteresis.ClassNetwork}); err != nil {
			t.Fatal(err)
		}
	}
	if st, _ := prev.Status("east"); st.State != hysteresis.NotReady {
		t.Fatalf("saved state %s, want NotReady", st.State)
	}
	snap, err := prev.SnapshotCluster("east")
	if err != nil {
		t.Fatal(err)
	}

	var (
		mu          sync.Mutex
		restores    int
		obsAtRestor = -1
		first       []hysteresis.Transition
		observed    int
	)
	opts := e.ctl.opts
	opts.Restore = func(_ context.Context, cluster string, into *Registry) {
		e.eng.mu.Lock()
		n := e.eng.obs[cluster]
		e.eng.mu.Unlock()
		mu.Lock()
		restores++
		obsAtRestor = n
		mu.Unlock()
		if _, err := into.Restore(cluster, snap); err != nil {
			t.Error(err)
		}
	}
	opts.OnObserve = func(cluster string, d hysteresis.Decision) {
		ts := d.Transitions
		mu.Lock()
		defer mu.Unlock()
		// A probe under CPU load may time out (the interval, 100ms, bounds
		// it) and change nothing: the first transitions are what counts.
		if first == nil && len(ts) > 0 {
			first = ts
		}
		observed++
	}
	ctl, err := New(e.c, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ctl.Shutdown)
	e.ctl = ctl

	e.create("east", "east", e.srv.Kubeconfig("token"), nil, 0)
	e.mustReconcile("east")
	e.mustReconcile("east") // a second reconcile restores nothing
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n, changed := observed, first != nil
		mu.Unlock()
		if changed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no transition after %d observations", n)
		}
		time.Sleep(10 * time.Millisecond)
		e.tick()
	}
	mu.Lock()
	defer mu.Unlock()
	if restores != 1 || obsAtRestor != 0 {
		t.Fatalf("Restore called %d times, with %d observations already fed", restores, obsAtRestor)
	}
	// The member answers: its first answer moves the restored NotReady to
	// Recovering (a fresh engine would have stayed Ready).
	if len(first) != 1 || first[0].From != hysteresis.NotReady || first[0].To != hysteresis.Recovering {
		t.Fatalf("first transitions %+v, want NotReady -> Recovering", first)
	}
}
