package flapbench

import (
	"math"
	"testing"
	"time"
)

func TestIntegrate(t *testing.T) {
	s := func(at float64, ready, running int) Sample {
		return Sample{At: time.Duration(at * float64(time.Second)), HostReady: ready, MemberRunning: running}
	}
	r := Result{Desired: 4, FaultEnd: 10 * time.Second, Samples: []Sample{
		s(-1, 4, 4), s(0, 4, 4), s(5, 2, 4), s(15, 3, 3), s(20, 4, 4), s(30, 4, 4),
	}}
	r.Integrate()
	// Host: 2 missing for 10s, 1 for 5s. Member: 1 for 5s.
	if math.Abs(r.PodSecondsNotReady-25) > 1e-9 || math.Abs(r.CapacitySecondsLost-5) > 1e-9 {
		t.Fatalf("pod-s %v capacity-s %v, want 25 and 5", r.PodSecondsNotReady, r.CapacitySecondsLost)
	}
	if r.RecoveredAfter != 10 {
		t.Fatalf("recovered after %v, want 10 (fault ended at 10s, all Ready at 20s)", r.RecoveredAfter)
	}
	if r.NeverShort {
		t.Fatal("pods were short during the fault: NeverShort must be false")
	}
	// Short during the fault only, whole again by its end: recovered
	// after 0 s, but something was lost.
	r.Samples = []Sample{s(0, 4, 4), s(5, 3, 4), s(8, 4, 4), s(30, 4, 4)}
	r.Integrate()
	if r.RecoveredAfter != 0 || r.NeverShort {
		t.Fatalf("whole by the fault's end: recovered after %v, never short %v; want 0 and false", r.RecoveredAfter, r.NeverShort)
	}
	r.Samples = append(r.Samples, s(40, 3, 4))
	r.Integrate()
	if r.RecoveredAfter != -1 {
		t.Fatalf("still short at the end: recovered after %v, want -1", r.RecoveredAfter)
	}
	r.Samples = []Sample{s(0, 4, 4), s(30, 4, 4)}
	r.Integrate()
	if r.RecoveredAfter != 0 || r.PodSecondsNotReady != 0 || !r.NeverShort {
		t.Fatalf("nothing lost: %+v", r)
	}
}

func TestFailoverAfter(t *testing.T) {
	s := func(at float64, web, db int) Sample {
		return Sample{At: time.Duration(at * float64(time.Second)), Elsewhere: map[string]int{"web": web, "db": db}}
	}
	r := Result{Desired: 4, Failover: map[string]int{"web": 2, "db": 2}, Samples: []Sample{
		s(-1, 2, 2), s(0, 0, 0), s(100, 1, 0), s(120, 2, 0), s(140, 2, 1),
	}}
	r.Integrate()
	if r.FailoverAfter["web"] != 120 || r.FailoverAfter["db"] != -1 {
		t.Fatalf("failover after %v, want web 120s (both replicas elsewhere), db never", r.FailoverAfter)
	}
	if got := failoverCell([]Result{r}); got != "db never, web 120s" {
		t.Fatalf("failover text %q", got)
	}
	r.Failover = nil
	r.Integrate()
	if r.FailoverAfter != nil || failoverCell([]Result{r}) != "—" {
		t.Fatalf("no spare, no failover column: %v %q", r.FailoverAfter, failoverCell([]Result{r}))
	}
}

// TestRepetitionsRow: one row per contestant, medians with the range when
// the repetitions differ; "never" counts as the longest time.
func TestRepetitionsRow(t *testing.T) {
	r := func(evictions int, recovered, web float64) Result {
		return Result{Scenario: "s", Contestant: "c", HostEvictions: evictions, PodSecondsNotReady: 10, RecoveredAfter: recovered,
			Failover: map[string]int{"web": 2}, FailoverAfter: map[string]float64{"web": web}}
	}
	got := row([]Result{r(4, 12, 100), r(0, -1, -1), r(2, 15, 110)})
	want := "| s | c | 0 | 0 | 2 (0–4) | 0 | 0 | 10 | 0 | 0 | 15s (12s–not within the run) | web 110s (100s–never) |"
	if got != want {
		t.Fatalf("row\n%s\nwant\n%s", got, want)
	}
	// 10 pod-s short, whole again by the fault's end: recovered at 0 s,
	// not "never lost".
	got = row([]Result{r(4, 0, 100)})
	want = "| s | c | 0 | 0 | 4 | 0 | 0 | 10 | 0 | 0 | 0s | web 100s |"
	if got != want {
		t.Fatalf("one repetition: row\n%s\nwant\n%s", got, want)
	}
	whole := r(4, 0, 100)
	whole.NeverShort, whole.PodSecondsNotReady = true, 0
	got = row([]Result{whole, whole})
	want = "| s | c | 0 | 0 | 4 | 0 | 0 | 0 | 0 | 0 | — | web 100s |"
	if got != want {
		t.Fatalf("never short: row\n%s\nwant\n%s", got, want)
	}
	if got := summarize([]float64{1, 2, 3, 10}, count); got != "2 (1–10)" { // 2.5 rounds to even
		t.Fatalf("even count: %s", got)
	}
}
