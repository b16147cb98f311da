package member

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

// view is what an enqueuing handler learns of an Informer's objects: the
// last state of each it was told of, and how it was told.
type view struct {
	mu       sync.Mutex
	objects  map[string]string // pod name -> its label "v"
	events   []string
	initial  int
	stopped  bool // set by the test once the handler is removed
	afterEnd int  // calls after stopped
}

func newView() *view { return &view{objects: map[string]string{}} }

func (v *view) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			v.record("add", obj)
			if initial {
				v.mu.Lock()
				v.initial++
				v.mu.Unlock()
			}
		},
		UpdateFunc: func(_, obj any) { v.record("update", obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			v.record("delete", obj)
		},
	}
}

func (v *view) record(what string, obj any) {
	p := obj.(*corev1.Pod)
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.stopped {
		v.afterEnd++
	}
	v.events = append(v.events, what+" "+p.Name)
	if what == "delete" {
		delete(v.objects, p.Name)
	} else {
		v.objects[p.Name] = p.Labels["v"]
	}
}

func (v *view) snapshot() (map[string]string, []string, int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return maps.Clone(v.objects), append([]string(nil), v.events...), v.initial
}

// cached is the informer's cache as a view would see it.
func cached(inf *Informer) map[string]string {
	out := map[string]string{}
	for _, o := range inf.indexer.List() {
		p := o.(*corev1.Pod)
		out[p.Name] = p.Labels["v"]
	}
	return out
}

func pod(name, version string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"v": version}}}
}

