package clusters

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leafsync/leafsync/internal/syncer/member/membertest"
)

// fences is a fake FenceLeaf: it fails while the test says so, and
// records each write and whether the member was published by then.
type fences struct {
	mu        sync.Mutex
	failing   map[string]bool
	calls     map[string][]string // leaf names written, by cluster
	published []string            // clusters already published at a fence write
	reg       func() *Registry
}

func (f *fences) fence(_ context.Context, cluster, leaf string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[cluster] = append(f.calls[cluster], leaf)
	if _, ok := f.reg().Member(cluster); ok {
		f.published = append(f.published, cluster)
	}
	if f.failing[cluster] {
		return errors.New("host unreachable")
	}
	return nil
}

func (f *fences) set(fn func(f *fences)) { f.mu.Lock(); defer f.mu.Unlock(); fn(f) }

func (f *fences) of(cluster string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls[cluster]...)
}

// TestShardedTakeFencesTheLeafFirst: a member this replica takes is
// published (its leaf written and renewed, its pods synced) only after
// the leaf was fenced (FenceLeaf), so that a former writer's versions are
// stale before this replica acts. A fence that fails keeps the member
// unpublished and is tried again, each time after the take is confirmed;
// another member's take goes on meanwhile.
func TestShardedTakeFencesTheLeafFirst(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	own := newOwnership()
	own.set(func(o *ownership) {
		o.assigned["east"], o.mayTake["east"] = true, true
		o.assigned["west"], o.mayTake["west"] = true, true
	})
	e := newEnv(t)
	// Before the controller: its runtimes are stopped (cleanup) before
	// the server closes.
	west := membertest.NewServer(t, []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "w1"}}}, nil)
	f := &fences{failing: map[string]bool{"east": true}, calls: map[string][]string{}}
	o := e.options()
	o.Ownership, o.FenceLeaf = own, f.fence
	ctl, err := New(e.c, o)
	if err != nil {
		t.Fatal(err)
	}
	e.ctl = ctl
	f.reg = ctl.Registry
	t.Cleanup(ctl.Shutdown)
	e.create("east", "east", e.srv.Kubeconfig("token"), nil, time.Minute)
	e.create("west", "west", west.Kubeconfig("token"), nil, time.Minute)
	e.mustReconcile("east")
	e.mustReconcile("west")
	// The takes are tried every takeRetry.
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(10 * time.Millisecond)
			e.clk.Step(takeRetry)
		}
	}

	// east's fence fails: tried again, never published; west is taken,
	// fenced and published meanwhile.
	waitFor("west taken and published while east's fence fails", func() bool {
		_, ok := ctl.Registry().Member("west")
		return ok && len(f.of("east")) >= 3
	})
	if _, ok := ctl.Registry().Member("east"); ok {
		t.Fatal("east published although its leaf was never fenced")
	}
	if n, m := own.takesOf("east"), len(f.of("east")); n < m {
		t.Errorf("%d fence writes of east after only %d takes: a retry must confirm the take first", m, n)
	}

	// The host answers again: east is fenced, then published.
	f.set(func(f *fences) { f.failing["east"] = false })
	waitFor("east published once its fence succeeded", func() bool {
		_, ok := ctl.Registry().Member("east")
		return ok
	})
	m, _ := ctl.Registry().Member("east")
	for _, leaf := range f.of("east") {
		if leaf != m.Spec.LeafName {
			t.Errorf("fenced leaf %q, want east's leaf %q", leaf, m.Spec.LeafName)
		}
	}
	f.set(func(f *fences) {
		if len(f.published) > 0 {
			t.Errorf("fence written after the member was published: %v", f.published)
		}
	})
	ctl.Shutdown()
	e.srv.Close()
	west.Close()
}
