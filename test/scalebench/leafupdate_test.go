package scalebench

import (
	"testing"
	"time"

	"github.com/leafsync/leafsync/test/harness"
)

func statusPatch(leaf string, code int, received, completed time.Time) harness.AuditEvent {
	var e harness.AuditEvent
	e.Stage, e.Verb, e.UserAgent = "ResponseComplete", "patch", "leafsync/v0.3.0"
	e.ObjectRef.Resource, e.ObjectRef.Subresource, e.ObjectRef.Name = "nodes", "status", leaf
	e.ResponseStatus.Code = code
	e.RequestReceived, e.StageTimestamp = received, completed
	return e
}

func TestSplitUpdates(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 17, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	lease := statusPatch("leaf-a", 200, ms(100), ms(110))
	lease.ObjectRef.Resource, lease.ObjectRef.Subresource = "leases", ""
	evs := []harness.AuditEvent{
		statusPatch("leaf-a", 200, ms(-50), ms(-40)), // before the deletion
		lease, // not the leaf's status
		statusPatch("leaf-a", 200, ms(300), ms(320)), // the one
		statusPatch("leaf-a", 200, ms(900), ms(905)), // after the watch saw it
		statusPatch("leaf-b", 409, ms(200), ms(210)), // refused
		statusPatch("leaf-b", 200, ms(400), ms(450)), // several: an earlier one...
		statusPatch("leaf-b", 200, ms(600), ms(700)), // ...and the last before seen
	}
	sp := splitUpdates([]leafUpdate{
		{leaf: "leaf-a", deleted: ms(0), seen: ms(500)},
		{leaf: "leaf-b", deleted: ms(0), seen: ms(800)},
		{leaf: "leaf-c", deleted: ms(0), seen: ms(800)},
	}, evs)
	const eps = 1e-9
	near := func(got, want []float64) bool {
		if len(got) != len(want) {
			return false
		}
		for i := range want {
			if d := got[i] - want[i]; d > eps || d < -eps {
				return false
			}
		}
		return true
	}
	if !near(sp.toHost, []float64{0.3, 0.6}) || !near(sp.inHost, []float64{0.02, 0.1}) {
		t.Errorf("toHost %v, inHost %v; want [0.3 0.6], [0.02 0.1]", sp.toHost, sp.inHost)
	}
	if sp.missing != 1 || sp.ambiguous != 1 {
		t.Errorf("missing %d, ambiguous %d; want 1, 1", sp.missing, sp.ambiguous)
	}
	var s Step
	sp.record(&s)
	if s.LeafUpdateToHostP99 != sp.toHost[1] || s.LeafUpdateInHostP50 != sp.inHost[0] || s.LeafUpdateWritesMissing != 1 || s.LeafUpdateWritesAmbiguous != 1 {
		t.Errorf("recorded %+v", s)
	}
}
