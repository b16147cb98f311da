package storetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/leafsync/leafsync/internal/syncer/store"
)

// ErrDown is a store error as an unreachable backend gives it.
var ErrDown = fmt.Errorf("%w: connection refused", store.ErrUnavailable)

// Faulty wraps a Store for tests of its callers: calls fail while Fail has
// set an error, and the reply of the next successful Put can be lost.
type Faulty struct {
	store.Store
	mu        sync.Mutex
	err       error
	loseReply bool
	calls     atomic.Int64
}

// Fail makes every call fail with err from now on (nil: succeed again).
func (f *Faulty) Fail(err error) {
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
}

// LoseReply makes the next successful Put report ErrUnavailable.
func (f *Faulty) LoseReply() {
	f.mu.Lock()
	f.loseReply = true
	f.mu.Unlock()
}

// Calls is the number of calls made so far.
func (f *Faulty) Calls() int64 { return f.calls.Load() }

func (f *Faulty) check() error {
	f.calls.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// Get implements store.Store.
func (f *Faulty) Get(ctx context.Context, c string) (store.ClusterState, store.Version, error) {
	if err := f.check(); err != nil {
		return store.ClusterState{}, "", err
	}
	return f.Store.Get(ctx, c)
}

// Put implements store.Store.
func (f *Faulty) Put(ctx context.Context, c string, st store.ClusterState, v store.Version) (store.Version, error) {
	if err := f.check(); err != nil {
		return "", err
	}
	nv, err := f.Store.Put(ctx, c, st, v)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil && f.loseReply {
		f.loseReply = false
		return "", fmt.Errorf("%w: reply lost", store.ErrUnavailable)
	}
	return nv, err
}

// Delete implements store.Store.
func (f *Faulty) Delete(ctx context.Context, c string, v store.Version) error {
	if err := f.check(); err != nil {
		return err
	}
	return f.Store.Delete(ctx, c, v)
}

// Scan implements store.Store.
func (f *Faulty) Scan(ctx context.Context) ([]store.Record, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	return f.Store.Scan(ctx)
}

// List implements store.Store.
func (f *Faulty) List(ctx context.Context, c string) ([]store.Record, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	return f.Store.List(ctx, c)
}

// NextTerm implements store.Store.
func (f *Faulty) NextTerm(ctx context.Context) (uint64, error) {
	if err := f.check(); err != nil {
		return 0, err
	}
	return f.Store.NextTerm(ctx)
}

// Term implements store.Store.
func (f *Faulty) Term(ctx context.Context) (uint64, error) {
	if err := f.check(); err != nil {
		return 0, err
	}
	return f.Store.Term(ctx)
}
