package store

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// Keeper is the one writer of the store in a leafsync process. Components
// change a cluster's state in memory with Update; the Keeper writes the
// latest state of each changed cluster in the background, coalescing any
// number of changes into one write, and retries with backoff while the
// store is unavailable. Decisions never wait for the store.
type Keeper struct {
	store Store
	log   logr.Logger

	mu       sync.Mutex
	states   map[string]ClusterState
	versions map[string]Version
	dirty    map[string]bool
	gone     map[string]bool // deregistered: delete the record
	kick     chan struct{}
	// lastErr is the last write error (nil when the store is healthy).
	lastErr error
}

// NewKeeper returns a Keeper over a Store; Run writes.
func NewKeeper(s Store, log logr.Logger) *Keeper {
	return &Keeper{
		store: s, log: log,
		states: map[string]ClusterState{}, versions: map[string]Version{},
		dirty: map[string]bool{}, gone: map[string]bool{},
		kick: make(chan struct{}, 1),
	}
}

// Load reads a cluster's state from the store into memory (once, when the
// cluster is first seen by this leader) and returns it. A missing record is
// an empty state.
func (k *Keeper) Load(ctx context.Context, cluster string) (ClusterState, error) {
	st, v, err := k.store.Get(ctx, cluster)
	if errors.Is(err, ErrNotFound) {
		st, v, err = ClusterState{}, "", nil
	}
	if err != nil {
		return ClusterState{}, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.dirty[cluster] {
		k.states[cluster], k.versions[cluster] = st, v
	}
	delete(k.gone, cluster)
	return clone(k.states[cluster]), nil
}

// State returns a copy of a cluster's state in memory.
func (k *Keeper) State(cluster string) ClusterState {
	k.mu.Lock()
	defer k.mu.Unlock()
	return clone(k.states[cluster])
}

// Update changes a cluster's state in memory and schedules a write.
func (k *Keeper) Update(cluster string, fn func(*ClusterState)) {
	k.mu.Lock()
	st := clone(k.states[cluster])
	fn(&st)
	k.states[cluster] = st
	k.dirty[cluster] = true
	delete(k.gone, cluster)
	k.mu.Unlock()
	k.signal()
}

// Forget drops a deregistered cluster and deletes its record.
func (k *Keeper) Forget(cluster string) {
	k.mu.Lock()
	delete(k.states, cluster)
	delete(k.dirty, cluster)
	k.gone[cluster] = true
	k.mu.Unlock()
	k.signal()
}

// Pending is the number of clusters whose latest state is not yet written.
func (k *Keeper) Pending() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.dirty) + len(k.gone)
}

// Err is the last write error, nil once a write succeeds again.
func (k *Keeper) Err() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.lastErr
}

func (k *Keeper) signal() {
	select {
	case k.kick <- struct{}{}:
	default:
	}
}

// Run writes changes until ctx ends, then makes a last attempt to flush.
func (k *Keeper) Run(ctx context.Context) {
	backoff := time.Duration(0)
	for {
		var retry <-chan time.Time
		if backoff > 0 {
			retry = time.After(backoff)
		}
		select {
		case <-ctx.Done():
			flushCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = k.Flush(flushCtx)
			cancel()
			return
		case <-k.kick:
		case <-retry:
		}
		if err := k.Flush(ctx); err != nil {
			backoff = min(max(2*backoff, 500*time.Millisecond), 30*time.Second)
			k.log.Error(err, "writing leafsync state; keeping it in memory and retrying", "in", backoff)
		} else {
			backoff = 0
		}
	}
}

// Flush writes every changed cluster now.
func (k *Keeper) Flush(ctx context.Context) error {
	k.mu.Lock()
	work := map[string]ClusterState{}
	for c := range k.dirty {
		work[c] = clone(k.states[c])
	}
	gone := map[string]Version{}
	for c := range k.gone {
		gone[c] = k.versions[c]
	}
	versions := map[string]Version{}
	for c := range work {
		versions[c] = k.versions[c]
	}
	k.mu.Unlock()

	var errs []error
	for c, st := range work {
		nv, err := k.store.Put(ctx, c, st, versions[c])
		k.mu.Lock()
		if err == nil {
			k.versions[c] = nv
			// Written, unless it changed again meanwhile.
			if equalStates(k.states[c], st) {
				delete(k.dirty, c)
			}
		}
		k.mu.Unlock()
		if err != nil {
			errs = append(errs, err)
		}
	}
	for c, v := range gone {
		err := k.store.Delete(ctx, c, v)
		if errors.Is(err, ErrNotFound) {
			err = nil
		}
		k.mu.Lock()
		if err == nil && k.gone[c] {
			delete(k.gone, c)
			delete(k.versions, c)
		}
		k.mu.Unlock()
		if err != nil {
			errs = append(errs, err)
		}
	}
	err := errors.Join(errs...)
	k.mu.Lock()
	k.lastErr = err
	k.mu.Unlock()
	return err
}

func clone(st ClusterState) ClusterState {
	out := ClusterState{Hysteresis: append([]byte(nil), st.Hysteresis...)}
	if st.Deletes != nil {
		out.Deletes = append([]PendingDelete(nil), st.Deletes...)
	}
	return out
}

func equalStates(a, b ClusterState) bool {
	if string(a.Hysteresis) != string(b.Hysteresis) || len(a.Deletes) != len(b.Deletes) {
		return false
	}
	for i := range a.Deletes {
		x, y := a.Deletes[i], b.Deletes[i]
		if x.Kind != y.Kind || x.Namespace != y.Namespace || x.Name != y.Name || x.HostUID != y.HostUID ||
			x.Cause != y.Cause || x.Owner != y.Owner || !x.Since.Equal(y.Since) {
			return false
		}
	}
	return true
}
