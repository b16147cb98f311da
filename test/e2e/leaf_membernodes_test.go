//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/leafsync/leafsync/internal/syncer/registration"
	"github.com/leafsync/leafsync/test/harness"
)

// TestLeafFollowsMemberNodeChanges: the member's cache keeps a record of
// each node, not the Node (labels shared between a pool's nodes, the
// hostname apart). A leaf with a node selector offers what the matching,
// schedulable nodes offer, and follows each change of a member node: a
// cordon, a label that moves a node into the pool, an uncordon. Leafsync
// runs with a leaf resync of 10 minutes here, so that only the member
// node informer's events can move the leaf within waitAllocatable's 20
// seconds.
func TestLeafFollowsMemberNodeChanges(t *testing.T) {
	f := newFleet(t, harness.HostOptions{}, harness.MemberOptions{Name: "member-a", Nodes: 1})
	member := f.members["member-a"]
	ctx := context.Background()
	if _, err := member.AddNodes(ctx, "pool-a", 2, harness.NodeSpec{
		Labels: map[string]string{"pool": "a", corev1.LabelTopologyZone: "z1"}}); err != nil {
		t.Fatal(err)
	}
	big := harness.DefaultAllocatable()
	big[corev1.ResourceCPU] = resource.MustParse("8")
	if _, err := member.AddNodes(ctx, "pool-b", 1, harness.NodeSpec{Allocatable: big,
		Labels: map[string]string{"pool": "b", corev1.LabelTopologyZone: "z1"}}); err != nil {
		t.Fatal(err)
	}
	slow := filepath.Join(harness.LogDir(t), "leafsync-config-slow-resync.yaml")
	cfg := strings.Replace(testConfig, "  resync: 10s", "  resync: 10m", 1)
	if cfg == testConfig {
		t.Fatal("testConfig has no leaves resync of 10s to lengthen")
	}
	if err := os.WriteFile(slow, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	f.startLeafsync(t, "leafsync", "--config="+slow)
	f.register(t, "member-a", map[string]string{registration.AnnotationNodeSelector: "pool=a"})
	const leaf = "leaf-member-a"
	f.waitLeafReady(t, leaf, time.Minute)

	// pool-a-0 and pool-a-1, 4 CPU and 110 pods each; not member-a-node-0
	// nor pool-b-0.
	waitAllocatable(t, f, leaf, map[corev1.ResourceName]string{"cpu": "8", "pods": "220"})
	if z := f.node(t, leaf).Labels[corev1.LabelTopologyZone]; z != "z1" {
		t.Errorf("leaf zone label %q, want z1, the counted nodes' own", z)
	}

	mc := member.Client()
	setUnschedulable(t, mc, "pool-a-0", true)
	waitAllocatable(t, f, leaf, map[corev1.ResourceName]string{"cpu": "4", "pods": "110"})

	patch := fmt.Sprintf(`{"metadata":{"labels":{"pool":%q}}}`, "a")
	if _, err := mc.CoreV1().Nodes().Patch(ctx, "pool-b-0", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAllocatable(t, f, leaf, map[corev1.ResourceName]string{"cpu": "12", "pods": "220"})

	setUnschedulable(t, mc, "pool-a-0", false)
	waitAllocatable(t, f, leaf, map[corev1.ResourceName]string{"cpu": "16", "pods": "330"})
}
