package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
)

// state is a member's state (or one of its records) as the Keeper holds
// it: value sections encoded, ledger sections as their owners' items.
type state struct {
	values  map[string]json.RawMessage
	ledgers map[string]items
	term    uint64
	writer  string
}

func newState() state {
	return state{values: map[string]json.RawMessage{}, ledgers: map[string]items{}}
}

// decodeState reads a record: a field a declared Ledger names becomes its
// items, any other field a value kept as read. Errors wrap ErrCorrupt.
func decodeState(cs ClusterState) (state, error) {
	st := newState()
	st.term, st.writer = cs.Term, cs.Writer
	for name, raw := range cs.sections {
		l := ledgerOf(name)
		if l == nil {
			st.values[name] = bytes.Clone(raw)
			continue
		}
		x, err := l.decode(raw)
		if err != nil {
			return newState(), fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		if x.len() > 0 {
			st.ledgers[name] = x
		}
	}
	return st, nil
}

// encode is the record of st.
func (st state) encode() (ClusterState, error) {
	cs := ClusterState{sections: make(map[string]json.RawMessage, len(st.values)+len(st.ledgers)), Term: st.term, Writer: st.writer}
	for name, raw := range st.values {
		cs.sections[name] = raw
	}
	for name, x := range st.ledgers {
		raw, err := x.encode()
		if err != nil {
			return ClusterState{}, fmt.Errorf("section %s: %w", name, err)
		}
		cs.sections[name] = raw
	}
	return cs, nil
}

func (st state) clone() state {
	out := newState()
	out.term, out.writer = st.term, st.writer
	for name, raw := range st.values {
		if !empty(raw) {
			out.values[name] = bytes.Clone(raw)
		}
	}
	for name, x := range st.ledgers {
		out.ledgers[name] = x.clone()
	}
	return out
}

// head is the part of st kept in the head record: the value sections.
func (st state) head() state {
	out := newState()
	out.term, out.writer = st.term, st.writer
	maps.Copy(out.values, st.values)
	return out
}

// itemCount is the number of ledger items of st.
func (st state) itemCount() int {
	n := 0
	for _, x := range st.ledgers {
		n += x.len()
	}
	return n
}

// sameLedgers reports whether two states hold the same ledger items, in
// the same order.
func sameLedgers(a, b map[string]items) bool {
	if len(a) != len(b) {
		return false
	}
	for name, x := range a {
		y, ok := b[name]
		if !ok || !x.equal(y) {
			return false
		}
	}
	return true
}