// podInformer is an Informer of client's pods; the returned start runs
// it until the test ends.
func podInformer(t *testing.T, client kubernetes.Interface) (*Informer, func()) {
	t.Helper()
	pods := client.CoreV1().Pods(metav1.NamespaceAll)
	inf := newInformer(listWatch(client, pods.List, pods.Watch), &corev1.Pod{}, 0, nil, cache.Indexers{})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	return inf, func() { wg.Go(func() { inf.run(ctx) }) }
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// A handler that joins a synced informer gets every cached object as an
// initial Add before AddEventHandler returns, and its registration has
// synced; then it gets every later event.
func TestInformerJoinSyncedInformer(t *testing.T) {
	client := fake.NewClientset(pod("a", "1"), pod("b", "1"))
	inf, start := podInformer(t, client)
	start()
	waitFor(t, "the informer to sync", inf.HasSynced)

	v := newView()
	reg, err := inf.AddEventHandler(v.handler())
	if err != nil {
		t.Fatal(err)
	}
	objects, events, initial := v.snapshot()
	if initial != 2 || len(events) != 2 || !maps.Equal(objects, map[string]string{"a": "1", "b": "1"}) {
		t.Fatalf("on joining: %v (initial %d), want adds of a and b, both initial", events, initial)
	}
	if !reg.HasSynced() {
		t.Error("registration on a synced informer has not synced")
	}

	ctx := context.Background()
	pods := client.CoreV1().Pods("default")
	if _, err := pods.Create(ctx, pod("c", "1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Update(ctx, pod("a", "2"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := pods.Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"add a", "add b", "add c", "update a", "delete b"}
	waitFor(t, "the later events", func() bool { _, ev, _ := v.snapshot(); return len(ev) >= len(want) })
	if _, events, _ := v.snapshot(); fmt.Sprint(events[2:]) != fmt.Sprint(want[2:]) {
		t.Errorf("events = %v, want %v (the first two in any order)", events, want)
	}
}

// Handlers that join while the informer's objects change miss nothing:
// once the events are delivered, each handler's view is the cache.
func TestInformerJoinMissesNoEvent(t *testing.T) {
	client := fake.NewClientset()
	inf, start := podInformer(t, client)
	start()
	waitFor(t, "the informer to sync", inf.HasSynced)

	ctx := context.Background()
	pods := client.CoreV1().Pods("default")
	const objects, joiners = 300, 20
	var views []*view
	var writes sync.WaitGroup
	writes.Add(1)
	// Each pod lives a few writes: created, updated 5 writes later,
	// deleted 10 writes later if its number is odd. A handler joining
	// late has most pods, untouched since, from its initial list only.
	go func() {
		defer writes.Done()
		for i := range objects + 10 {
			var err error
			if i < objects {
				_, err = pods.Create(ctx, pod(fmt.Sprint("p", i), "1"), metav1.CreateOptions{})
			}
			if j := i - 5; err == nil && j >= 0 && j < objects {
				_, err = pods.Update(ctx, pod(fmt.Sprint("p", j), "2"), metav1.UpdateOptions{})
			}
			if j := i - 10; err == nil && j >= 0 && j%2 == 1 {
				err = pods.Delete(ctx, fmt.Sprint("p", j), metav1.DeleteOptions{})
			}
			if err != nil {
				t.Error(err)
				return
			}
			time.Sleep(100 * time.Microsecond)
		}
	}()
	for range joiners {
		v := newView()
		if _, err := inf.AddEventHandler(v.handler()); err != nil {
			t.Fatal(err)
		}
		views = append(views, v)
		time.Sleep(2 * time.Millisecond)
	}
	writes.Wait()
	list, err := pods.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, p := range list.Items {
		want[p.Name] = p.Labels["v"]
	}
	waitFor(t, "the cache to hold every write", func() bool { return maps.Equal(cached(inf), want) })
	for i, v := range views {
		waitFor(t, fmt.Sprintf("handler %d to see the cache", i), func() bool {
			got, _, _ := v.snapshot()
			return maps.Equal(got, want)
		})
	}
}

// A removed handler is called no more; the others go on.
func TestInformerRemovedHandlerGetsNothing(t *testing.T) {
	client := fake.NewClientset(pod("a", "1"))
	inf, start := podInformer(t, client)
	start()
	waitFor(t, "the informer to sync", inf.HasSynced)

	gone, stays := newView(), newView()
	reg, err := inf.AddEventHandler(gone.handler())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inf.AddEventHandler(stays.handler()); err != nil {
		t.Fatal(err)
	}
	if err := inf.RemoveEventHandler(reg); err != nil {
		t.Fatal(err)
	}
	gone.mu.Lock()
	gone.stopped = true
	gone.mu.Unlock()
	ctx := context.Background()
	if _, err := client.CoreV1().Pods("default").Create(ctx, pod("b", "1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().Pods("default").Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the other handler to see the changes", func() bool { _, ev, _ := stays.snapshot(); return len(ev) == 3 })
	gone.mu.Lock()
	defer gone.mu.Unlock()
	if gone.afterEnd != 0 {
		t.Errorf("removed handler called %d times after RemoveEventHandler: %v", gone.afterEnd, gone.events)
	}
}

// A handler added before the informer starts gets the initial list from
// the listener, and its registration syncs once it has all of it.
func TestInformerRegistrationSyncsWithInitialList(t *testing.T) {
	client := fake.NewClientset(pod("a", "1"), pod("b", "1"), pod("c", "1"))
	inf, start := podInformer(t, client)
	v := newView()
	reg, err := inf.AddEventHandler(v.handler())
	if err != nil {
		t.Fatal(err)
	}
	if reg.HasSynced() {
		t.Fatal("registration synced before its informer started")
	}
	start()
	waitFor(t, "the registration to sync", reg.HasSynced)
	if objects, events, initial := v.snapshot(); len(objects) != 3 || initial != len(events) {
		t.Errorf("synced with %v (%d initial), want the 3 pods, each an initial Add", events, initial)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if !cache.WaitFor(ctx, "", reg.HasSyncedChecker()) {
		t.Error("registration's HasSyncedChecker never done")
	}
}

// With a resync period, the handlers get every cached object again as an
// Update, as a shared informer's handlers do.
func TestInformerResyncReachesHandlers(t *testing.T) {
	client := fake.NewClientset(pod("a", "1"))
	pods := client.CoreV1().Pods(metav1.NamespaceAll)
	inf := newInformer(listWatch(client, pods.List, pods.Watch), &corev1.Pod{}, 50*time.Millisecond, nil, cache.Indexers{})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { inf.run(ctx) })
	v := newView()
	if _, err := inf.AddEventHandler(v.handler()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "two resyncs", func() bool {
		_, events, _ := v.snapshot()
		return len(events) >= 3 // the initial add, then updates
	})
	if _, events, _ := v.snapshot(); events[1] != "update a" {
		t.Errorf("events = %v, want resync updates of a", events)
	}
}
