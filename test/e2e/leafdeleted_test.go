//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leafsync/leafsync/test/harness"
)

// TestLeafDeletedByHand: someone deletes a leaf Node while its member is
// down. leafsync writes it again at once (not at the next resync: while it
// is missing, pod sync keeps its hands off the leaf's pods), and a user's
// delete made during the outage is still owed and carried out when the
// member is back.
func TestLeafDeletedByHand(t *testing.T) {
	f := newPodSyncFleet(t, "member-a")
	member := f.members["member-a"]
	hc := f.host.Client()
	ctx := context.Background()
	const leaf = "leaf-member-a"
	// Leaves recomputed only every 5 minutes on their own: a leaf back
	// within 30s was written on the delete, not by a resync.
	const leafResync = 5 * time.Minute
	cfg := strings.Replace(testConfig, "  resync: 10s\n", "  resync: 5m\n", 1)
	if cfg == testConfig {
		t.Fatal("testConfig has no leaves resync line to lengthen")
	}
	f.writeConfig(t, cfg)
	f.startLeafsync(t, "leafsync")
	f.register(t, "member-a", nil)
	f.waitLeafReady(t, leaf, time.Minute)
	web := leafWorkload("web", 1, leaf)
	web.TolerationSeconds = 3600 // no eviction: the only delete is the user's
	f.createWorkloads(t, []harness.LeafWorkload{web}, nil)
	pod := waitHostPodsReady(t, f, "app=web", 1, 90*time.Second, leaf)[0]
	waitOneToOne(t, f, "member-a", leaf, 10*time.Second)
	memberPod := listPods(t, member.Cluster, managedPodSelector)[0]

	member.proxy.Cut()
	f.waitLeafNotReady(t, leaf, notReadyAfter+probeInterval+writeSlack+10*time.Second)
	old := f.node(t, leaf)
	if err := hc.CoreV1().Nodes().Delete(ctx, leaf, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deletedAt := time.Now()
	harness.Eventually(t, 40*time.Second, "leaf written again", func() error {
		n, err := hc.CoreV1().Nodes().Get(ctx, leaf, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if n.UID == old.UID {
			return fmt.Errorf("still the deleted Node")
		}
		return nil
	})
	back := time.Since(deletedAt)
	t.Logf("leaf Node written again %s after it was deleted by hand (leaves resync %s)", back.Round(time.Millisecond), leafResync)
	if back > 30*time.Second {
		t.Errorf("leaf came back after %s: by a resync, not on the delete", back.Round(time.Millisecond))
	}

	if err := hc.CoreV1().Pods(appsNS).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 20*time.Second, "the user's delete owed", func() error {
		if _, ok := hostEvents(t, f, "DeleteOwed")[pod.Name]; !ok {
			return fmt.Errorf("no DeleteOwed event for %s", pod.Name)
		}
		return nil
	})
	if err := member.proxy.Heal(); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, readyAfter+30*time.Second, "owed delete carried out in the member", func() error {
		p, err := member.Client().CoreV1().Pods(appsNS).Get(ctx, memberPod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && (p.UID != memberPod.UID || p.DeletionTimestamp != nil)) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("member pod %s still running", p.Name)
	})
}
