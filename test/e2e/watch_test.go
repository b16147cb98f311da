//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

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
		rewatch(ctx, list.ResourceVersion, func(rv string) (watch.Interface, error) {
			return c.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: rv})
		}, func(ev watch.Event) string {
			n, ok := ev.Object.(*corev1.Node)
			if !ok {
				return ""
			}
			if ev.Type != watch.Deleted {
				r.add(n)
			}
			return n.ResourceVersion
		}, r.fail)
	}()
	t.Cleanup(r.stop)
	return r
}

// rewatch runs a watch from resource version rv until ctx ends. A watch
// ends at the client's request timeout or the server's; rewatch starts
// again from the last version seen, so that no event is missed. handle
// returns the resource version of the event's object ("" if none); fail
// gets every error that is not caused by ctx ending.
func rewatch(ctx context.Context, rv string, start func(rv string) (watch.Interface, error), handle func(watch.Event) string, fail func(error)) {
	for ctx.Err() == nil {
		w, err := start(rv)
		if err != nil {
			if ctx.Err() == nil {
				fail(err)
			}
			return
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				if ctx.Err() == nil {
					fail(fmt.Errorf("watch error: %v", ev.Object))
				}
				w.Stop()
				return
			}
			if v := handle(ev); v != "" {
				rv = v
			}
		}
		w.Stop()
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
