package kubeletapi

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/leafsync/leafsync/internal/leafnode"
)

// TestAdvertiserWritesLeaves: every leaf gets the address and port (and an
// ordinary node none), through the informer's replay on start.
func TestAdvertiserWritesLeaves(t *testing.T) {
	leaf := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "leaf-a", Labels: map[string]string{leafnode.LabelCluster: "a"}}}
	other := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker"}}
	host := fake.NewClientset(leaf, other)
	factory := informers.NewSharedInformerFactory(host, 0)
	a := &Advertiser{Host: host, Informer: factory.Core().V1().Nodes().Informer(), Address: "10.0.0.7", Port: 10250, Logger: logr.Discard()}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	done := make(chan error, 1)
	go func() { done <- a.Start(ctx) }()

	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) { // liveness
		n, err := host.CoreV1().Nodes().Get(ctx, "leaf-a", metav1.GetOptions{})
		return err == nil && a.advertised(n), err
	})
	if err != nil {
		t.Fatalf("leaf-a not advertised: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Start: %v", err)
	}
	w, _ := host.CoreV1().Nodes().Get(context.Background(), "worker", metav1.GetOptions{})
	if len(w.Status.Addresses) != 0 || w.Status.DaemonEndpoints.KubeletEndpoint.Port != 0 {
		t.Errorf("an ordinary node was advertised on: %+v", w.Status)
	}
}
