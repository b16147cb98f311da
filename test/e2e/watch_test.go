//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/leafsync/leafsync/test/harness"
)

// nodeObservation is one version of a Node seen on a watch.
type nodeObservation struct {
	at    time.Time
	ready corev1.ConditionStatus
	node  *corev1.Node
}

// nodeRecorder keeps every version of one Node that a watch delivers, so
// that a test can assert what was true all along, not just at a poll.
type nodeRecorder struct {
	mu     sync.Mutex
	seen   []nodeObservation
	errs   []error
	cancel context.CancelFunc
	done   chan struct{}
}

// recordNode watches a Node of cluster c. Its client has no request
// timeout, so the watch lasts as long as the test needs.
func recordNode(t *testing.T, cluster *harness.Cluster, name string) *nodeRecorder {
	t.Helper()
	cfg := cluster.RESTConfig()
	cfg.Timeout = 0
	c := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	r := &nodeRecorder{cancel: cancel, done: make(chan struct{})}
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	list, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		r.add(&list.Items[i])
	}
	go func() {
		defer close(r.done)
		watchFrom(ctx, list.ResourceVersion, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return c.CoreV1().Nodes().Watch(ctx, o)
		}, func(ev watch.Event) {
			if n, ok := ev.Object.(*corev1.Node); ok && ev.Type != watch.Deleted {
				r.add(n)
			}
		}, r.fail)
	}()
	t.Cleanup(r.stop)
	return r
}

// watchFrom delivers every event after resource version rv to handle
// until ctx ends, through client-go's RetryWatcher: it starts the watch
// again from the last version seen when a watch ends (the client's or the
// server's timeout), so that no event is missed. fail gets the error that
// ends it early (e.g. the version expired), not the end of ctx.
func watchFrom(ctx context.Context, rv string, watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error), handle func(watch.Event), fail func(error)) {
	w, err := watchtools.NewRetryWatcherWithContext(ctx, rv, &cache.ListWatch{WatchFuncWithContext: watchFn})
	if err != nil {
		fail(err)
		return
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok {
				if ctx.Err() == nil {
					fail(fmt.Errorf("watch from %s ended early", rv))
				}
				return
			}
			if ev.Type == watch.Error {
				if ctx.Err() == nil {
					fail(fmt.Errorf("watch error: %v", apierrors.FromObject(ev.Object)))
				}
				return
			}
			handle(ev)
		}
	}
}

func (r *nodeRecorder) add(n *corev1.Node) {
	var ready corev1.ConditionStatus
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status
		}
	}
	r.mu.Lock()
	r.seen = append(r.seen, nodeObservation{at: time.Now(), ready: ready, node: n.DeepCopy()})
	r.mu.Unlock()
}

func (r *nodeRecorder) fail(err error) {
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.mu.Unlock()
}

func (r *nodeRecorder) stop() {
	r.cancel()
	<-r.done
}

// observations stops the recorder and returns what it saw.
func (r *nodeRecorder) observations(t *testing.T) []nodeObservation {
	t.Helper()
	r.stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errs) > 0 {
		t.Fatalf("node watch broke: %v", r.errs)
	}
	return r.seen
}

// leftReady returns the first observation at which the node, once Ready,
// was not (ok false: it never left Ready once it was).
func (r *nodeRecorder) leftReady(t *testing.T) (o nodeObservation, ok bool) {
	t.Helper()
	seenReady := false
	for _, o := range r.observations(t) {
		if o.ready == corev1.ConditionTrue {
			seenReady = true
		} else if seenReady {
			return o, true
		}
	}
	return nodeObservation{}, false
}
