//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leafsync/leafsync/test/harness"
)

// TestRunServesHealthAndStopsOnSIGTERM runs the real binary against a real
// API server: it becomes ready, takes the leader Lease, and exits 0 on
// SIGTERM, releasing the Lease so a successor need not wait it out.
func TestRunServesHealthAndStopsOnSIGTERM(t *testing.T) {
	host := harness.StartCluster(t, harness.ClusterOptions{Name: "host"})
	ctx := context.Background()
	if err := host.EnsureNamespace(ctx, "leafsync-system"); err != nil {
		t.Fatal(err)
	}
	ls := harness.StartLeafsync(t, "leafsync", host.Kubeconfig(), "--namespace=leafsync-system", "--leader-elect")

	var holder string
	harness.Eventually(t, 30*time.Second, "leader Lease taken", func() error {
		l, err := host.Client().CoordinationV1().Leases("leafsync-system").Get(ctx, "leafsync-leader", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			return errEmptyHolder
		}
		holder = *l.Spec.HolderIdentity
		return nil
	})
	t.Logf("leader: %s", holder)

	start := time.Now()
	if err := ls.Terminate(15 * time.Second); err != nil {
		t.Fatalf("leafsync exit after SIGTERM: %v", err)
	}
	t.Logf("leafsync exited %s after SIGTERM", time.Since(start).Round(time.Millisecond))
	l, err := host.Client().CoordinationV1().Leases("leafsync-system").Get(ctx, "leafsync-leader", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
		t.Fatalf("leader Lease still held by %q after a clean stop", *l.Spec.HolderIdentity)
	}
}
