//go:build e2e

package e2e

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/leafnode"
	"github.com/leafsync/leafsync/test/harness"
)

// TestLeafWriteFencedByVersion: two writers of one leaf, as a member's old
// writer (paused, then resumed) and its new one (#33, docs/scaling.md
// "Fencing"). The old writer checked that it may write before its pause and
// sends its write after the new writer wrote: the write carries the version
// the old writer last wrote, so the API server refuses it (409), and the
// old writer, asked again after a fresh read, writes nothing. The same for
// the leaf's node Lease. Without the version, the old write lands over the
// new writer's.
func TestLeafWriteFencedByVersion(t *testing.T) {
	host := harness.StartCluster(t, harness.ClusterOptions{Name: "host"})
	ctx := context.Background()
	client := func() kubernetes.Interface { return ownClient(t, host) } // one per writer, as two processes have
	const cluster, leaf = "fence-1", "leaf-fence-1"
	want := func(msg string, cordoned bool) leafnode.Desired {
		n := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "n1"},
			Status: corev1.NodeStatus{
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")},
				NodeInfo:    corev1.NodeSystemInfo{KubeletVersion: "v1.35.0", OperatingSystem: "linux", Architecture: "amd64"},
				Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			},
		}
		d := leafnode.Compute(leafnode.Input{Cluster: cluster, LeafName: leaf, MemberNodes: []*leafnode.MemberNode{leafnode.MemberNodeOf(n)},
			Status: hysteresis.Status{State: hysteresis.Ready, Cordoned: cordoned}, Config: hysteresis.DefaultConfig()})
		for i := range d.Conditions {
			if d.Conditions[i].Type == corev1.NodeReady {
				d.Conditions[i].Message = msg
			}
		}
		return d
	}
	get := func() *corev1.Node {
		n, err := host.Client().CoreV1().Nodes().Get(ctx, leaf, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	// The old writer A writes the leaf; its informer cache holds what it
	// wrote, and stays there (A is paused).
	var aAllowed atomic.Bool
	aAllowed.Store(true)
	var aAsked atomic.Int32
	cacheA := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	a := &leafnode.Writer{Client: client(), Cluster: cluster, Name: leaf, HeartbeatEvery: time.Hour,
		Nodes:   corelisters.NewNodeLister(cacheA),
		Allowed: func() bool { aAsked.Add(1); return aAllowed.Load() }}
	if err := a.Sync(ctx, want("A", false)); err != nil {
		t.Fatal(err)
	}
	if err := cacheA.Add(get()); err != nil {
		t.Fatal(err)
	}
	if err := a.Sync(ctx, want("A again", false)); err != nil {
		t.Fatal(err)
	}
	if got := readyMessageOf(get()); got != "A again" {
		t.Fatalf("A's second write did not land: Ready message %q", got)
	}

	// The member moves to B (a new writer, no cache yet); A may no longer
	// write, but has checked before its pause.
	aAllowed.Store(false)
	b := &leafnode.Writer{Client: client(), Cluster: cluster, Name: leaf, HeartbeatEvery: time.Hour}
	if err := b.Sync(ctx, want("B", false)); err != nil {
		t.Fatal(err)
	}
	byB := get()
	if readyMessageOf(byB) != "B" {
		t.Fatalf("B's write did not land: Ready message %q", readyMessageOf(byB))
	}

	// A resumes: its status write, then its taint write, decided from its
	// stale cache, must not land.
	for _, d := range []leafnode.Desired{want("A resumed", false), want("A resumed", true)} {
		asked := aAsked.Load()
		_ = a.Sync(ctx, d) // refused: an error or nothing, but no write
		after := get()
		if after.ResourceVersion != byB.ResourceVersion {
			t.Fatalf("the resumed writer's write landed over the new writer's: Ready message %q, taints %v", readyMessageOf(after), after.Spec.Taints)
		}
		if aAsked.Load() == asked {
			t.Fatalf("the resumed writer's write was refused, but it was never asked again whether it may write")
		}
	}

	// The leaf's node Lease: A renews, B renews, A (checked before its
	// pause) renews again: refused.
	aOwnedChecks := atomic.Int32{}
	var aOwned atomic.Bool
	aOwned.Store(true)
	hbA := &leafnode.Heartbeat{Client: client(), Cluster: cluster, Name: leaf, Duration: 40 * time.Second, Timeout: 10 * time.Second, Log: logr.Discard(),
		Owned: func() bool { aOwnedChecks.Add(1); return aOwned.Load() }}
	hbB := &leafnode.Heartbeat{Client: client(), Cluster: cluster, Name: leaf, Duration: 40 * time.Second, Timeout: 10 * time.Second, Log: logr.Discard()}
	for _, hb := range []*leafnode.Heartbeat{hbA, hbA, hbB} {
		if err := hb.Renew(ctx); err != nil {
			t.Fatal(err)
		}
	}
	lease, err := host.Client().CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, leaf, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A's check before the pause said yes; every later one says no.
	first := true
	hbA.Owned = func() bool {
		aOwnedChecks.Add(1)
		ok := first
		first = false
		return ok
	}
	checks := aOwnedChecks.Load()
	_ = hbA.Renew(ctx)
	after, err := host.Client().CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, leaf, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != lease.ResourceVersion {
		t.Fatalf("the resumed writer renewed the leaf Lease over the new writer's renewal: renewTime %v -> %v", lease.Spec.RenewTime, after.Spec.RenewTime)
	}
	if aOwnedChecks.Load()-checks < 2 {
		t.Fatalf("the resumed writer's renewal was refused, but it was never asked again whether it may renew")
	}
	// B keeps renewing without a conflict, and without a read.
	if err := hbB.Renew(ctx); err != nil {
		t.Fatal(err)
	}
}
