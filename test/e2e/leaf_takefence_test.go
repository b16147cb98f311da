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

	"github.com/leafsync/leafsync/internal/leafnode"
	"github.com/leafsync/leafsync/test/harness"
)

// TestLeafFencedAtTake: the window TestLeafWriteFencedByVersion leaves
// open (#33, docs/scaling.md "Fencing"). The old writer A writes the leaf
// and renews its Lease; the member moves to B, which takes it and has not
// written the leaf otherwise yet (its first sync or renewal is still to
// come); A checked that it may write before its pause and sends its write
// and its renewal after the take. B's take writes the leaf Node and its
// Lease once (leafnode.Fence, what a replica does when it becomes a
// member's writer), so A's versions are stale: both are refused (409),
// and A, asked again after a fresh read, writes nothing more.
func TestLeafFencedAtTake(t *testing.T) {
	host := harness.StartCluster(t, harness.ClusterOptions{Name: "host"})
	ctx := context.Background()
	client := func() kubernetes.Interface { return ownClient(t, host) } // one per writer, as two processes have
	const cluster, leaf = "takefence-1", "leaf-takefence-1"
	// The desired leaf, built by hand: what the writers write matters
	// here, not how leafnode.Compute derives it.
	want := func(msg string) leafnode.Desired {
		res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")}
		return leafnode.Desired{
			Labels:      map[string]string{leafnode.LabelCluster: cluster},
			Capacity:    res,
			Allocatable: res,
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "LeafReady", Message: msg}},
			NodeInfo:    corev1.NodeSystemInfo{KubeletVersion: "v1.35.0", OperatingSystem: "linux", Architecture: "amd64"},
			Ready:       true,
		}
	}
	getNode := func() *corev1.Node {
		n, err := host.Client().CoreV1().Nodes().Get(ctx, leaf, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	getLease := func() string {
		l, err := host.Client().CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, leaf, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return l.ResourceVersion
	}

	// A writes the leaf twice (the second at the version of its first)
	// and renews its Lease twice: A holds the versions it last wrote.
	var aAllowed atomic.Bool
	aAllowed.Store(true)
	var aAsked atomic.Int32
	allowedA := func() bool { aAsked.Add(1); return aAllowed.Load() }
	cacheA := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	a := &leafnode.Writer{Client: client(), Cluster: cluster, Name: leaf, HeartbeatEvery: time.Hour,
		Nodes: corelisters.NewNodeLister(cacheA), Allowed: allowedA}
	if err := a.Sync(ctx, want("A")); err != nil {
		t.Fatal(err)
	}
	if err := cacheA.Add(getNode()); err != nil {
		t.Fatal(err)
	}
	if err := a.Sync(ctx, want("A again")); err != nil {
		t.Fatal(err)
	}
	if err := cacheA.Update(getNode()); err != nil {
		t.Fatal(err)
	}
	hbA := &leafnode.Heartbeat{Client: client(), Cluster: cluster, Name: leaf, Duration: 40 * time.Second, Timeout: 10 * time.Second,
		Log: logr.Discard(), Owned: allowedA}
	for range 2 {
		if err := hbA.Renew(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// The member moves to B: B's take. B writes nothing else.
	aAllowed.Store(false)
	takeB(t, ctx, client(), cluster, leaf)
	nodeAtTake, leaseAtTake := getNode().ResourceVersion, getLease()

	// A resumes: a status write (a change from its stale cache; its caller
	// checked before the pause, the Writer asks only after a fresh read)
	// and a renewal (Renew asks first: yes, as before the pause).
	asked := aAsked.Load()
	_ = a.Sync(ctx, want("A resumed"))
	if n := getNode(); n.ResourceVersion != nodeAtTake {
		t.Errorf("the former writer's leaf write, checked before the take, landed after it: Ready message %q", readyMessageOf(n))
	}
	if aAsked.Load() == asked {
		t.Errorf("the former writer's leaf write was refused, but it was never asked again whether it may write")
	}
	asked = aAsked.Load()
	hbA.Owned = func() bool { aAsked.Add(1); return aAsked.Load() == asked+1 }
	_ = hbA.Renew(ctx)
	if rv := getLease(); rv != leaseAtTake {
		t.Errorf("the former writer's renewal of the leaf Lease, checked before the take, landed after it")
	}
	if aAsked.Load() < asked+2 {
		t.Errorf("the former writer's renewal was refused, but it was never asked again whether it may renew")
	}
}

// takeB is what a replica does to the leaf when it becomes the member's
// writer, before it acts on the member (clusters: the take, then the
// leaves' Fence): it writes the leaf Node and its Lease once, naming
// itself.
func takeB(t *testing.T, ctx context.Context, c kubernetes.Interface, cluster, leaf string) {
	t.Helper()
	const writer = "replica-b-0a1b2c3d/2"
	if err := (leafnode.Fence{Client: c}).Write(ctx, cluster, leaf, writer); err != nil {
		t.Fatal(err)
	}
	n, err := c.CoreV1().Nodes().Get(ctx, leaf, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, leaf, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Annotations[leafnode.AnnotationWriter] != writer || l.Annotations[leafnode.AnnotationWriter] != writer {
		t.Fatalf("the take does not name its writer: Node %q, Lease %q", n.Annotations[leafnode.AnnotationWriter], l.Annotations[leafnode.AnnotationWriter])
	}
}

// ownClient is a host client of its own, as another process has.
func ownClient(t *testing.T, host *harness.Cluster) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(host.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// readyMessageOf is the message of the node's Ready condition.
func readyMessageOf(n *corev1.Node) string {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Message
		}
	}
	return ""
}
