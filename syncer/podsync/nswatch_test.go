package podsync

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestNamespaceWatchStartsOnNeedAndStopsWhenIdle(t *testing.T) {
	cs := fake.NewClientset(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "apps"}})
	var changes atomic.Int32
	w := nsWatch{host: cs, onChange: func(ns string) {
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
	// Unused for idleAfter: stopped.
	w.stopIdle(time.Now().Add(idleAfter + time.Second))
	w.mu.Lock()
	left := len(w.ns)
	w.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d namespace informers left after idling", left)
	}
}
