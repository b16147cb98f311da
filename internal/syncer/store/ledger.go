package store

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// A member's state is kept in several records, so that no ledger (pending
// deletes), however long, fills the record that holds its value sections
// (the hysteresis snapshot):
//
//	<cluster>            head: the value sections (and, as written before
//	                     ledger parts existed, the ledgers too)
//	<cluster>.ledger-<i> part i of n (i = 1..n): the ledger items whose
//	                     key hashes to i-1 modulo n
//
// n is a power of two, as small as lets every part fit MaxRecordBytes
// encoded, so doubling n splits each part in two. A cluster name is a
// DNS-1123 label (no dot), so no part can be taken for a cluster.
const partSep = ".ledger-"

// maxParts bounds a ledger's parts (about 14,000 pending deletes each).
const maxParts = 1 << 12

// PartName is the record name of part i (1-based) of a cluster's ledger.
func PartName(cluster string, i int) string { return cluster + partSep + strconv.Itoa(i) }

// ClusterOf is the cluster a record name belongs to.
func ClusterOf(name string) string {
	if i := strings.IndexByte(name, '.'); i >= 0 {
		return name[:i]
	}
	return name
}

// RecordOf reports whether a record name is the cluster's head or one of
// its ledger parts.
func RecordOf(name, cluster string) bool {
	return name == cluster || strings.HasPrefix(name, cluster+partSep)
}

// stored is one record as read, decoded (err set, wrapping ErrCorrupt,
// for a record that cannot be).
type stored struct {
	name    string
	st      state
	version Version
	err     error
}

func decodeRecords(recs []Record) []stored {
	out := make([]stored, len(recs))
	for i, r := range recs {
		out[i] = stored{name: r.Name, version: r.Version, err: r.Err}
		if r.Err == nil {
			out[i].st, out[i].err = decodeState(r.State)
		}
	}
	return out
}

// assemble joins a cluster's records (its head and its ledger parts, in
// any order) into its state: the head's values, term and writer, and every
// ledger item once. A record that cannot be decoded contributes nothing.
func assemble(cluster string, recs []stored) state {
	out := newState()
	sorted := append([]stored(nil), recs...)
	sort.SliceStable(sorted, func(i, j int) bool { return partIndex(sorted[i].name, cluster) < partIndex(sorted[j].name, cluster) })
	for _, r := range sorted {
		if r.err != nil {
			continue
		}
		if r.name == cluster {
			out.values = r.st.clone().values
			out.term, out.writer = r.st.term, r.st.writer
		}
		for name, x := range r.st.ledgers {
			if have, ok := out.ledgers[name]; ok {
				out.ledgers[name] = have.union(x)
			} else {
				out.ledgers[name] = x.none().union(x)
			}
		}
	}
	return out.clone()
}

// ReadCluster reads a cluster's records and assembles them (ErrNotFound if
// it has none), for readers outside the Keeper (leafsync status, tests).
func ReadCluster(ctx context.Context, s Store, cluster string) (ClusterState, error) {
	recs, err := s.List(ctx, cluster)
	if err != nil {
		return ClusterState{}, err
	}
	if len(recs) == 0 {
		return ClusterState{}, ErrNotFound
	}
	return assemble(cluster, decodeRecords(recs)).encode()
}

// partIndex orders a cluster's records: the head first, then parts by index.
func partIndex(name, cluster string) int {
	i, err := strconv.Atoi(strings.TrimPrefix(name, cluster+partSep))
	if name == cluster || err != nil {
		return 0
	}
	return i
}

// object is one record as the Keeper wants it written, or as it was last
// read or written.
type object struct {
	st      state
	sum     [sha256.Size]byte // of the JSON encoding: tells a change apart
	version Version           // "" for a record not in the store
	size    int               // encoded (a ledger part laid out here)
}

func summed(st state) (object, error) {
	cs, err := st.encode()
	if err != nil {
		return object{}, err
	}
	data, err := cs.MarshalJSON()
	if err != nil {
		return object{}, err
	}
	return object{st: st, sum: sha256.Sum256(data)}, nil
}

