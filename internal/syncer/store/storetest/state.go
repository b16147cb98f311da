package storetest

import (
	"bytes"
	"fmt"

	"github.com/leafsync/leafsync/internal/syncer/enginestate"
	"github.com/leafsync/leafsync/internal/syncer/podsync/deletes"
	"github.com/leafsync/leafsync/internal/syncer/store"
)

// State is a member's state as tests build and read it: its two sections
// today (the engine's snapshot, pod sync's pending deletes) and who wrote
// it.
type State struct {
	Hysteresis []byte
	Deletes    []deletes.PendingDelete
	Term       uint64
	Writer     string
}

// Record is st as a record to Put.
func Record(st State) store.ClusterState {
	cs := store.ClusterState{Term: st.Term, Writer: st.Writer}
	if len(st.Hysteresis) > 0 {
		if err := enginestate.Snapshot.Write(&cs, st.Hysteresis); err != nil {
			panic(err)
		}
	}
	if len(st.Deletes) > 0 {
		if err := deletes.Pending.Write(&cs, st.Deletes); err != nil {
			panic(err)
		}
	}
	return cs
}

// Read is the State of a record (or of a member's records assembled by
// store.ReadCluster).
func Read(cs store.ClusterState) (State, error) {
	snap, err := enginestate.Snapshot.Read(cs)
	if err != nil {
		return State{}, fmt.Errorf("snapshot: %w", err)
	}
	ds, err := deletes.Pending.Read(cs)
	if err != nil {
		return State{}, fmt.Errorf("deletes: %w", err)
	}
	return State{Hysteresis: snap, Deletes: ds, Term: cs.Term, Writer: cs.Writer}, nil
}

// Memory is a member's state in k's memory.
func Memory(k *store.Keeper, cluster string) State {
	return State{Hysteresis: enginestate.Snapshot.Get(k, cluster), Deletes: deletes.Pending.Items(k, cluster)}
}

// Update changes a member's state in k's memory, as its two owners would.
func Update(k *store.Keeper, cluster string, fn func(*State)) {
	st := Memory(k, cluster)
	snap := bytes.Clone(st.Hysteresis)
	fn(&st)
	if !bytes.Equal(snap, st.Hysteresis) {
		if err := enginestate.Snapshot.Set(k, cluster, st.Hysteresis); err != nil {
			panic(err)
		}
	}
	deletes.Pending.Update(k, cluster, func([]deletes.PendingDelete) []deletes.PendingDelete { return st.Deletes })
}
