package member

import (
	"context"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// Informer is one of a member runtime's caches (its Nodes, its Pods) with
// the event handlers its consumers keep on it. It is client-go's informer
// controller (cache.NewInformerWithOptions: the reflector, FIFO and
// indexer of a shared informer) calling the handlers itself, one after
// the other, on the goroutine that updates the cache. A shared informer
// gives each handler a listener of its own instead: two goroutines and a
// ring buffer of at least 1,024 events, ~30 KB a handler, and a member
// had five (TestHandlerFootprint); the processor they hang on cost two
// more goroutines an informer.
//
// So each handler must return at once (and must not add or remove
// handlers of the same Informer): a slow one would stall the cache and
// every other handler. Those added today only enqueue: leaves' kicks
// (runner.Add), podsync's onMemberPod (a label check, queue.Add) and
// nameFreed (queue.Add for every other member). A handler that must do
// more hands it to a queue of its own.
type Informer struct {
	indexer    cache.Indexer
	controller cache.Controller

	mu       sync.Mutex // held while the handlers are called
	handlers []*registration
}

// registration is a handler's: it has synced when the cache has, as the
// handler has had every object of the initial list by then (see
// AddEventHandler).
type registration struct {
	cache.Controller
	handler cache.ResourceEventHandler
}

// newInformer builds an Informer of lw's objects of obj's type; run runs
// it. indexers must not be nil.
func newInformer(lw cache.ListerWatcher, obj runtime.Object, resync time.Duration, transform cache.TransformFunc, indexers cache.Indexers) *Informer {
	inf := &Informer{}
	store, controller := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    obj,
		ResyncPeriod:  resync,
		Transform:     transform,
		Indexers:      indexers,
		Handler: cache.ResourceEventHandlerDetailedFuncs{
			AddFunc:    func(obj any, initial bool) { inf.each(func(h cache.ResourceEventHandler) { h.OnAdd(obj, initial) }) },
			UpdateFunc: func(old, obj any) { inf.each(func(h cache.ResourceEventHandler) { h.OnUpdate(old, obj) }) },
			DeleteFunc: func(obj any) { inf.each(func(h cache.ResourceEventHandler) { h.OnDelete(obj) }) },
		},
	})
	inf.indexer = store.(cache.Indexer) // an Indexer, as indexers is not nil
	inf.controller = controller
	return inf
}

func (inf *Informer) run(ctx context.Context) { inf.controller.RunWithContext(ctx) }

func (inf *Informer) each(call func(cache.ResourceEventHandler)) {
	inf.mu.Lock()
	defer inf.mu.Unlock()
	for _, r := range inf.handlers {
		call(r.handler)
	}
}

// AddEventHandler adds h. h gets every object in the cache as an Add
// (isInInitialList true, as client-go gives them to a handler joining a
// started informer), then every later event. No event is missed between
// the two; the one being delivered as h joins, already in the cache, may
// come after the Add of what it led to (a duplicate, harmless to a
// handler that enqueues a key).
func (inf *Informer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	r := &registration{Controller: inf.controller, handler: h}
	inf.mu.Lock()
	defer inf.mu.Unlock()
	for _, obj := range inf.indexer.List() {
		h.OnAdd(obj, true)
	}
	inf.handlers = append(inf.handlers, r)
	return r, nil
}

// RemoveEventHandler removes a handler: once it returns, the handler is
// called no more.
func (inf *Informer) RemoveEventHandler(reg cache.ResourceEventHandlerRegistration) error {
	inf.mu.Lock()
	defer inf.mu.Unlock()
	inf.handlers = slices.DeleteFunc(inf.handlers, func(r *registration) bool { return r == reg })
	return nil
}

// HasSynced reports whether the cache has synced once: every object of
// the first list is in it, and was given to the handlers.
func (inf *Informer) HasSynced() bool { return inf.controller.HasSynced() }
