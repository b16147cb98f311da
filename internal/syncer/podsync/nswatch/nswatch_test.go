package nswatch

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestNamespaceWatchStartsOnNeedAndStopsWhenIdle(t *testing.T) {
	cs := fake.NewClientset(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "apps"}})
	var changes atomic.Int32
	fc := clocktesting.NewFakeClock(time.Now())
	w := New(cs, fc, func(ns string) {
		if ns == "apps" {
			changes.Add(1)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	w.Start(ctx)
	defer func() { cancel(); w.Wait() }()

	// Informers run on real goroutines: wait for them, bounded.
	eventually := func(what string, cond func() bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) { return cond(), nil })
		if err != nil {
			t.Fatal(what)
		}
	}
	var pods []*corev1.Pod
	eventually("namespace informer never synced", func() (ok bool) { pods, ok = w.Pods("apps"); return ok })
	if len(pods) != 1 || pods[0].Name != "web-1" {
		t.Fatalf("pods %v", pods)
	}
	// A new pod (a replacement) is told at once.
	before := changes.Load()
	if _, err := cs.CoreV1().Pods("apps").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-2", Namespace: "apps"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually("no change notified for a new pod", func() bool { return changes.Load() != before })
	left := func() int {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.ns)
	}
	// Used within idleAfter: kept.
	fc.Step(idleAfter - time.Second)
	w.stopIdle()
	if n := left(); n != 1 {
		t.Fatalf("%d namespace informers after %s unused, want 1", n, idleAfter-time.Second)
	}
	// Unused for idleAfter: the idle ticker stops it.
	fc.Step(2 * time.Second)
	eventually("namespace informer left after idling", func() bool { return left() == 0 })
}
