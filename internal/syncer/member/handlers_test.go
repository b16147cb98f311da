package member

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/leafsync/leafsync/internal/syncer/member/membertest"
)

// TestHandlerFootprint measures what each event handler kept on a member
// runtime's informers costs, handlers added as engage adds them (once the
// caches have synced) to runtimes of make bench-scale's member shape (200
// nodes, 2,000 pods), five a member as leaves, podsync and more keep. A
// client-go handler of its own is a listener with two goroutines and a
// ring buffer grown to the whole cache: 2 goroutines and ~25 KB each.
func TestHandlerFootprint(t *testing.T) {
	if testing.Short() {
		t.Skip("starts runtimes against servers of 2,200 objects")
	}
	const (
		members             = 4
		nodes, pods         = 200, 2000
		goroutinesPerBudget = 0.1  // a handler: no goroutine of its own
		heapPerBudget       = 2048 // bytes a handler
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var runtimes []*Runtime
	for i := range members {
		ns := make([]corev1.Node, nodes)
		for j := range ns {
			ns[j] = *kwokNode(j)
			ns[j].ManagedFields = nil
		}
		ps := make([]corev1.Pod, pods)
		for j := range ps {
			ps[j] = *kwokPod(j, fmt.Sprintf("node-%d", j%nodes))
			ps[j].ManagedFields = nil
		}
		rt, err := New(Options{Cluster: fmt.Sprintf("m%d", i), RESTConfig: membertest.NewServer(t, ns, ps).RESTConfig(), Logger: logr.Discard()})
		if err != nil {
			t.Fatal(err)
		}
		rt.Start(ctx)
		defer rt.Stop()
		runtimes = append(runtimes, rt)
	}
	for _, rt := range runtimes {
		if !rt.WaitForCacheSync(ctx) {
			t.Fatal("caches did not sync")
		}
	}
	heapBefore, goroutinesBefore := settled()

	// Five handlers a member, as the controllers add them: leaves on
	// nodes and pods, podsync on pods, two more.
	var seen atomic.Int64
	count := cache.ResourceEventHandlerFuncs{AddFunc: func(any) { seen.Add(1) }}
	for _, rt := range runtimes {
		for _, inf := range []*Informer{rt.NodeInformer(), rt.Pods().Informer(), rt.Pods().Informer(), rt.NodeInformer(), rt.Pods().Informer()} {
			if _, err := inf.AddEventHandler(count); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := int64(members * (2*nodes + 3*pods))
	waitFor(t, "the handlers to get every cached object", func() bool { return seen.Load() == want })
	heapAfter, goroutinesAfter := settled()

	handlers := float64(members * 5)
	heap := float64(int64(heapAfter)-int64(heapBefore)) / handlers
	goroutines := float64(goroutinesAfter-goroutinesBefore) / handlers
	t.Logf("a handler on a member informer: %.0f bytes of heap, %.2f goroutines; five a member: %.0f KB, %.1f goroutines",
		heap, goroutines, 5*heap/1024, 5*goroutines)
	if heap > heapPerBudget || goroutines > goroutinesPerBudget {
		t.Errorf("a handler costs %.0f bytes (budget %d) and %.2f goroutines (budget %.1f)", heap, heapPerBudget, goroutines, goroutinesPerBudget)
	}
}

// settled is the live heap and the goroutines once the watches have
// settled and what sync.Pools hold is gone.
func settled() (heap uint64, goroutines int) {
	time.Sleep(time.Second)
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc, runtime.NumGoroutine()
}
