package store

import (
	"context"
	"encoding/json"
	"sort"
	"strconv"
	"sync"
)

// Memory is an in-process Store with the same conditional semantics as the
// real backends. Records are kept encoded, so callers never share memory
// with the store.
type Memory struct {
	mu      sync.Mutex
	records map[string]memRecord
	next    int
}

type memRecord struct {
	data    []byte
	version Version
}

// NewMemory returns an empty Memory store.
func NewMemory() *Memory { return &Memory{records: map[string]memRecord{}} }

// Get implements Store.
func (m *Memory) Get(_ context.Context, cluster string) (ClusterState, Version, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.records[cluster]
	if !ok {
		return ClusterState{}, "", ErrNotFound
	}
	var st ClusterState
	err := json.Unmarshal(r.data, &st)
	return st, r.version, err
}

// Put implements Store.
func (m *Memory) Put(_ context.Context, cluster string, st ClusterState, v Version) (Version, error) {
	data, err := json.Marshal(st)
	if err != nil {
		return "", err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.records[cluster].version != v {
		return "", ErrConflict
	}
	m.next++
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

// List implements Store.
func (m *Memory) List(context.Context) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.records))
	for name := range m.records {
		out = append(out, name)
	}
	sort.Strings(out)
	return out, nil
}
