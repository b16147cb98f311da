// Package nswatch follows the host pods of the namespaces that have
// deferred deletes, for their replacements: one informer per namespace,
// started on first need and stopped once idle.
package nswatch

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// Watch follows the host pods of the namespaces that have deferred
// deletes, for their replacements: replacements may run anywhere in the
// host, so no leaf's informer has them, and a cluster-wide pod informer
// would cost every host for what only a pending deferral needs. One
// informer per namespace is started on first need and stopped once no
// deferred delete of that namespace has asked for it for idleAfter.
type Watch struct {
	host  kubernetes.Interface
	clock clock.WithTicker
	// onChange is told of a pod change in a watched namespace (deferred
	// deletes of that namespace look again at once, not at their next poll).
	onChange func(namespace string)

	mu  sync.Mutex
	ctx context.Context
	ns  map[string]*nsInformer
	wg  sync.WaitGroup
}

type nsInformer struct {
	informer cache.SharedIndexInformer
	cancel   context.CancelFunc
	lastUsed time.Time
}

// New returns a Watch of the host's pods on clk; onChange is told of a pod
// change in a watched namespace.
func New(host kubernetes.Interface, clk clock.WithTicker, onChange func(namespace string)) *Watch {
	return &Watch{host: host, clock: clk, onChange: onChange}
}

// idleAfter: a namespace's informer stops this long after its last use.
const idleAfter = 2 * time.Minute

// Start lets Pods start informers; they stop with ctx.
func (w *Watch) Start(ctx context.Context) {
	w.mu.Lock()
	w.ctx, w.ns = ctx, map[string]*nsInformer{}
	w.mu.Unlock()
	tick := w.clock.NewTicker(idleAfter / 2)
	go func() {
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C():
				w.stopIdle()
			}
		}
	}()
}

// Pods returns the namespace's host pods, and false until its informer
// has synced (the caller looks again later).
func (w *Watch) Pods(namespace string) ([]*corev1.Pod, bool) {
	w.mu.Lock()
	if w.ctx == nil || w.ctx.Err() != nil {
		w.mu.Unlock()
		return nil, false
	}
	n := w.ns[namespace]
	if n == nil {
		n = w.startLocked(namespace)
	}
	n.lastUsed = w.clock.Now()
	inf := n.informer
	w.mu.Unlock()
	if !inf.HasSynced() {
		return nil, false
	}
	objs := inf.GetStore().List()
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			pods = append(pods, p)
		}
	}
	return pods, true
}

func (w *Watch) startLocked(namespace string) *nsInformer {
	ctx, cancel := context.WithCancel(w.ctx)
	inf := informers.NewSharedInformerFactoryWithOptions(w.host, 0, informers.WithNamespace(namespace)).Core().V1().Pods().Informer()
	notify := func(any) {
		if w.onChange != nil {
			w.onChange(namespace)
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: notify, UpdateFunc: func(_, o any) { notify(o) }, DeleteFunc: notify,
	})
	n := &nsInformer{informer: inf, cancel: cancel}
	w.ns[namespace] = n
	w.wg.Add(1)
	go func() { defer w.wg.Done(); inf.Run(ctx.Done()) }()
	return n
}

// stopIdle stops the informers not used since idleAfter.
func (w *Watch) stopIdle() {
	now := w.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for ns, n := range w.ns {
		if now.Sub(n.lastUsed) > idleAfter {
			n.cancel()
			delete(w.ns, ns)
		}
	}
}

// Wait returns once every informer has stopped (after Start's ctx ended).
func (w *Watch) Wait() { w.wg.Wait() }
