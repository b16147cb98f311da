package enginestate_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/syncer/enginestate"
	"github.com/leafsync/leafsync/internal/syncer/store"
)

// writeTrace is a simulated probe trace for a fleet: link(i, t) says whether
// member i answers at offset t.
type writeTrace struct {
	name     string
	duration time.Duration
	link     func(i int, t time.Duration) bool
	// flaps is the number of flaps per member in the trace (for writes/flap).
	flaps int
}

// writeRates drives the real engine, Keeper and Persister over a trace,
// flushing after every probe (no coalescing across probes: an upper bound),
// and returns the store writes per member per minute of the trace, the
// busiest minute's writes per member, and the writes of quiet minutes.
func writeRates(tb testing.TB, fc hysteresis.FleetConfig, po enginestate.Options, members int, tr writeTrace) (perMin, peak, quiet float64) {
	m := store.NewMemory()
	names := make([]string, members)
	for i := range names {
		names[i] = fmt.Sprintf("m%03d", i)
	}
	x := startSim(tb, m, fc, po, names...)
	p := fc.ProbeInterval.Duration
	minutes := int(tr.duration / time.Minute)
	perMinute := make([]int, minutes)
	busy := make([]bool, minutes)
	for d := time.Duration(0); d < tr.duration; d += p {
		before := m.Puts()
		for i, c := range names {
			at := d + time.Duration(i)*p/time.Duration(members) // spread the probes
			ok := tr.link(i, at)
			x.observe(c, t0.Add(at), ok)
			if !ok {
				busy[int(at/time.Minute)] = true
			}
		}
		perMinute[int(d/time.Minute)] += m.Puts() - before
	}
	quietMinutes, quietWrites := 0, 0
	for i, n := range perMinute {
		peak = max(peak, float64(n)/float64(members))
		if !busy[i] {
			quietMinutes++
			quietWrites += n
		}
	}
	if quietMinutes > 0 {
		quiet = float64(quietWrites) / float64(quietMinutes) / float64(members)
	}
	return float64(m.Puts()) / float64(minutes) / float64(members), peak, quiet
}

// BenchmarkStoreWrites reports store writes per member per minute with the
// default thresholds (probe 5s, cordon 10s, NotReady 90s, Ready 30s,
// window 10m) and checkpointInterval 10s, for 20 members:
//
//	go test ./internal/syncer/enginestate -run '^$' -bench StoreWrites -benchtime 1x
//
// writes/min/member is over the whole trace; peak-writes/min/member the
// busiest minute; quiet-writes/min/member the minutes without a failed
// probe (the window's tail after a flap writes a little); writes/flap the
// writes one flap causes in all.
func BenchmarkStoreWrites(b *testing.B) {
	fc := hysteresis.DefaultFleetConfig()
	po := enginestate.Options{CheckpointInterval: 10 * time.Second}
	const members = 20
	traces := []writeTrace{
		{name: "steady", duration: time.Hour, link: func(int, time.Duration) bool { return true }},
		{name: "one-30s-flap-per-hour", duration: time.Hour, flaps: 1, link: func(i int, t time.Duration) bool {
			return t < 20*time.Minute || t >= 20*time.Minute+30*time.Second
		}},
		{name: "flapping-20s-every-2m", duration: time.Hour, flaps: 30, link: func(i int, t time.Duration) bool {
			return t%(2*time.Minute) >= 20*time.Second
		}},
		{name: "one-10m-outage", duration: time.Hour, link: func(i int, t time.Duration) bool {
			return t < 20*time.Minute || t >= 30*time.Minute
		}},
	}
	for _, tr := range traces {
		b.Run(tr.name, func(b *testing.B) {
			var perMin, peak, quiet float64
			for range b.N {
				perMin, peak, quiet = writeRates(b, fc, po, members, tr)
			}
			b.ReportMetric(perMin, "writes/min/member")
			b.ReportMetric(peak, "peak-writes/min/member")
			b.ReportMetric(quiet, "quiet-writes/min/member")
			if tr.flaps > 0 {
				b.ReportMetric(perMin*tr.duration.Minutes()/float64(tr.flaps), "writes/flap")
			}
			b.ReportMetric(0, "ns/op") // time is not the point here
		})
	}
}

// TestWriteRates keeps the write rates tiny: nothing in steady state, a
// handful per flap, a few per minute at most during an outage — never one
// per probe (12/min at the default probe interval).
func TestWriteRates(t *testing.T) {
	fc := hysteresis.DefaultFleetConfig()
	po := enginestate.Options{CheckpointInterval: 10 * time.Second}
	perProbe := float64(time.Minute / fc.ProbeInterval.Duration)
	for _, tc := range []struct {
		tr                 writeTrace
		maxPerMin, maxPeak float64
	}{
		{writeTrace{name: "steady", duration: 30 * time.Minute, link: func(int, time.Duration) bool { return true }}, 0, 0},
		{writeTrace{name: "flap", duration: 30 * time.Minute, flaps: 1, link: func(i int, t time.Duration) bool {
			return t < 10*time.Minute || t >= 10*time.Minute+30*time.Second
		}}, 1, perProbe / 2},
		{writeTrace{name: "outage", duration: 30 * time.Minute, link: func(i int, t time.Duration) bool {
			return t < 10*time.Minute || t >= 20*time.Minute
		}}, perProbe / 2, perProbe / 2},
	} {
		perMin, peak, quiet := writeRates(t, fc, po, 5, tc.tr)
		t.Logf("%-7s: %.2f writes/min/member over %s, busiest minute %.1f, quiet minutes %.2f", tc.tr.name, perMin, tc.tr.duration, peak, quiet)
		if perMin > tc.maxPerMin || peak > tc.maxPeak {
			t.Errorf("%s: %.2f writes/min/member (max %.2f), busiest minute %.1f (max %.1f)", tc.tr.name, perMin, tc.maxPerMin, peak, tc.maxPeak)
		}
	}
}
