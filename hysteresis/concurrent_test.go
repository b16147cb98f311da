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
