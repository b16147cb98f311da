package store

import (
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// CallEvent describes one store call.
type CallEvent struct {
	Backend string
	// Op is "put", "delete", "get", "scan", "term" or (sharded)
	// "confirm": Owners.Confirm.
	Op       string
	Cluster  string
	Duration time.Duration
	// Err is nil on success; Reason(Err) classifies it.
	Err error
}

// calls makes the Keeper's store calls: each bounded by a timeout, timed,
// counted, and reported to onCall.
type calls struct {
	store   Store
	timeout time.Duration
	clock   clock.PassiveClock
	onCall  func(CallEvent)

	mu                      sync.Mutex
	writes, deletes, errors uint64
	last                    time.Duration
}

// call runs one store call of op about cluster.
func call[T any](c *calls, ctx context.Context, op, cluster string, fn func(context.Context) (T, error)) (T, error) {
	start := c.clock.Now()
	cctx, cancel := context.WithTimeout(ctx, c.timeout)
	v, err := fn(cctx)
	cancel()
	d := c.clock.Since(start)
	c.mu.Lock()
	c.last = d
	switch {
	case err != nil:
		c.errors++
	case op == "put":
		c.writes++
	case op == "delete":
		c.deletes++
	}
	c.mu.Unlock()
	if c.onCall != nil {
		c.onCall(CallEvent{Backend: c.store.Backend(), Op: op, Cluster: cluster, Duration: d, Err: err})
	}
	return v, err
}

func (c *calls) list(ctx context.Context, cluster string) ([]Record, error) {
	return call(c, ctx, "get", cluster, func(ctx context.Context) ([]Record, error) { return c.store.List(ctx, cluster) })
}

func (c *calls) scan(ctx context.Context) ([]Record, error) {
	return call(c, ctx, "scan", "", c.store.Scan)
}

func (c *calls) put(ctx context.Context, name string, st state, v Version) (Version, error) {
	return call(c, ctx, "put", ClusterOf(name), func(ctx context.Context) (Version, error) {
		cs, err := st.encode()
		if err != nil {
			return "", err
		}
		return c.store.Put(ctx, name, cs, v)
	})
}

func (c *calls) del(ctx context.Context, name string, v Version) error {
	_, err := call(c, ctx, "delete", ClusterOf(name), func(ctx context.Context) (struct{}, error) {
		return struct{}{}, c.store.Delete(ctx, name, v)
	})
	return err
}

func (c *calls) nextTerm(ctx context.Context) (uint64, error) {
	return call(c, ctx, "term", "", c.store.NextTerm)
}

func (c *calls) term(ctx context.Context) (uint64, error) {
	return call(c, ctx, "term", "", c.store.Term)
}

// figures fills the call counters of s.
func (c *calls) figures(s *Stats) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s.Writes, s.Deletes, s.Errors, s.LastCall = c.writes, c.deletes, c.errors, c.last
}
