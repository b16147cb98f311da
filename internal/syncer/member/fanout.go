package member

import (
	"errors"
	"slices"
	"sync"

	"k8s.io/client-go/tools/cache"
)

// fanout is a member informer as its consumers see it: one client-go
// event handler on the informer, added before it starts, calls every
// handler added through AddEventHandler. A client-go handler of its own
// costs two goroutines and a ring buffer that keeps the size of the
// largest backlog it had (the whole cache, for a handler added to a
// synced informer): ~30 KB a handler, and a member had five
// (TestHandlerFootprint).
//
// The handlers are called synchronously, one after the other, on the one
// listener's goroutine: each must return at once, and must not add or
// remove handlers of the same informer. Those added today only enqueue:
// leaves' kick (runner.Add), podsync's onMemberPod (a label check,
// queue.Add) and nameFreed (queue.Add for every other member). A handler
// that does more, or may block, would delay every other: it takes a
// listener of its own with AddEventHandlerWithOptions (or
// AddEventHandlerWithResyncPeriod), which go to the informer itself.
type fanout struct {
	cache.SharedIndexInformer
	listener cache.ResourceEventHandlerRegistration

	mu       sync.Mutex // held while the handlers are called
	handlers []*fanoutHandler
}

// fanoutHandler is the registration of a handler on a fanout. It has
// synced when the fanout's listener has (see AddEventHandler).
type fanoutHandler struct {
	cache.ResourceEventHandlerRegistration
	handler cache.ResourceEventHandler
}

// newFanout adds the fanout's listener to inf, which has not started.
func newFanout(inf cache.SharedIndexInformer) (*fanout, error) {
	f := &fanout{SharedIndexInformer: inf}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    func(obj any, initial bool) { f.each(func(h cache.ResourceEventHandler) { h.OnAdd(obj, initial) }) },
		UpdateFunc: func(old, obj any) { f.each(func(h cache.ResourceEventHandler) { h.OnUpdate(old, obj) }) },
		DeleteFunc: func(obj any) { f.each(func(h cache.ResourceEventHandler) { h.OnDelete(obj) }) },
	})
	if err != nil {
		return nil, err
	}
	f.listener = reg
	return f, nil
}

func (f *fanout) each(call func(cache.ResourceEventHandler)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, h := range f.handlers {
		call(h.handler)
	}
}

// AddEventHandler adds h to the fanout. h gets every object in the cache
// as an Add (isInInitialList true, as client-go gives them to a handler
// joining a started informer), then every event the listener delivers
// after that. No event is missed between the two; an event the listener
// had not delivered yet may come after the Add of what it led to (a
// duplicate, harmless to a handler that enqueues a key). Its registration
// has synced when the listener's has: by then every object of the initial
// list was in the cache h listed, or delivered to h after.
func (f *fanout) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	if f.IsStopped() {
		return nil, errors.New("member informer has stopped")
	}
	fh := &fanoutHandler{ResourceEventHandlerRegistration: f.listener, handler: h}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, obj := range f.GetStore().List() {
		h.OnAdd(obj, true)
	}
	f.handlers = append(f.handlers, fh)
	return fh, nil
}

// RemoveEventHandler removes a handler: once it returns, the handler is
// called no more.
func (f *fanout) RemoveEventHandler(reg cache.ResourceEventHandlerRegistration) error {
	fh, ok := reg.(*fanoutHandler)
	if !ok {
		return f.SharedIndexInformer.RemoveEventHandler(reg)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handlers = slices.DeleteFunc(f.handlers, func(h *fanoutHandler) bool { return h == fh })
	return nil
}
