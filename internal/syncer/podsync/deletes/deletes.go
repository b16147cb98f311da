// Package deletes is pod sync's record of the downstream pod deletes that
// wait — owed, deferred or retained — as kept in a member's state (the
// store section Pending), and the rule for merging two writers' versions
// of it.
package deletes

import (
	"time"

	"github.com/leafsync/leafsync/internal/syncer/store"
)

// Pending is the pending deletes of a member in the state store: a ledger
// section ("deletes" in its records) with one item per namespace, name and
// host UID, spread over the member's ledger parts, merged by Merge.
var Pending = store.NewLedger(store.Ledger[PendingDelete]{
	Name:  "deletes",
	Key:   func(d PendingDelete) string { return d.Namespace + "/" + d.Name + "/" + d.HostUID },
	Equal: equal,
	Clone: cloneOne,
	Merge: Merge,
})

// DeleteKind says why a downstream delete waits.
type DeleteKind string

const (
	// Owed: the host deleted the pod while the member was confirmed down;
	// the member pod is deleted when the member is reachable, per policy.
	Owed DeleteKind = "Owed"
	// Deferred: a stale eviction; the member pod is kept until the host's
	// replacement is Ready (or MaxDeferral passes).
	Deferred DeleteKind = "Deferred"
	// Retained: a stale eviction under the Retain policy; the member pod
	// is kept and reported as an orphan.
	Retained DeleteKind = "Retained"
)

// PendingDelete is one member pod whose deletion waits.
type PendingDelete struct {
	Kind      DeleteKind `json:"kind"`
	Namespace string     `json:"namespace"`
	Name      string     `json:"name"`
	// HostUID is the UID of the host pod that was deleted; the member pod
	// carries it in a label, so a recreated host pod (new UID) is told apart.
	HostUID string `json:"hostUID"`
	// Cause is the DisruptionTarget reason of the host deletion ("" for a
	// plain DELETE).
	Cause string `json:"cause,omitempty"`
	// Owner is the host pod's controller (Kind/name), to find its replacement.
	Owner string `json:"owner,omitempty"`
	// Since is when the delete was recorded; MaxDeferral counts from it.
	Since time.Time `json:"since"`
	// HostDeletedAt is when the host pod began terminating (its deletion
	// timestamp minus its grace period); the owner's replacements are the
	// pods it created from then on.
	HostDeletedAt time.Time `json:"hostDeletedAt,omitempty"`
	// Replacement is the UID of the host pod assigned as this delete's
	// replacement (DeferUntilReplaced): the member pod goes once that pod
	// is Ready. One replacement is never assigned to two deletes.
	Replacement string `json:"replacement,omitempty"`
	// GracePeriodSeconds is the grace period to forward.
	GracePeriodSeconds *int64 `json:"gracePeriodSeconds,omitempty"`
}

// clone returns a deep copy of ds (nil stays nil).
func clone(ds []PendingDelete) []PendingDelete {
	if ds == nil {
		return nil
	}
	out := make([]PendingDelete, len(ds))
	for i, d := range ds {
		out[i] = cloneOne(d)
	}
	return out
}

func cloneOne(d PendingDelete) PendingDelete {
	if d.GracePeriodSeconds != nil {
		g := *d.GracePeriodSeconds
		d.GracePeriodSeconds = &g
	}
	return d
}

type key struct{ namespace, name, hostUID string }

func keyOf(d PendingDelete) key { return key{d.Namespace, d.Name, d.HostUID} }

// Merge is the three-way merge of pending deletes when a record was changed
// by an older writer (a previous leader still finishing, or a write whose
// reply was lost) since this writer last read or wrote it: base is the
// record's list as this writer last knew it, theirs the list in the store
// now, mine this writer's memory.
//
// Deletes are merged one by one (keyed by namespace, name and host UID):
// what the other writer added or changed is taken, what it removed
// (executed) is dropped, unless this writer changed that same delete too, in
// which case mine wins. So an owed delete recorded by the previous leader in
// its last moments is never lost. Mine come first, in their order, then the
// ones only theirs has.
func Merge(base, theirs, mine []PendingDelete) []PendingDelete {
	index := func(ds []PendingDelete) map[key]PendingDelete {
		m := make(map[key]PendingDelete, len(ds))
		for _, d := range ds {
			m[keyOf(d)] = d
		}
		return m
	}
	b, t, m := index(base), index(theirs), index(mine)
	// pick returns the merged delete for a key, or false if it goes.
	pick := func(k key) (PendingDelete, bool) {
		bd, inB := b[k]
		md, inM := m[k]
		td, inT := t[k]
		if inM == inB && (!inM || equal(md, bd)) {
			return td, inT // unchanged here: theirs decides
		}
		return md, inM // changed here: mine wins
	}
	var out []PendingDelete
	seen := map[key]bool{}
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
	return clone(out)
}

func equal(x, y PendingDelete) bool {
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
