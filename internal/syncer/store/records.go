package store

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/go-logr/logr"
)

// recordSet is what the Keeper knows of a cluster's records in the store.
type recordSet struct {
	known bool              // objs reflect the store (read or written here)
	objs  map[string]object // the records as of the last read or write
	parts int               // ledger parts of the last layout written
	// laidOut is the last layout, made at ledger count laidOutAt, so that
	// a value checkpoint does not encode a long ledger again, and a change
	// only its parts.
	laidOut   *ledgerLayout
	laidOutAt uint64
	// verifiedAt is when the records were last read.
	verifiedAt time.Time
}

// index takes the records read as the cluster's records in the store, and
// reports whether one needs writing back (claim): written in another term
// than ours, in the one-record format of earlier versions, or undecodable.
func (rs *recordSet) index(cluster string, recs []stored, term uint64, log logr.Logger) (claim bool) {
	rs.objs, rs.parts, rs.known = map[string]object{}, 0, true
	for _, r := range recs {
		if r.name != cluster {
			rs.parts++
		}
		if r.err != nil {
			log.Error(r.err, "saved state cannot be decoded; it will be replaced", "cluster", cluster, "record", r.name)
			rs.objs[r.name] = object{version: r.version}
			claim = true
			continue
		}
		o, err := summed(r.st)
		if err != nil {
			o = object{}
		}
		o.st, o.version = r.st, r.version
		rs.objs[r.name] = o
		if term == 0 || r.st.term != term || (r.name == cluster && r.st.itemCount() > 0) {
			claim = true
		}
	}
	return claim
}

// sync writes (or deletes) one cluster's records: the head with the value
// sections, and the ledger parts its items need (layout). Only records
// that changed are written. Writes that drop a ledger item from a record
// wait until every other write succeeded, so an item moving between
// records (or out of a head of the one-record format) is never missing
// from the store; a failing ledger write never holds back the head. A
// conflict is merged (resolve) and written again.
func (k *Keeper) sync(ctx context.Context, cluster string) error {
	for attempt := 0; ; attempt++ {
		term, writer, err := k.stamp(cluster)
		if err != nil {
			return err
		}
		k.mu.Lock()
		e := k.entries[cluster]
		if e == nil || !e.pending() {
			k.mu.Unlock()
			return nil
		}
		if !e.known || !k.currentLocked(cluster, e) {
			// Never read, or (sharded) not since this replica became
			// the member's writer: another replica may have written.
			k.mu.Unlock()
			if err := k.resolve(ctx, cluster, false); err != nil {
				return err
			}
			continue
		}
		gone, seq, prev := e.gone, e.seq, e.parts
		st := e.mem.clone()
		st.term, st.writer = term, writer
		ledger, last, unchanged := e.ledger, e.laidOut, e.laidOutAt == e.ledger
		have := make(map[string]object, len(e.objs))
		for name, o := range e.objs {
			have[name] = o
		}
		k.mu.Unlock()

		want, parts := map[string]object{}, 0
		if !gone {
			var err error
			if want, parts, err = layout(cluster, st, prev, last, unchanged); err != nil {
				return err
			}
			k.mu.Lock()
			e.laidOut, e.laidOutAt = &ledgerLayout{objs: want, parts: parts, term: st.term}, ledger
			k.mu.Unlock()
		}
		conflict, err := k.writeObjects(ctx, cluster, e, want, have)
		switch {
		case err != nil:
			return err
		case !conflict:
			k.mu.Lock()
			e.flushed, e.parts = seq, parts
			if k.owners != nil {
				e.actedIn = term
			}
			if e.seq == seq {
				e.dirty = false
				if gone {
					delete(k.entries, cluster)
				}
			}
			k.mu.Unlock()
			return nil
		case attempt >= 3:
			return fmt.Errorf("%w (still conflicting after %d merges)", ErrConflict, attempt)
		}
		if err := k.resolve(ctx, cluster, true); err != nil {
			return err
		}
	}
}

// change is one record write: want nil deletes the record.
type change struct {
	name string
	want *object
	have object
	lose bool
}

// writeObjects writes the records that differ between want and have:
// first those that drop no ledger item (the head first), then, if all of
// them succeeded, those that do (deletions last). It stops at a conflict
// (conflict true: the caller merges and tries again).
func (k *Keeper) writeObjects(ctx context.Context, cluster string, e *entry, want, have map[string]object) (conflict bool, err error) {
	var changes []change
	for name, w := range want {
		h := have[name]
		if h.version != "" && h.sum == w.sum {
			continue
		}
		changes = append(changes, change{name: name, want: &w, have: h, lose: loses(h, &w)})
	}
	for name, h := range have {
		if _, ok := want[name]; !ok && h.version != "" {
			changes = append(changes, change{name: name, have: h, lose: true})
		}
	}
	sort.Slice(changes, func(i, j int) bool {
		a, b := changes[i], changes[j]
		if a.lose != b.lose {
			return !a.lose
		}
		if (a.want == nil) != (b.want == nil) {
			return a.want != nil
		}
		return partIndex(a.name, cluster) < partIndex(b.name, cluster) // head first
	})
	var errs []error
	for _, c := range changes {
		if c.lose && len(errs) > 0 {
			break
		}
		var (
			nv  Version
			err error
		)
		if c.want == nil {
			err = k.calls.del(ctx, c.name, c.have.version)
		} else {
			nv, err = k.calls.put(ctx, c.name, c.want.st, c.have.version)
		}
		switch {
		case errors.Is(err, ErrConflict):
			return true, nil
		case err != nil:
			errs = append(errs, fmt.Errorf("record %s: %w", c.name, err))
			continue
		}
		k.mu.Lock()
		if c.want == nil {
			delete(e.objs, c.name)
		} else {
			o := *c.want
			o.version = nv
			e.objs[c.name] = o
		}
		k.mu.Unlock()
	}
	return false, errors.Join(errs...)
}

