package shard

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

const testNamespace = "leafsync-system"

var leasesResource = coordinationv1.SchemeGroupVersion.WithResource("leases")

// fakeAPI is a fake clientset whose Leases have resource versions and
// conflict on a stale one, as the API server's do (the plain fake
// tracker ignores resourceVersion on update).
type fakeAPI struct {
	*fake.Clientset
	mu sync.Mutex
	rv uint64
	// beforeUpdate, when set, runs before an update of a Lease is checked
	// (to slip another writer's update in) or fails it.
	beforeUpdate func(l *coordinationv1.Lease) error
}

func newFakeAPI() *fakeAPI {
	f := &fakeAPI{Clientset: fake.NewClientset(), rv: 100}
	f.PrependReactor("create", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		l := a.(k8stesting.CreateAction).GetObject().(*coordinationv1.Lease).DeepCopy()
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.store(l, true)
	})
	f.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		l := a.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease).DeepCopy()
		f.mu.Lock()
		hook := f.beforeUpdate
		f.mu.Unlock()
		if hook != nil {
			if err := hook(l); err != nil {
				return true, nil, err
			}
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		cur, err := f.Tracker().Get(leasesResource, l.Namespace, l.Name)
		if err != nil {
			return true, nil, err
		}
		if v := cur.(*coordinationv1.Lease).ResourceVersion; l.ResourceVersion != v {
			return true, nil, apierrors.NewConflict(leasesResource.GroupResource(), l.Name, nil)
		}
		return f.store(l, false)
	})
	return f
}

// store writes l with a new resource version; f.mu is held.
func (f *fakeAPI) store(l *coordinationv1.Lease, create bool) (bool, runtime.Object, error) {
	f.rv++
	l.ResourceVersion = strconv.FormatUint(f.rv, 10)
	var err error
	if create {
		err = f.Tracker().Create(leasesResource, l, l.Namespace)
	} else {
		err = f.Tracker().Update(leasesResource, l, l.Namespace)
	}
	if err != nil {
		return true, nil, err
	}
	return true, l.DeepCopy(), nil
}

// write stores l as another writer would (from a reactor hook too).
func (f *fakeAPI) write(t *testing.T, l *coordinationv1.Lease) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, _, err := f.store(l.DeepCopy(), false); err != nil {
		t.Error(err)
	}
}

func (f *fakeAPI) lease(t *testing.T, name string) *coordinationv1.Lease {
	t.Helper()
	obj, err := f.Tracker().Get(leasesResource, testNamespace, name)
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*coordinationv1.Lease).DeepCopy()
}

// changes records what OnChange was told.
type changes struct {
	mu  sync.Mutex
	got map[string]int
}

func (c *changes) record(clusters []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.got == nil {
		c.got = map[string]int{}
	}
	for _, m := range clusters {
		c.got[m]++
	}
}

func (c *changes) count(cluster string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.got[cluster]
}

const (
	testLeaseDuration = 15 * time.Second
	testRenewInterval = 2 * time.Second
)

var testMembers = []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"}

// startSharder runs a Sharder of replica on api until the test ends.
func startSharder(t *testing.T, api *fakeAPI, clk *clocktesting.FakeClock, replica string, ch *changes) *Sharder {
	t.Helper()
	s, err := New(Options{
		Client: api, Namespace: testNamespace, Ring: "leafsync", Replica: replica,
		LeaseDuration: testLeaseDuration, RenewInterval: testRenewInterval, LoadBound: 0.05,
		Members: func() []string { return testMembers }, OnChange: ch.record,
		Clock: clk, Logger: testr.New(t).WithName(replica),
	})
	if err != nil {
		t.Fatal(err)
	}
	run(t, s)
	eventually(t, replica+" holds its shard Lease", s.Held)
	return s
}

// run starts s until the test ends or stop is called, which returns once
// Start has.
func run(t *testing.T, s *Sharder) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := s.Start(ctx); err != nil {
			t.Error(err)
		}
	}()
	stop = func() {
		cancel()
		<-done
	}
	t.Cleanup(stop)
	return stop
}

// eventually waits (real time: informers and queues run on their own) up
// to 10s for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
