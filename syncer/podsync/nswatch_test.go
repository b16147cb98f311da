package podsync

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestNamespaceWatchStartsOnNeedAndStopsWhenIdle(t *testing.T) {
	cs := fake.NewClientset(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "apps"}})
	var changes atomic.Int32
	fc := clocktesting.NewFakeClock(time.Now())
	w := nsWatch{host: cs, clock: fc, onChange: func(ns string) {
		if ns == "apps" {
			changes.Add(1)
		}
	}}
	ctx, cancel := context.WithCancel(context.Background())
	w.start(ctx)
	defer func() { cancel(); w.wait() }()

	var pods []*corev1.Pod
	deadline := time.Now().Add(10 * time.Second)
	for ok := false; !ok; {
		if time.Now().After(deadline) {
			t.Fatal("namespace informer never synced")
		}
		pods, ok = w.pods("apps")
		time.Sleep(10 * time.Millisecond)
	}
	if len(pods) != 1 || pods[0].Name != "web-1" {
		t.Fatalf("pods %v", pods)
	}
	// A new pod (a replacement) is told at once.
	before := changes.Load()
	if _, err := cs.CoreV1().Pods("apps").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-2", Namespace: "apps"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for changes.Load() == before {
		if time.Now().After(deadline) {
			t.Fatal("no change notified for a new pod")
		}
		time.Sleep(10 * time.Millisecond)
	}
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
	for left() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d namespace informers left after idling", left())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
