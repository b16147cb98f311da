// Package engage runs a controller's per-member work from the registry's
// events. A controller that works on every member (leaves, pod sync)
// implements Engager; a Runner calls it on one worker per member, so the
// calls for a member never overlap and keep the order of the events, while
// a slow member never delays another.
//
//	MemberAdded, MemberReplaced, MemberUpdated -> Engage, then handlers moved
//	Decided (while engaged)                    -> Decided
//	MemberRemoved, Runner.Disengage, shutdown  -> handlers removed, Disengage
//
// The Runner owns the event handlers a member's work keeps on the member
// runtime's informers. When a reconnect replaces the runtime, the handlers
// are added to the new runtime's informers before they leave the old ones
// (make before break), so no member object change goes unseen. A member
// runtime calls the handlers kept on its informers itself, one after the
// other, on the goroutine that fills the cache (member.Informer: a
// client-go listener a handler would cost two goroutines and a buffer,
// per handler and member): a handler only enqueues, and returns at once.
package engage

import (
	"context"
	"slices"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/cache"

	"github.com/leafsync/leafsync/internal/syncer/clusters"
)

// Engager is the per-member part of a controller. Its methods for one
// member are called one at a time, in event order; for different members,
// concurrently.
type Engager interface {
	// Engage starts the member's work, or points it at m's new runtime or
	// spec. It returns the handlers to keep on m's informers (each only
	// enqueues: see the package doc); a handler must stay valid until the
	// member is disengaged (it is not re-registered while its informer
	// stays the same).
	Engage(ctx context.Context, m clusters.Member) []Handler
	// Decided reports the engine's decision on a probe of an engaged
	// member (m.Readiness): its new status, and transitions if any.
	Decided(m clusters.Member)
	// Disengage stops the member's work; its handlers are already removed.
	Disengage(cluster string)
}

// Informer is the part of a cache.SharedIndexInformer handlers are kept on.
type Informer interface {
	AddEventHandler(cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error)
	RemoveEventHandler(cache.ResourceEventHandlerRegistration) error
}

// Handler is an event handler to keep on one of a member's informers.
type Handler struct {
	Informer Informer
	Handler  cache.ResourceEventHandler
}

// Runner dispatches registry events to an Engager's per-member workers.
type Runner struct {
	engager Engager
	log     logr.Logger

	mu      sync.Mutex
	ctx     context.Context // of Run; nil when not running
	workers map[string]*worker
	wg      sync.WaitGroup
}

// NewRunner returns a Runner for e; Run runs it.
func NewRunner(e Engager, log logr.Logger) *Runner {
	return &Runner{engager: e, log: log, workers: map[string]*worker{}}
}

// Run dispatches events until ctx ends or events is closed, then
// disengages every member and waits for the workers to end.
func (r *Runner) Run(ctx context.Context, events <-chan clusters.Event) {
	r.mu.Lock()
	r.ctx = ctx
	r.mu.Unlock()
	defer r.shutdown()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			r.dispatch(ev)
		}
	}
}

func (r *Runner) dispatch(ev clusters.Event) {
	switch ev.Type {
	case clusters.MemberAdded, clusters.MemberReplaced, clusters.MemberUpdated:
		r.enqueue(ev.Cluster, task{engage: &ev.Member}, true)
	case clusters.Decided:
		r.enqueue(ev.Cluster, task{decided: &ev.Member}, false)
	case clusters.MemberRemoved:
		r.enqueue(ev.Cluster, task{}, false)
	}
}

// Disengage stops the member's work before it returns (or ctx ends), as
// deregistration hooks need before they remove what the work writes.
func (r *Runner) Disengage(ctx context.Context, cluster string) error {
	done := make(chan struct{})
	if !r.enqueue(cluster, task{done: done}, false) {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// enqueue queues t on the cluster's worker, starting one if start is set
// (else a cluster without a worker has nothing to do). It reports whether
// t was queued.
func (r *Runner) enqueue(cluster string, t task, start bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.workers[cluster]
	if w == nil {
		if !start || r.ctx == nil {
			return false
		}
		w = &worker{r: r, cluster: cluster, wake: make(chan struct{}, 1)}
		r.workers[cluster] = w
		r.wg.Add(1)
		go func() { defer r.wg.Done(); w.run(r.ctx) }()
	}
	w.queue = append(w.queue, t)
	select {
	case w.wake <- struct{}{}:
	default:
	}
	return true
}

func (r *Runner) shutdown() {
	r.mu.Lock()
	r.ctx = nil
	clusterNames := make([]string, 0, len(r.workers))
	for name := range r.workers {
		clusterNames = append(clusterNames, name)
	}
	r.mu.Unlock()
	for _, name := range clusterNames {
		r.enqueue(name, task{}, false)
	}
	r.wg.Wait()
}

// task is one call on a member's worker: Engage (engage set), Decided
// (decided set), else Disengage (done, if set, is closed after it).
type task struct {
	engage  *clusters.Member
	decided *clusters.Member
	done    chan struct{}
}

// worker calls the Engager for one member, one task at a time. It ends
// when it has nothing queued and the member is not engaged.
type worker struct {
	r       *Runner
	cluster string
	wake    chan struct{}
	queue   []task // guarded by r.mu

	// used by the worker's goroutine only
	engaged bool
	regs    []handlerReg
}

type handlerReg struct {
	informer Informer
	reg      cache.ResourceEventHandlerRegistration
}

func (w *worker) run(ctx context.Context) {
	for {
		w.r.mu.Lock()
		if len(w.queue) == 0 {
			if !w.engaged {
				delete(w.r.workers, w.cluster)
				w.r.mu.Unlock()
				return
			}
			w.r.mu.Unlock()
			<-w.wake
			continue
		}
		t := w.queue[0]
		w.queue = w.queue[1:]
		w.r.mu.Unlock()
		w.do(ctx, t)
	}
}

func (w *worker) do(ctx context.Context, t task) {
	switch {
	case t.engage != nil:
		if ctx.Err() != nil {
			return // shutting down: a Disengage is queued
		}
		hs := w.r.engager.Engage(ctx, *t.engage)
		w.engaged = true
		w.watch(hs)
	case t.decided != nil:
		if w.engaged && ctx.Err() == nil {
			w.r.engager.Decided(*t.decided)
		}
	default:
		if w.engaged {
			w.unwatch(w.regs)
			w.regs = nil
			w.r.engager.Disengage(w.cluster)
			w.engaged = false
		}
		if t.done != nil {
			close(t.done)
		}
	}
}

// watch keeps hs on their informers: unchanged if the informers are the
// same, else the new registrations are made before the old ones go.
func (w *worker) watch(hs []Handler) {
	if slices.EqualFunc(hs, w.regs, func(h Handler, r handlerReg) bool { return h.Informer == r.informer }) {
		return
	}
	old := w.regs
	w.regs = nil
	for _, h := range hs {
		reg, err := h.Informer.AddEventHandler(h.Handler)
		if err != nil {
			w.r.log.Error(err, "watching member objects", "cluster", w.cluster)
			continue
		}
		w.regs = append(w.regs, handlerReg{h.Informer, reg})
	}
	w.unwatch(old)
}

func (w *worker) unwatch(regs []handlerReg) {
	for _, r := range regs {
		_ = r.informer.RemoveEventHandler(r.reg)
	}
}