// ledgerLayout is the last layout of a ledger, kept so that the next one
// encodes only the parts whose items changed.
type ledgerLayout struct {
	objs  map[string]object // the ledger parts (the head is laid out anew)
	parts int
	term  uint64
}

// layout is how a cluster's state is written: its head and its ledger
// parts by name, and the number of parts n. With unchanged, the parts are
// those of last (the same ledger, laid out before). Otherwise it starts
// from n = prev parts (the last layout), doubles n while a part is too
// large encoded, and halves it once while the whole ledger would fill fewer
// than a quarter of the parts, so that the count neither flaps nor stays
// high for ever; a part whose items are those of last's is not encoded
// again.
func layout(cluster string, st state, prev int, last *ledgerLayout, unchanged bool) (map[string]object, int, error) {
	out := map[string]object{}
	head, err := summed(st.head())
	if err != nil {
		return nil, 0, err
	}
	out[cluster] = head
	if st.itemCount() == 0 {
		return out, 0, nil
	}
	var reuse map[string]object
	if last != nil && last.term == st.term {
		if unchanged {
			for name, o := range last.objs {
				if name != cluster {
					out[name] = o
				}
			}
			return out, last.parts, nil
		}
		reuse = last.objs
	}
	n := max(prev, 1)
	for {
		parts, total, err := splitParts(cluster, st, n, reuse)
		switch {
		case err == nil && n > 1 && total < MaxRecordBytes*n/4:
			if smaller, _, err := splitParts(cluster, st, n/2, nil); err == nil {
				parts, n = smaller, n/2
			}
			fallthrough
		case err == nil:
			for name, o := range parts {
				out[name] = o
			}
			return out, n, nil
		case n >= maxParts:
			return nil, 0, err
		}
		n *= 2
	}
}

// splitParts spreads the ledger items over n parts by the hash of their
// key and encodes each (ErrTooLarge if one does not fit), but for a part of
// reuse with the same items; total is the sum of their encoded sizes.
func splitParts(cluster string, st state, n int, reuse map[string]object) (map[string]object, int, error) {
	parts := make([]state, n)
	for name, x := range st.ledgers {
		for i, bucket := range x.split(n) {
			if bucket == nil {
				continue
			}
			if parts[i].ledgers == nil {
				parts[i] = newState()
				parts[i].term, parts[i].writer = st.term, st.writer
			}
			parts[i].ledgers[name] = bucket
		}
	}
	out, total := map[string]object{}, 0
	for i, part := range parts {
		if part.ledgers == nil {
			continue
		}
		name := PartName(cluster, i+1)
		if o, ok := reuse[name]; ok && o.st.writer == st.writer && sameLedgers(o.st.ledgers, part.ledgers) {
			out[name] = o
			total += o.size
			continue
		}
		// One encoding serves the sum (as summed computes it) and the
		// size: a part of thousands of items is not encoded three times.
		cs, err := part.encode()
		if err != nil {
			return nil, 0, err
		}
		js, err := cs.MarshalJSON()
		if err != nil {
			return nil, 0, err
		}
		data, _, err := compress(js)
		if err != nil {
			return nil, 0, fmt.Errorf("ledger part %d of %d: %w", i+1, n, err)
		}
		o := object{st: part, sum: sha256.Sum256(js), size: len(data)}
		total += o.size
		out[name] = o
	}
	return out, total, nil
}

// loses reports whether writing want over have drops a ledger item have
// holds (or, for want nil, removes the record): such writes wait until
// every write that adds items has succeeded, so an item moved from one part
// to another is never missing from the store in between.
func loses(have object, want *object) bool {
	if have.st.itemCount() == 0 {
		return false
	}
	if want == nil {
		return true
	}
	for name, x := range have.st.ledgers {
		keep := map[string]bool{}
		if w := want.st.ledgers[name]; w != nil {
			for _, k := range w.keys() {
				keep[k] = true
			}
		}
		for _, k := range x.keys() {
			if !keep[k] {
				return true
			}
		}
	}
	return false
}
