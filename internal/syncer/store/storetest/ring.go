package storetest

import (
	"context"
	"fmt"
	"sync"

	"github.com/leafsync/leafsync/internal/syncer/store"
)

// Ring is a fake of the member Leases: who writes each member, in which
// term, as each replica has cached it and as a fresh read (Confirm) shows.
type Ring struct {
	mu     sync.Mutex
	holder map[string]string            // fresh: member → incarnation
	term   map[string]uint64            // fresh: member → writer term
	cached map[string]map[string]uint64 // replica → member → term it holds, as cached
}

// NewRing returns a Ring where no member has a writer yet.
func NewRing() *Ring {
	return &Ring{holder: map[string]string{}, term: map[string]uint64{}, cached: map[string]map[string]uint64{}}
}

// Take makes replica the member's writer in a new term; seen lists the
// replicas whose caches see it at once (the others keep their view).
func (r *Ring) Take(member, replica string, seen ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.term[member]++
	r.holder[member] = replica
	for _, s := range append(seen, replica) {
		if r.cached[s] == nil {
			r.cached[s] = map[string]uint64{}
		}
		delete(r.cached[s], member)
		if s == replica {
			r.cached[s][member] = r.term[member]
		}
	}
}

// Owners is replica's view, as a Keeper's KeeperOptions.Owners (the
// replica's name is its incarnation).
func (r *Ring) Owners(replica string) store.Owners { return replicaView{r, replica} }

type replicaView struct {
	r       *Ring
	replica string
}

func (v replicaView) Writer(member string) (uint64, string, bool) {
	v.r.mu.Lock()
	defer v.r.mu.Unlock()
	t, ok := v.r.cached[v.replica][member]
	return t, v.replica, ok
}

func (v replicaView) Confirm(_ context.Context, member string) error {
	v.r.mu.Lock()
	defer v.r.mu.Unlock()
	if h := v.r.holder[member]; h != v.replica {
		return fmt.Errorf("%w (held by %q)", store.ErrNotOwner, h)
	}
	return nil
}
