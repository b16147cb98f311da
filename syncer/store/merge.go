package store

// mergeStates is the three-way merge used when a record was changed by an
// older writer (a previous leader still finishing, or a write of ours whose
// reply was lost) since this Keeper last read or wrote it:
//
//   - base is the record as this Keeper last knew it (empty if never read);
//   - theirs is the record as it is now in the store;
//   - mine is this Keeper's memory.
//
// The hysteresis snapshot is mine: the engine of the current leader is the
// one deciding, and its state was restored from the store before its first
// probe. Theirs is kept only if this Keeper has none yet.
//
// Pending deletes are merged one by one (keyed by namespace, name and host
// UID): what the other writer added or changed is taken, what it removed
// (executed) is dropped, unless this Keeper changed that same delete too, in
// which case this Keeper's version wins. So an owed delete recorded by the
// previous leader in its last moments is never lost.
func mergeStates(base, theirs, mine ClusterState) ClusterState {
	out := clone(mine)
	if len(out.Hysteresis) == 0 && len(theirs.Hysteresis) > 0 {
		out.Hysteresis = append([]byte(nil), theirs.Hysteresis...)
	}
	out.Deletes = mergeDeletes(base.Deletes, theirs.Deletes, mine.Deletes)
	return clone(out)
}

type deleteKey struct{ namespace, name, hostUID string }

func keyOf(d PendingDelete) deleteKey { return deleteKey{d.Namespace, d.Name, d.HostUID} }

func mergeDeletes(base, theirs, mine []PendingDelete) []PendingDelete {
	index := func(ds []PendingDelete) map[deleteKey]PendingDelete {
		m := make(map[deleteKey]PendingDelete, len(ds))
		for _, d := range ds {
			m[keyOf(d)] = d
		}
		return m
	}
	b, t, m := index(base), index(theirs), index(mine)
	// pick returns the merged delete for a key, or false if it goes.
	pick := func(k deleteKey) (PendingDelete, bool) {
		bd, inB := b[k]
		md, inM := m[k]
		td, inT := t[k]
		if inM == inB && (!inM || equalDelete(md, bd)) {
			return td, inT // unchanged here: theirs decides
		}
		return md, inM // changed here: mine wins
	}
	var out []PendingDelete
	seen := map[deleteKey]bool{}
	for _, list := range [][]PendingDelete{mine, theirs} {
		for _, d := range list {
			k := keyOf(d)
			if seen[k] {
				continue
			}
			seen[k] = true
			if v, ok := pick(k); ok {
				out = append(out, v)
			}
		}
	}
	return out
}

func equalDelete(x, y PendingDelete) bool {
	if x.Kind != y.Kind || x.Namespace != y.Namespace || x.Name != y.Name || x.HostUID != y.HostUID ||
		x.Cause != y.Cause || x.Owner != y.Owner || !x.Since.Equal(y.Since) ||
		!x.HostDeletedAt.Equal(y.HostDeletedAt) || x.Replacement != y.Replacement {
		return false
	}
	if (x.GracePeriodSeconds == nil) != (y.GracePeriodSeconds == nil) {
		return false
	}
	return x.GracePeriodSeconds == nil || *x.GracePeriodSeconds == *y.GracePeriodSeconds
}
