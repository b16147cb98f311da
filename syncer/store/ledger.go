package store

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"strings"

	"github.com/leafsync/leafsync/syncer/podsync/deletes"
)

// A member's state is kept in several records, so that no ledger of pending
// deletes, however long, fills the record that holds its hysteresis
// snapshot:
//
//	<cluster>            head: the hysteresis snapshot (and, as written
//	                     before ledger parts existed, the deletes too)
//	<cluster>.ledger-<i> part i of n (i = 1..n): the pending deletes whose
//	                     key hashes to i-1 modulo n
//
// n is a power of two, as small as lets every part fit MaxRecordBytes
// encoded, so doubling n splits each part in two. A cluster name is a
// DNS-1123 label (no dot), so no part can be taken for a cluster.
const partSep = ".ledger-"

// maxParts bounds a ledger's parts (about 14,000 deletes each).
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

// Assemble joins a cluster's records (its head and its ledger parts, in any
// order) into its state: the head's snapshot, term and writer, and every
// pending delete once. A record that cannot be decoded contributes nothing.
func Assemble(cluster string, recs []Record) ClusterState {
	var out ClusterState
	seen := map[string]bool{}
	add := func(ds []deletes.PendingDelete) {
		for _, d := range ds {
			if k := deleteKey(d); !seen[k] {
				seen[k] = true
				out.Deletes = append(out.Deletes, d)
			}
		}
	}
	sorted := append([]Record(nil), recs...)
	sort.SliceStable(sorted, func(i, j int) bool { return partIndex(sorted[i].Name, cluster) < partIndex(sorted[j].Name, cluster) })
	for _, r := range sorted {
		if r.Err != nil {
			continue
		}
		if r.Name == cluster {
			out.Hysteresis = append(json.RawMessage(nil), r.State.Hysteresis...)
			out.Term, out.Writer = r.State.Term, r.State.Writer
		}
		add(r.State.Deletes)
	}
	return clone(out)
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
	return Assemble(cluster, recs), nil
}

// partIndex orders a cluster's records: the head first, then parts by index.
func partIndex(name, cluster string) int {
	i, err := strconv.Atoi(strings.TrimPrefix(name, cluster+partSep))
	if name == cluster || err != nil {
		return 0
	}
	return i
}

func deleteKey(d deletes.PendingDelete) string {
	return d.Namespace + "/" + d.Name + "/" + d.HostUID
}

// object is one record as the Keeper wants it written, or as it was last
// read or written.
type object struct {
	st      ClusterState
	sum     [sha256.Size]byte // of the JSON encoding: tells a change apart
	version Version           // "" for a record not in the store
	size    int               // encoded (a ledger part laid out here)
}

func summed(st ClusterState) (object, int, error) {
	data, err := json.Marshal(st)
	if err != nil {
		return object{}, 0, err
	}
	return object{st: st, sum: sha256.Sum256(data)}, len(data), nil
}

// ledgerLayout is the last layout of a ledger, kept so that the next one
// encodes only the parts whose deletes changed.
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
// high for ever; a part whose deletes are those of last's is not encoded
// again.
func layout(cluster string, st ClusterState, prev int, last *ledgerLayout, unchanged bool) (map[string]object, int, error) {
	out := map[string]object{}
	head, _, err := summed(ClusterState{Hysteresis: st.Hysteresis, Term: st.Term, Writer: st.Writer})
	if err != nil {
		return nil, 0, err
	}
	out[cluster] = head
	if len(st.Deletes) == 0 {
		return out, 0, nil
	}
	var reuse map[string]object
	if last != nil && last.term == st.Term {
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

// splitParts spreads the deletes over n parts by the hash of their key and
// encodes each (ErrTooLarge if one does not fit), but for a part of reuse
// with the same deletes; total is the sum of their encoded sizes.
func splitParts(cluster string, st ClusterState, n int, reuse map[string]object) (map[string]object, int, error) {
	buckets := make([][]deletes.PendingDelete, n)
	for _, d := range st.Deletes {
		h := fnv.New32a()
		h.Write([]byte(deleteKey(d)))
		i := int(h.Sum32() & uint32(n-1))
		buckets[i] = append(buckets[i], d)
	}
	out, total := map[string]object{}, 0
	for i, ds := range buckets {
		if len(ds) == 0 {
			continue
		}
		name := PartName(cluster, i+1)
		if o, ok := reuse[name]; ok && o.st.Writer == st.Writer && sameDeletes(o.st.Deletes, ds) {
			out[name] = o
			total += o.size
			continue
		}
		part := ClusterState{Deletes: ds, Term: st.Term, Writer: st.Writer}
		data, _, err := Encode(part)
		if err != nil {
			return nil, 0, fmt.Errorf("ledger part %d of %d: %w", i+1, n, err)
		}
		o, _, err := summed(part)
		if err != nil {
			return nil, 0, err
		}
		o.size = len(data)
		total += o.size
		out[name] = o
	}
	return out, total, nil
}

// loses reports whether writing want over have drops a delete have holds
// (or, for want nil, removes the record): such writes wait until every
// write that adds deletes has succeeded, so a delete moved from one part to
// another is never missing from the store in between.
func loses(have object, want *object) bool {
	if len(have.st.Deletes) == 0 {
		return false
	}
	if want == nil {
		return true
	}
	keep := make(map[string]bool, len(want.st.Deletes))
	for _, d := range want.st.Deletes {
		keep[deleteKey(d)] = true
	}
	for _, d := range have.st.Deletes {
		if !keep[deleteKey(d)] {
			return true
		}
	}
	return false
}
