package leaves

import "time"

// pace spaces one leaf's syncs by the kind of their cause, so that a
// member whose pods churn does not hold back the changes a leaf shows at
// once.
//
// An urgent cause (a member node changed, the engine decided a
// transition, a new runtime or spec, the leaf Node deleted, the
// verification changed) syncs at once unless the last urgent sync was
// less than minGap ago: a burst of node changes is one write. A lazy
// cause (a member pod came or went: what it changes, the leaf's free
// resources, is written at most every AllocatableEvery anyway, see
// leafnode.Writer) waits minGap after the last sync of any kind, which
// bounds the recomputes a churning member costs. Before the split every
// sync counted against every other: with pod events every few hundred
// milliseconds, each node change waited up to minGap behind the last pod
// sync (scale benchmark: ~0.45 s of a leaf update's ~0.5 s at two
// registrations).
//
// Used by the one worker that holds the leaf's key.
type pace struct {
	lastSync, lastUrgent time.Time
}

// wait is how long a sync of that kind must still wait at now.
func (p *pace) wait(now time.Time, urgent bool) time.Duration {
	last := p.lastSync
	if urgent {
		last = p.lastUrgent
	}
	return max(last.Add(minGap).Sub(now), 0)
}

// synced records a sync of that kind at now.
func (p *pace) synced(now time.Time, urgent bool) {
	p.lastSync = now
	if urgent {
		p.lastUrgent = now
	}
}
