package store

import "bytes"

// mergeStates merges a member's records changed by an older writer since
// this Keeper last knew them (base) with the store's version (theirs) and
// memory (mine), section by section, each by its owner's Merge. A value
// section no package declared keeps mine, or theirs if mine has none.
func mergeStates(base, theirs, mine state) state {
	out := mine.clone()
	values := map[string]bool{}
	for _, side := range []state{mine, theirs} {
		for name := range side.values {
			values[name] = true
		}
	}
	for name := range values {
		m, t := mine.values[name], theirs.values[name]
		switch v := valueOf(name); {
		case v != nil:
			if merged, err := v.mergeRaw(base.values[name], t, m); err == nil {
				out.values[name] = merged
			}
		case empty(m):
			out.values[name] = bytes.Clone(t)
		}
		if empty(out.values[name]) {
			delete(out.values, name)
		}
	}
	ledgers := map[string]items{} // one list of each ledger, for its type
	for _, side := range []state{base, theirs, mine} {
		for name, x := range side.ledgers {
			ledgers[name] = x
		}
	}
	for name, like := range ledgers {
		or := func(x items) items {
			if x == nil {
				return like.none()
			}
			return x
		}
		merged := or(mine.ledgers[name]).merge(or(base.ledgers[name]), or(theirs.ledgers[name]))
		if merged.len() > 0 {
			out.ledgers[name] = merged
		} else {
			delete(out.ledgers, name)
		}
	}
	return out
}
