// Package store keeps the state of leafsync that must survive a restart or a
// change of leader: each member's hysteresis snapshot (clocks, streaks, flap
// penalty, availability window) and the downstream pod deletes leafsync owes
// or defers.
//
// State is kept per member cluster, so that a large fleet never builds one
// large object: a head record holds the member's hysteresis snapshot, and
// its ledger of pending deletes is spread over as many ledger parts as it
// needs (ledger.go), so a long ledger never stops the snapshot from being
// saved. Every write is conditional on the version read (a resourceVersion,
// an etcd mod revision): a replica that lost the lead gets ErrConflict and
// never silently overwrites its successor.
//
// Two parts:
//   - Store: a backend (Memory here; kubestore and etcdstore in
//     sub-packages). Get/Put/Delete of one record by name, List of a
//     cluster's records, Scan of all, plus a writer term.
//   - Keeper: the one writer per process. Components change state in memory
//     and read it through their sections; the Keeper writes in the
//     background, coalescing, retrying with backoff, fenced by its term
//     (sharded across replicas: by each member's writer term, Owners).
//
// What goes into a record is decided by its owners, each declaring its
// section (section.go) with its type and merge: internal/syncer/enginestate the
// engine's snapshot, pod sync its pending deletes (internal/syncer/podsync/deletes).
// The store imports none of them.
//
// See docs/state-store.md.
package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
)

// ErrConflict: the record changed since it was read (another writer).
var ErrConflict = errors.New("store: conflicting write: the record changed since it was read")

// ErrNotFound: no record for the cluster.
var ErrNotFound = errors.New("store: no record")

// ErrUnavailable wraps errors that say the backend could not be reached or
// did not answer in time (retried with backoff).
var ErrUnavailable = errors.New("store: unavailable")

// ErrTooLarge: a record does not fit the backend's object size limit, even
// compressed.
var ErrTooLarge = errors.New("store: record too large")

// ErrCorrupt: a record exists but cannot be decoded. Get returns it with
// the record's version, so that the Keeper can replace the record.
var ErrCorrupt = errors.New("store: record cannot be decoded")

// ErrFenced: a newer writer (a later leader) took over; this process no
// longer writes.
var ErrFenced = errors.New("store: fenced: a newer leafsync writer took over")

// Version identifies what a writer read; "" means "no record yet".
type Version string

// ClusterState is one record as stored, or a member's records assembled
// (ReadCluster): its sections by name, each its owner's JSON (see Section
// and Ledger), and who wrote it. On the wire it is one JSON object: every
// section a field beside "term" and "writer".
type ClusterState struct {
	sections map[string]json.RawMessage
	// Term and Writer say who wrote the record (set by the Keeper on
	// every write; ignored when comparing states).
	Term   uint64
	Writer string
}

// MarshalJSON writes the sections (by name, empty ones left out), then
// term and writer.
func (st ClusterState) MarshalJSON() ([]byte, error) {
	names := make([]string, 0, len(st.sections))
	for name, raw := range st.sections {
		if !empty(raw) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var buf bytes.Buffer
	buf.WriteByte('{')
	// json.Marshal checks the whole object once; a section is written as
	// it is.
	field := func(name string, data []byte) {
		if buf.Len() > 1 {
			buf.WriteByte(',')
		}
		k, _ := json.Marshal(name)
		buf.Write(k)
		buf.WriteByte(':')
		buf.Write(data)
	}
	for _, name := range names {
		field(name, st.sections[name])
	}
	if st.Term != 0 {
		field("term", strconv.AppendUint(nil, st.Term, 10))
	}
	if st.Writer != "" {
		w, _ := json.Marshal(st.Writer)
		field("writer", w)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// UnmarshalJSON reads what MarshalJSON wrote: every field but term and
// writer is a section.
func (st *ClusterState) UnmarshalJSON(data []byte) error {
	// One pass over the record with a streaming decoder: json.Unmarshal
	// into a map would scan a ledger part of thousands of items twice more
	// before its owner decodes it.
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return fmt.Errorf("a record is a JSON object: %s", firstBytes(data))
	}
	*st = ClusterState{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		name, _ := t.(string)
		switch name {
		case "term":
			err = dec.Decode(&st.Term)
		case "writer":
			err = dec.Decode(&st.Writer)
		default:
			var raw json.RawMessage
			if err = dec.Decode(&raw); err == nil && !empty(raw) {
				if st.sections == nil {
					st.sections = map[string]json.RawMessage{}
				}
				st.sections[name] = raw
			}
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("data after the record: %s", firstBytes(data))
	}
	return nil
}

// firstBytes is the start of a bad record, for an error message.
func firstBytes(data []byte) string {
	if len(data) > 40 {
		return string(data[:40]) + "…"
	}
	return string(data)
}

// Record is one record as read from a backend.
type Record struct {
	// Name is the record's name: the cluster for its head record, or a
	// ledger part's name (PartName).
	Name    string
	Cluster string
	State   ClusterState
	Version Version
	// Err is set (wrapping ErrCorrupt) for a record that cannot be
	// decoded; State is then empty.
	Err error
}

// Store is a backend: memory (tests), kube (host objects, default), etcd.
// Records are named: a cluster's head record by the cluster's name, its
// ledger parts by PartName. Implementations are safe for concurrent use.
type Store interface {
	// Get returns a record and its version, or ErrNotFound. A record that
	// cannot be decoded gives ErrCorrupt and its version.
	Get(ctx context.Context, name string) (ClusterState, Version, error)
	// Put writes a record if its version is still v ("" to create) and
	// returns the new version, or ErrConflict.
	Put(ctx context.Context, name string, st ClusterState, v Version) (Version, error)
	// Delete removes a record if its version is still v (ErrConflict
	// otherwise). A record already gone is not an error.
	Delete(ctx context.Context, name string, v Version) error
	// List returns every record of one cluster (its head and its ledger
	// parts, none if it has no record), in one read.
	List(ctx context.Context, cluster string) ([]Record, error)
	// Scan returns every record (what a new leader loads once). A record
	// that cannot be decoded is returned with Err set, not as an error.
	Scan(ctx context.Context) ([]Record, error)
	// NextTerm starts a new writer term: it atomically makes the store's
	// term greater than any term handed out before, and returns it.
	NextTerm(ctx context.Context) (uint64, error)
	// Term returns the store's current term (0 if none was ever taken).
	Term(ctx context.Context) (uint64, error)
	// Backend names the backend ("memory", "kube", "etcd").
	Backend() string
}

// Reason classifies a store error for metrics: "conflict", "unavailable",
// "fenced", "too_large" or "other".
func Reason(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrConflict):
		return "conflict"
	case errors.Is(err, ErrFenced):
		return "fenced"
	case errors.Is(err, ErrTooLarge):
		return "too_large"
	case errors.Is(err, ErrUnavailable), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return "unavailable"
	default:
		return "other"
	}
}
