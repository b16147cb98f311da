package hysteresis

import (
	"fmt"
	"testing"
	"time"
)

// benchFleet returns a fleet of n clusters after 200 probe rounds in which
// the first `failing` clusters failed with class and the others succeeded,
// so every cluster is in its steady state.
func benchFleet(tb testing.TB, n, failing int, class Class) (*RawFleet, []string) {
	fc := DefaultFleetConfig()
	fc.MassHoldMax = D(24 * time.Hour) // held for the whole benchmark
	f, err := NewRawFleet(fc)
	if err != nil {
		tb.Fatal(err)
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("member-%03d", i)
		if err := f.Add(names[i], Overrides{}); err != nil {
			tb.Fatal(err)
		}
	}
	for step := range 200 {
		for i, name := range names {
			o := Observation{Time: t0.Add(time.Duration(step) * s5), OK: i >= failing, Class: class}
			if _, _, err := f.Observe(name, o); err != nil {
				tb.Fatal(err)
			}
		}
	}
	return f, names
}

// benchObserve measures one decision for clusters[0:k] (k = failing, or all
// when none fail), repeating the outcome they are in.
func benchObserve(b *testing.B, n, failing int, class Class, want State) {
	f, names := benchFleet(b, n, failing, class)
	k := n
	if failing > 0 {
		k = failing
	}
	b.ReportAllocs()
	var st Status
	for i := 0; b.Loop(); i++ {
		o := Observation{Time: t0.Add(time.Duration(200+i/k) * s5), OK: failing == 0, Class: class, Detail: "dial tcp: i/o timeout"}
		var err error
		if st, _, err = f.Observe(names[i%k], o); err != nil {
			b.Fatal(err)
		}
	}
	if st.State != want {
		b.Fatalf("state %s, want %s", st.State, want)
	}
}

// One decision for a healthy cluster (the common case).
func BenchmarkObserveSteadyReady(b *testing.B) { benchObserve(b, 100, 0, 0, Ready) }

// One decision for a cluster in a long outage (10 of 100 down).
func BenchmarkObserveSteadyNotReady(b *testing.B) {
	benchObserve(b, 100, 10, ClassNetwork, NotReady)
}

// One decision for a cluster held Suspect by the mass-disconnect guard (60
// of 100 down): the most expensive path, notReadyAfter and the availability
// window are evaluated on every probe.
func BenchmarkObserveHeldSuspect(b *testing.B) {
	benchObserve(b, 100, 60, ClassServer, Suspect)
}

func TestSteadyStateDoesNotAllocate(t *testing.T) {
	for _, tc := range []struct {
		failing int
		class   Class
		want    State
	}{{0, 0, Ready}, {1, ClassNetwork, NotReady}, {6, ClassNetwork, Suspect}, {3, ClassAuth, Ready}} {
		f, names := benchFleet(t, 10, tc.failing, tc.class)
		k := 10
		if tc.failing > 0 {
			k = tc.failing
		}
		i := 0
		var st Status
		allocs := testing.AllocsPerRun(1000, func() {
			o := Observation{Time: t0.Add(time.Duration(200+i/k) * s5), OK: tc.failing == 0, Class: tc.class}
			var trs []Transition
			var err error
			if st, trs, err = f.Observe(names[i%k], o); err != nil || trs != nil {
				t.Fatalf("%v %v", trs, err)
			}
			i++
		})
		if allocs != 0 || st.State != tc.want {
			t.Errorf("%+v: %v allocs per decision, state %s", tc, allocs, st.State)
		}
	}
}
