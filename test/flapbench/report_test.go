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
