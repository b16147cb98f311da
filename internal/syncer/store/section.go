package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sync"
)

// A member's state is made of sections, each declared, typed and merged by
// the package that owns it; the store knows none of their types. On the
// wire a section is one field of a record's JSON object (beside "term" and
// "writer"), named by its section.
//
//   - A Section is one value kept in the member's head record (the
//     engine's snapshot: internal/syncer/enginestate).
//   - A Ledger is a list of keyed items spread over the member's ledger
//     parts (pod sync's pending deletes: internal/syncer/podsync/deletes).
//
// Owners declare their sections once, at package level (NewSection,
// NewLedger); a field no declared section names is kept as it was read, in
// the head.

// Section is a value section: Name is its field, Merge its owner's
// three-way merge of two writers' versions (see mergeStates).
type Section[T any] struct {
	Name  string
	Merge func(base, theirs, mine T) T
}

// Ledger is a list section: Key names an item (one item per key), Equal
// and Clone compare and copy items, Merge is the owner's three-way merge of
// two writers' lists.
type Ledger[T any] struct {
	Name  string
	Key   func(T) string
	Equal func(a, b T) bool
	Clone func(T) T
	Merge func(base, theirs, mine []T) []T
}

var registry struct {
	sync.Mutex
	values  map[string]valueSection
	ledgers map[string]ledgerSection
}

// valueSection is what the store asks of a Section.
type valueSection interface {
	mergeRaw(base, theirs, mine json.RawMessage) (json.RawMessage, error)
}

// ledgerSection is what the store asks of a Ledger.
type ledgerSection interface {
	decode(raw json.RawMessage) (items, error)
}

// NewSection declares a value section; it panics if the name is taken.
func NewSection[T any](s Section[T]) *Section[T] {
	register(s.Name, &s, nil)
	return &s
}

// NewLedger declares a ledger section; it panics if the name is taken.
func NewLedger[T any](l Ledger[T]) *Ledger[T] {
	register(l.Name, nil, &l)
	return &l
}

func register(name string, v valueSection, l ledgerSection) {
	registry.Lock()
	defer registry.Unlock()
	if registry.values == nil {
		registry.values, registry.ledgers = map[string]valueSection{}, map[string]ledgerSection{}
	}
	_, taken := registry.values[name]
	_, ledgerTaken := registry.ledgers[name]
	if name == "" || name == "term" || name == "writer" || taken || ledgerTaken {
		panic(fmt.Sprintf("store: section name %q is reserved or declared twice", name))
	}
	if v != nil {
		registry.values[name] = v
	} else {
		registry.ledgers[name] = l
	}
}

func ledgerOf(name string) ledgerSection {
	registry.Lock()
	defer registry.Unlock()
	return registry.ledgers[name]
}

func valueOf(name string) valueSection {
	registry.Lock()
	defer registry.Unlock()
	return registry.values[name]
}

// Get returns a cluster's value of the section in k's memory (the zero
// value if none).
func (s *Section[T]) Get(k *Keeper, cluster string) T {
	v, _ := s.decode(k.value(cluster, s.Name))
	return v
}

// Set changes a cluster's value of the section in k's memory; the Keeper
// writes it in the background. An error (a value that cannot be encoded)
// changes nothing.
func (s *Section[T]) Set(k *Keeper, cluster string, v T) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("section %s: %w", s.Name, err)
	}
	k.update(cluster, func(st *state) bool {
		st.values[s.Name] = raw
		return false
	})
	return nil
}

// Read returns the section's value in a record read from a store.
func (s *Section[T]) Read(st ClusterState) (T, error) { return s.decode(st.sections[s.Name]) }

// Write puts the section's value into a record.
func (s *Section[T]) Write(st *ClusterState, v T) error {
	raw, err := json.Marshal(v)
	st.set(s.Name, raw)
	return err
}

func (s *Section[T]) decode(raw json.RawMessage) (T, error) {
	var v T
	if empty(raw) {
		return v, nil
	}
	err := json.Unmarshal(raw, &v)
	return v, err
}

func (s *Section[T]) mergeRaw(base, theirs, mine json.RawMessage) (json.RawMessage, error) {
	var b, t, m T
	for _, x := range []struct {
		raw json.RawMessage
		v   *T
	}{{base, &b}, {theirs, &t}, {mine, &m}} {
		v, err := s.decode(x.raw)
		if err != nil {
			return nil, fmt.Errorf("section %s: %w", s.Name, err)
		}
		*x.v = v
	}
	return json.Marshal(s.Merge(b, t, m))
}

// Items returns a copy of a cluster's items of the ledger in k's memory.
func (l *Ledger[T]) Items(k *Keeper, cluster string) []T {
	if x, ok := k.ledger(cluster, l.Name).(ledgerItems[T]); ok {
		return x.clone().(ledgerItems[T]).v
	}
	return nil
}

