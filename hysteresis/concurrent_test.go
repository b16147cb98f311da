package hysteresis

import (
	"sync"
	"testing"
	"time"
)

// Fleet only adds a lock: the same trace fed concurrently (one goroutine
// per cluster) gives each cluster the decisions RawFleet gives it, and a
// Fleet restored from its snapshot continues from the same state.
func TestFleetIsRawFleetBehindALock(t *testing.T) {
	names := []string{"a", "b", "c", "d"}
	raw := newFleet(t, DefaultConfig(), names...)
	f, err := NewFleet(DefaultFleetConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if err := f.Add(n, Overrides{}); err != nil {
			t.Fatal(err)
		}
	}
	// Clusters fail on independent schedules, never enough at once to
	// engage the mass guard, so interleaving does not change decisions.
	obs := func(n string, i int) Observation {
		return Observation{Time: t0.Add(time.Duration(i) * 5 * time.Second), OK: n != "a" || i > 55, Class: ClassNetwork}
	}
	for _, n := range names {
		for i := range 60 {
			if _, _, err := raw.Observe(n, obs(n, i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	var wg sync.WaitGroup
	for _, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 60 {
				if _, _, err := f.Observe(n, obs(n, i)); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	want, err := raw.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("Fleet state differs from RawFleet:\n%s\n%s", got, want)
	}
	g, err := RestoreFleet(DefaultFleetConfig(), got)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := g.Status("a"); st.State != Recovering {
		t.Errorf("restored a = %v, want Recovering", st.State)
	}
}

// Step's Decision agrees with itself: its status and transitions are
// Observe's, its config is the cluster's (with an override), and its
// snapshot, restored elsewhere, gives the same status.
func TestStepDecision(t *testing.T) {
	f, err := NewFleet(DefaultFleetConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Add("a", Overrides{ProbeInterval: &Duration{3 * time.Second}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Step("a", okAt(0).obs()); err != nil {
		t.Fatal(err)
	}
	d, err := f.Step("a", netAt(sec(3)).obs())
	if err != nil {
		t.Fatal(err)
	}
	if d.Status.State != Suspect || len(d.Transitions) != 1 || d.Transitions[0].To != Suspect {
		t.Errorf("decision %+v, want one transition to Suspect", d)
	}
	if d.Config.ProbeInterval.Duration != 3*time.Second {
		t.Errorf("config probe interval %s, want the override's 3s", d.Config.ProbeInterval.Duration)
	}
	other, _ := NewFleet(DefaultFleetConfig())
	if err := other.RestoreCluster(d.Snapshot); err != nil {
		t.Fatal(err)
	}
	if st, _ := other.Status("a"); st != d.Status {
		t.Errorf("restored snapshot gives %+v, want the decision's %+v", st, d.Status)
	}
	if cur, ok := f.Current("a"); !ok || cur.Status != d.Status || cur.Transitions != nil || cur.Config != d.Config {
		t.Errorf("Current = %+v, want the last decision without transitions", cur)
	}
	if _, err := f.Step("nope", okAt(0).obs()); err == nil {
		t.Error("Step of an unknown cluster accepted")
	}
}
