package scalebench

import (
	"time"

	"github.com/leafsync/leafsync/test/harness"
)

// leafUpdate is one leaf's part of a timed member node removal: when the
// bench deleted the node, and when its leaf watch saw the leaf stop
// offering it.
type leafUpdate struct {
	leaf          string
	deleted, seen time.Time
}

// updateSplit is where the leaf updates' time went, in seconds, over the
// updates whose write was found: until the host API server received
// leafsync's status patch of the leaf, and from then until the server had
// completed it.
type updateSplit struct {
	toHost, inHost []float64
	// missing: updates with no such patch in the audit log; ambiguous:
	// updates with several.
	missing, ambiguous int
}

// splitUpdates finds, for each update, the status patch by leafsync that
// removed the node from the leaf, among evs (leafsync's requests to the
// host, completed): a successful patch of that leaf's nodes/status
// received after the deletion and before the watch saw the change. The
// audit log (Metadata level) has no bodies, so when there are several
// (another change of the leaf written meanwhile), the last one received
// before the watch saw the change is taken: the change was in it or in an
// earlier one, and the update counts as ambiguous.
func splitUpdates(updates []leafUpdate, evs []harness.AuditEvent) updateSplit {
	patches := map[string][]harness.AuditEvent{}
	for _, e := range evs {
		if e.Verb == "patch" && e.ObjectRef.Resource == "nodes" && e.ObjectRef.Subresource == "status" &&
			e.ResponseStatus.Code >= 200 && e.ResponseStatus.Code < 300 {
			patches[e.ObjectRef.Name] = append(patches[e.ObjectRef.Name], e)
		}
	}
	var out updateSplit
	for _, u := range updates {
		var last *harness.AuditEvent
		n := 0
		for i, e := range patches[u.leaf] {
			if e.RequestReceived.Before(u.deleted) || !e.RequestReceived.Before(u.seen) {
				continue
			}
			n++
			if last == nil || e.RequestReceived.After(last.RequestReceived) {
				last = &patches[u.leaf][i]
			}
		}
		switch {
		case n == 0:
			out.missing++
			continue
		case n > 1:
			out.ambiguous++
		}
		out.toHost = append(out.toHost, last.RequestReceived.Sub(u.deleted).Seconds())
		out.inHost = append(out.inHost, last.StageTimestamp.Sub(last.RequestReceived).Seconds())
	}
	return out
}

// record puts the split's percentiles and counts in s.
func (sp updateSplit) record(s *Step) {
	s.LeafUpdateToHostP50, s.LeafUpdateToHostP99 = Percentile(sp.toHost, 50), Percentile(sp.toHost, 99)
	s.LeafUpdateInHostP50, s.LeafUpdateInHostP99 = Percentile(sp.inHost, 50), Percentile(sp.inHost, 99)
	s.LeafUpdateWritesMissing, s.LeafUpdateWritesAmbiguous = sp.missing, sp.ambiguous
}