// Update changes a cluster's items of the ledger in k's memory (fn gets a
// copy); the Keeper writes them in the background.
func (l *Ledger[T]) Update(k *Keeper, cluster string, fn func([]T) []T) {
	k.update(cluster, func(st *state) bool {
		cur, _ := st.ledgers[l.Name].(ledgerItems[T])
		cur.l = l
		next := ledgerItems[T]{l: l, v: fn(cur.clone().(ledgerItems[T]).v)}
		if len(next.v) == 0 {
			delete(st.ledgers, l.Name)
		} else {
			st.ledgers[l.Name] = next
		}
		return !cur.equal(next)
	})
}

// Read returns the ledger's items in a record read from a store (or
// assembled by ReadCluster).
func (l *Ledger[T]) Read(st ClusterState) ([]T, error) {
	x, err := l.decode(st.sections[l.Name])
	if err != nil {
		return nil, err
	}
	return x.(ledgerItems[T]).v, nil
}

// Write puts the ledger's items into a record.
func (l *Ledger[T]) Write(st *ClusterState, v []T) error {
	raw, err := ledgerItems[T]{l: l, v: v}.encode()
	st.set(l.Name, raw)
	return err
}

func (l *Ledger[T]) decode(raw json.RawMessage) (items, error) {
	x := ledgerItems[T]{l: l}
	if empty(raw) {
		return x, nil
	}
	// raw is one value, as the record's decoder cut it out: a Decoder
	// decodes it without json.Unmarshal's extra scan.
	if err := json.NewDecoder(bytes.NewReader(raw)).Decode(&x.v); err != nil {
		return nil, fmt.Errorf("section %s: %w", l.Name, err)
	}
	return x, nil
}

// items is a ledger's list in memory: its owner's []T behind the few
// questions the store asks of it.
type items interface {
	len() int
	keys() []string
	encode() (json.RawMessage, error)
	// split spreads the items over n buckets (n a power of two) by the
	// hash of their key.
	split(n int) []items
	// union is these items, then those of other whose key they lack.
	union(other items) items
	equal(other items) bool
	clone() items
	// merge is the owner's merge, with these items as mine.
	merge(base, theirs items) items
	// none is an empty list of the same ledger.
	none() items
}

type ledgerItems[T any] struct {
	l *Ledger[T]
	v []T
}

func (x ledgerItems[T]) len() int { return len(x.v) }

func (x ledgerItems[T]) keys() []string {
	out := make([]string, len(x.v))
	for i, it := range x.v {
		out[i] = x.l.Key(it)
	}
	return out
}

func (x ledgerItems[T]) encode() (json.RawMessage, error) { return json.Marshal(x.v) }

func (x ledgerItems[T]) split(n int) []items {
	buckets := make([][]T, n)
	for _, it := range x.v {
		h := fnv.New32a()
		h.Write([]byte(x.l.Key(it)))
		i := int(h.Sum32() & uint32(n-1))
		buckets[i] = append(buckets[i], it)
	}
	out := make([]items, n)
	for i, b := range buckets {
		if len(b) > 0 {
			out[i] = ledgerItems[T]{l: x.l, v: b}
		}
	}
	return out
}

func (x ledgerItems[T]) union(other items) items {
	y, _ := other.(ledgerItems[T])
	seen := make(map[string]bool, len(x.v))
	out := ledgerItems[T]{l: x.l, v: append([]T(nil), x.v...)}
	for _, it := range x.v {
		seen[x.l.Key(it)] = true
	}
	for _, it := range y.v {
		if k := x.l.Key(it); !seen[k] {
			seen[k] = true
			out.v = append(out.v, it)
		}
	}
	return out
}

func (x ledgerItems[T]) equal(other items) bool {
	y, _ := other.(ledgerItems[T])
	if len(x.v) != len(y.v) {
		return false
	}
	for i := range x.v {
		if !x.l.Equal(x.v[i], y.v[i]) {
			return false
		}
	}
	return true
}

func (x ledgerItems[T]) clone() items {
	if x.v == nil {
		return x
	}
	out := ledgerItems[T]{l: x.l, v: make([]T, len(x.v))}
	for i, it := range x.v {
		out.v[i] = x.l.Clone(it)
	}
	return out
}

func (x ledgerItems[T]) merge(base, theirs items) items {
	b, _ := base.(ledgerItems[T])
	t, _ := theirs.(ledgerItems[T])
	return ledgerItems[T]{l: x.l, v: x.l.Merge(b.v, t.v, x.v)}
}

func (x ledgerItems[T]) none() items { return ledgerItems[T]{l: x.l} }

// set puts a section's encoding into a record (nothing for an encoding
// that failed).
func (st *ClusterState) set(name string, raw json.RawMessage) {
	if raw == nil {
		return
	}
	if st.sections == nil {
		st.sections = map[string]json.RawMessage{}
	}
	st.sections[name] = raw
}

func empty(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }
