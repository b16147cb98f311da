package store

import (
	"context"
	"fmt"
	"sync"

	"github.com/go-logr/logr"
)

// fence is the Keeper's writer term. The Keeper takes a new term
// (Store.NextTerm) before its first write; a store term newer than its own
// means a newer leader took over, and the Keeper stops writing for good
// (ErrFenced) instead of overwriting it.
type fence struct {
	calls *calls
	log   logr.Logger

	takeMu sync.Mutex // serializes taking the term
	mu     sync.Mutex
	term   uint64
	fenced error
}

// state is the term taken (0: none yet) and the fencing error.
func (f *fence) state() (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.term, f.fenced
}

// ensure takes the writer term if not taken yet (once: a second term taken
// by this same Keeper would fence it).
func (f *fence) ensure(ctx context.Context) error {
	f.takeMu.Lock()
	defer f.takeMu.Unlock()
	if term, fenced := f.state(); fenced != nil || term != 0 {
		return fenced
	}
	t, err := f.calls.nextTerm(ctx)
	if err != nil {
		return fmt.Errorf("taking a writer term: %w", err)
	}
	f.mu.Lock()
	f.term = t
	f.mu.Unlock()
	f.log.Info("took the state store's writer term", "term", t, "backend", f.calls.store.Backend())
	return nil
}

// check reads the store's term: a newer one than this Keeper's fences it
// for good.
func (f *fence) check(ctx context.Context) error {
	cur, err := f.calls.term(ctx)
	if err != nil {
		return fmt.Errorf("reading the writer term: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if cur > f.term && f.fenced == nil {
		f.fenced = fmt.Errorf("%w (store term %d, ours %d)", ErrFenced, cur, f.term)
		f.log.Error(f.fenced, "another leafsync process took over the state store; this one stops writing")
	}
	return f.fenced
}