// resolve reads a cluster's records and merges them into memory: after a
// conflicting write (conflict: fenced if a newer term exists, otherwise the
// records were changed by an older writer), or before the first write of a
// cluster never read (sharded: of each term this replica writes it in).
func (k *Keeper) resolve(ctx context.Context, cluster string, conflict bool) error {
	term, _, notWriter := k.stamp(cluster)
	if conflict {
		if err := k.checkWriter(ctx, cluster); err != nil {
			return err
		}
	}
	raw, err := k.calls.list(ctx, cluster)
	if err != nil {
		return err
	}
	recs := decodeRecords(raw)
	// Sharded, a replica that is not the member's writer reads records of
	// newer terms as a matter of course.
	writes := k.owners == nil || notWriter == nil
	if !conflict && writes && newerTerm(recs, term) {
		// Written by a newer writer: the check fences this Keeper
		// (sharded: for this member).
		if err := k.checkWriter(ctx, cluster); err != nil {
			return err
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	e := k.entryLocked(cluster)
	// Sharded: another replica wrote the member since this one last read
	// or wrote it as its writer. What this one changed and did not write
	// was fenced then, and is older than what the other wrote: the
	// records replace it (a merge would keep this one's engine snapshot).
	overtaken := k.owners != nil && !conflict && e.known && (notWriter != nil || e.actedIn != term) && newerTerm(recs, e.actedIn)
	// Sharded: another replica held the member between this one's last
	// term and this one (a take is one term up: more than one means a
	// writer in between), whether it wrote records or not. What this one
	// did not write is older than what that one knew.
	heldBetween := k.owners != nil && !conflict && notWriter == nil && e.known && e.actedIn != 0 && term > e.actedIn+1
	overtaken = overtaken || (heldBetween && len(recs) > 0)
	if k.owners != nil && notWriter == nil {
		e.actedIn = term // read as the member's writer in this term
	}
	if heldBetween && len(recs) == 0 {
		if e.dirty {
			k.log.Info("another replica wrote this member since and saved nothing; dropping the changes this one did not write", "cluster", cluster, "term", term)
		}
		e.mem, e.objs = newState(), map[string]object{}
		e.ledger++
		return nil
	}
	if e.known && len(recs) == 0 {
		// Every record is gone (deleted by hand: no writer of an older
		// term deletes records it did not forget). Merging with nothing
		// would drop every item this Keeper knew; memory is the record
		// now, and is written afresh.
		e.objs = map[string]object{}
		k.conflicts++
		k.log.Info("state record was deleted outside leafsync; rebuilding it from memory", "cluster", cluster, "items", e.mem.itemCount())
		return nil
	}
	// A record this Keeper wrote in its term that is gone was deleted by
	// hand (a newer writer would have fenced it; an older one conflicts):
	// its items are not executed, and memory writes it again.
	present := map[string]bool{}
	for _, r := range recs {
		present[r.name] = true
	}
	var lost []string
	for name, o := range e.objs {
		if !present[name] && o.version != "" && term != 0 && o.st.term == term {
			lost = append(lost, name)
			recs = append(recs, stored{name: name, st: o.st})
		}
	}
	if len(lost) > 0 {
		k.log.Info("state records were deleted outside leafsync; writing them again from memory", "cluster", cluster, "records", lost)
		k.changedLocked(cluster, e)
	}
	e.verifiedAt = k.opts.Clock.Now()
	theirs := assemble(cluster, recs)
	base := newState()
	if e.known {
		base = e.assembled(cluster)
	}
	switch {
	case e.gone:
	case overtaken:
		if e.dirty {
			k.log.Info("another replica wrote this member since; dropping the changes this one did not write", "cluster", cluster, "recordTerm", theirs.term)
		}
		e.mem = theirs.clone()
		e.ledger++
	default:
		e.mem = mergeStates(base, theirs, e.mem)
		e.ledger++
	}
	if claim := e.index(cluster, recs, term, k.log); claim && !conflict && k.owners != nil && notWriter == nil {
		k.changedLocked(cluster, e) // as absorbLocked claims
	}
	if conflict {
		k.conflicts++
		k.log.Info("state record changed by an older writer; merged it and writing again",
			"cluster", cluster, "recordTerm", theirs.term, "recordWriter", theirs.writer, "term", term)
	}
	return nil
}

func newerTerm(recs []stored, term uint64) bool {
	for _, r := range recs {
		if r.err == nil && r.st.term > term {
			return true
		}
	}
	return false
}

// assembled is the state of the records as last read or written.
func (rs *recordSet) assembled(cluster string) state {
	recs := make([]stored, 0, len(rs.objs))
	for name, o := range rs.objs {
		recs = append(recs, stored{name: name, st: o.st, version: o.version})
	}
	return assemble(cluster, recs)
}
