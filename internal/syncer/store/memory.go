package store

import (
	"context"
	"sort"
	"strconv"
	"sync"
)

// Memory is an in-process Store with the same conditional semantics as the
// real backends. Records are kept encoded, so callers never share memory
// with the store. State kept here is lost when the process ends: it is for
// tests, and for `store.backend: memory` when durability is not wanted.
type Memory struct {
	mu      sync.Mutex
	records map[string]memRecord
	next    int
	term    uint64
	puts    int
}

type memRecord struct {
	data    []byte
	version Version
}

// NewMemory returns an empty Memory store.
func NewMemory() *Memory { return &Memory{records: map[string]memRecord{}} }

// Backend implements Store.
func (m *Memory) Backend() string { return "memory" }

// Get implements Store.
func (m *Memory) Get(_ context.Context, cluster string) (ClusterState, Version, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.records[cluster]
	if !ok {
		return ClusterState{}, "", ErrNotFound
	}
	st, err := Decode(r.data)
	return st, r.version, err
}

// Put implements Store.
func (m *Memory) Put(_ context.Context, cluster string, st ClusterState, v Version) (Version, error) {
	data, _, err := Encode(st)
	if err != nil {
		return "", err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.records[cluster].version != v {
		return "", ErrConflict
	}
	m.next++
	m.puts++
	nv := Version(strconv.Itoa(m.next))
	m.records[cluster] = memRecord{data: data, version: nv}
	return nv, nil
}

// Delete implements Store.
func (m *Memory) Delete(_ context.Context, cluster string, v Version) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.records[cluster]
	if !ok {
		return nil
	}
	if r.version != v {
		return ErrConflict
	}
	delete(m.records, cluster)
	return nil
}

// Scan implements Store.
func (m *Memory) Scan(context.Context) ([]Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Record, 0, len(m.records))
	for name, r := range m.records {
		st, err := Decode(r.data)
		out = append(out, Record{Name: name, Cluster: ClusterOf(name), State: st, Version: r.version, Err: err})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// List implements Store.
func (m *Memory) List(ctx context.Context, cluster string) ([]Record, error) {
	all, _ := m.Scan(ctx)
	var out []Record
	for _, r := range all {
		if RecordOf(r.Name, cluster) {
			out = append(out, r)
		}
	}
	return out, nil
}

// NextTerm implements Store.
func (m *Memory) NextTerm(context.Context) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.term++
	return m.term, nil
}

// Term implements Store.
func (m *Memory) Term(context.Context) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.term, nil
}

// Puts is the number of successful Puts so far (for tests and benchmarks).
func (m *Memory) Puts() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.puts
}
