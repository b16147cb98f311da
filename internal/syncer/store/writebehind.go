package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/leafsync/leafsync/internal/runner"
)

// writeBehind is when the Keeper writes: a runner keyed by cluster. A
// change queues its cluster after the coalescing delay (a cluster already
// waiting keeps its earlier time, so a burst is one write); a failed write
// is retried after a jittered per-cluster exponential backoff (and later
// changes wait for that retry); a cluster is never handed to two workers at
// once, so its writes never race each other. Synchronous flushes go
// through the same queue, ahead of coalescing and backoff, and wait here
// for their answer. It also keeps the health figures: failing since the
// first failed write, healthy again once every key that failed succeeded.
type writeBehind struct {
	runner   *runner.Runner[string]
	coalesce time.Duration
	clock    clock.PassiveClock

	mu           sync.Mutex
	waiters      map[string][]waiter // synchronous flushes, by cluster
	failing      map[string]bool     // keys whose last write failed
	failingSince time.Time
	lastError    string
	stopped      bool // Run ended: no more writes
}

// waiter is a synchronous flush waiting for a cluster's state as of seq.
type waiter struct {
	cluster string
	seq     uint64
	done    chan error // buffered: answering never blocks
}

// errStopped answers flushes after Run ended.
var errStopped = errors.New("store: the keeper has stopped")

func newWriteBehind(write runner.Func[string], o KeeperOptions, log logr.Logger) *writeBehind {
	backoff := jittered{workqueue.NewTypedItemExponentialFailureRateLimiter[string](o.MinBackoff, o.MaxBackoff)}
	return &writeBehind{
		runner: runner.New(write, runner.Options[string]{Name: "store", Workers: o.Parallel,
			RateLimiter: backoff, Clock: o.Clock, Logger: log.WithValues("what", "writing leafsync state; keeping it in memory")}),
		coalesce: o.Coalesce, clock: o.Clock,
		waiters: map[string][]waiter{}, failing: map[string]bool{},
	}
}

// jittered spreads each retry delay over [d/2, d], so that clusters failing
// together do not retry in lockstep.
type jittered struct {
	workqueue.TypedRateLimiter[string]
}

func (j jittered) When(key string) time.Duration {
	d := j.TypedRateLimiter.When(key)
	return d/2 + rand.N(d/2+1)
}

// schedule queues a changed cluster for a write after the coalescing
// delay. A cluster whose write failed is already queued for its retry,
// with backoff: the change waits for it.
func (w *writeBehind) schedule(cluster string) {
	if w.runner.Failures(cluster) == 0 {
		w.runner.AddAfter(cluster, w.coalesce)
	}
}

// flush queues the clusters now and waits until each one's state as of seq
// is written or its write failed.
func (w *writeBehind) flush(ctx context.Context, want map[string]uint64) error {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return errStopped
	}
	var ws []waiter
	for c, seq := range want {
		wt := waiter{cluster: c, seq: seq, done: make(chan error, 1)}
		w.waiters[c] = append(w.waiters[c], wt)
		ws = append(ws, wt)
	}
	w.mu.Unlock()
	for _, wt := range ws {
		w.runner.Add(wt.cluster)
	}
	var errs []error
	for _, wt := range ws {
		select {
		case err := <-wt.done:
			if err != nil {
				errs = append(errs, err)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for _, err := range errs {
		if errors.Is(err, ErrFenced) {
			return err
		}
	}
	if len(errs) > 3 {
		return fmt.Errorf("%w (and %d more clusters)", errors.Join(errs[:3]...), len(errs)-3)
	}
	return errors.Join(errs...)
}

// written records the outcome of a cluster's write and answers the flushes
// it satisfies: all of them on an error, those up to flushed otherwise
// (flushed: the seq written, or every one when nothing is pending).
func (w *writeBehind) written(cluster string, err error, flushed uint64) {
	w.outcome(cluster, err)
	w.mu.Lock()
	defer w.mu.Unlock()
	var left []waiter
	for _, wt := range w.waiters[cluster] {
		switch {
		case err != nil:
			wt.done <- err
		case flushed >= wt.seq:
			wt.done <- nil
		default: // changed again since the state written: a later turn answers
			left = append(left, wt)
		}
	}
	if len(left) > 0 {
		w.waiters[cluster] = left
	} else {
		delete(w.waiters, cluster)
	}
}

// outcome keeps the health figures.
func (w *writeBehind) outcome(key string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if errors.Is(err, ErrNotOwner) {
		err = nil // sharded: another replica writes the cluster; its failures are not this one's
	}
	switch {
	case errors.Is(err, ErrFenced):
	case err != nil:
		if w.failingSince.IsZero() {
			w.failingSince = w.clock.Now()
		}
		w.lastError = err.Error()
		w.failing[key] = true
	default:
		delete(w.failing, key)
		if len(w.failing) == 0 {
			w.failingSince, w.lastError = time.Time{}, ""
		}
	}
}

// health is when writes started failing (zero when healthy) and the last
// failure.
func (w *writeBehind) health() (time.Time, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failingSince, w.lastError
}

// stop answers the flushes still waiting once the last writes are done;
// later flushes fail at once.
func (w *writeBehind) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	for c, ws := range w.waiters {
		for _, wt := range ws {
			wt.done <- errStopped
		}
		delete(w.waiters, c)
	}
}
