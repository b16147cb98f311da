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
	r.Samples = append(r.Samples, s(40, 3, 4))
	r.Integrate()
	if r.RecoveredAfter != -1 {
		t.Fatalf("still short at the end: recovered after %v, want -1", r.RecoveredAfter)
	}
	r.Samples = []Sample{s(0, 4, 4), s(30, 4, 4)}
	r.Integrate()
	if r.RecoveredAfter != 0 || r.PodSecondsNotReady != 0 {
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
	if got := r.failoverText(); got != "db never, web 120s" {
		t.Fatalf("failover text %q", got)
	}
	r.Failover = nil
	r.Integrate()
	if r.FailoverAfter != nil || r.failoverText() != "—" {
		t.Fatalf("no spare, no failover column: %v %q", r.FailoverAfter, r.failoverText())
	}
}
