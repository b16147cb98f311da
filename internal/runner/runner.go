// Package runner is the one queue loop of leafsync's controllers: a
// client-go rate-limited workqueue, a fixed number of workers, and a
// Reconciler that says, per key, when to look again. leaves, pod sync, the
// store's Keeper and the kubelet API's advertiser each own a Runner; none
// writes its own queue loop.
//
// The contract is controller-runtime's: an error requeues the key with
// the queue's backoff (and logs it); a nil error forgets the backoff, and
// Result.RequeueAfter > 0 looks again after that delay without counting
// as a failure.
package runner

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// Result says when to reconcile the key again after a success; zero means
// only when it is added again.
type Result struct {
	RequeueAfter time.Duration
}

// Reconciler brings one key to its wanted state.
type Reconciler[K comparable] interface {
	Reconcile(ctx context.Context, key K) (Result, error)
}

// Func adapts a function to Reconciler.
type Func[K comparable] func(ctx context.Context, key K) (Result, error)

// Reconcile calls f.
func (f Func[K]) Reconcile(ctx context.Context, key K) (Result, error) { return f(ctx, key) }

// Options configure a Runner. Name and Workers are required.
type Options[K comparable] struct {
	Name    string
	Workers int
	// Backoff after failures: exponential from MinBackoff to MaxBackoff
	// per key (defaults 100ms and 30s), unless RateLimiter is set.
	MinBackoff, MaxBackoff time.Duration
	RateLimiter            workqueue.TypedRateLimiter[K]
	Clock                  clock.WithTicker
	Logger                 logr.Logger
}

// Runner feeds queued keys to a Reconciler.
type Runner[K comparable] struct {
	rec   Reconciler[K]
	opts  Options[K]
	queue workqueue.TypedRateLimitingInterface[K]
}

// New returns a Runner whose queue accepts keys at once; Run starts the
// workers.
func New[K comparable](rec Reconciler[K], o Options[K]) *Runner[K] {
	if o.Workers < 1 {
		o.Workers = 1
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 100 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 30 * time.Second
	}
	rl := o.RateLimiter
	if rl == nil {
		rl = workqueue.NewTypedItemExponentialFailureRateLimiter[K](o.MinBackoff, o.MaxBackoff)
	}
	q := workqueue.NewTypedRateLimitingQueueWithConfig(rl,
		workqueue.TypedRateLimitingQueueConfig[K]{Name: o.Name, Clock: o.Clock})
	return &Runner[K]{rec: rec, opts: o, queue: q}
}

// Add queues key now; a key already queued is not queued twice.
func (r *Runner[K]) Add(key K) { r.queue.Add(key) }

// AddAfter queues key after d; of several pending delays the earliest wins.
func (r *Runner[K]) AddAfter(key K, d time.Duration) { r.queue.AddAfter(key, d) }

// Len is the number of keys ready to be worked on.
func (r *Runner[K]) Len() int { return r.queue.Len() }

// Failures is how many times in a row key has failed.
func (r *Runner[K]) Failures(key K) int { return r.queue.NumRequeues(key) }

// Run works the queue until ctx ends, then shuts it down and returns once
// every worker has finished its current key.
func (r *Runner[K]) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range r.opts.Workers {
		wg.Go(func() {
			for r.next(ctx) {
			}
		})
	}
	<-ctx.Done()
	r.queue.ShutDown()
	wg.Wait()
}

func (r *Runner[K]) next(ctx context.Context) bool {
	key, shutdown := r.queue.Get()
	if shutdown {
		return false
	}
	defer r.queue.Done(key)
	res, err := r.rec.Reconcile(ctx, key)
	if err != nil {
		if ctx.Err() == nil {
			r.opts.Logger.Error(err, "reconcile failed; retrying with backoff", "queue", r.opts.Name, "key", key, "failures", r.queue.NumRequeues(key)+1)
		}
		r.queue.AddRateLimited(key)
		return true
	}
	r.queue.Forget(key)
	if res.RequeueAfter > 0 {
		r.queue.AddAfter(key, res.RequeueAfter)
	}
	return true
}
