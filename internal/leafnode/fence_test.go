package leafnode

import (
	"context"
	"errors"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

// TestFenceWritesNodeAndLease: a member's new writer writes the leaf Node
// and its Lease once each, naming itself, so that their versions change
// before it acts (a former writer's versions are stale from then on); a
// leaf that is missing or not the cluster's is not written.
func TestFenceWritesNodeAndLease(t *testing.T) {
	ctx := context.Background()
	const cluster, name, writer = "east", "leaf-east", "replica-b-0a1b2c3d/7"
	leafNode := func(labels map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, ResourceVersion: "10",
			Annotations: map[string]string{"someone": "else"}}}
	}
	leaf := leafNode(map[string]string{LabelCluster: cluster})
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: corev1.NamespaceNodeLease,
		Labels: map[string]string{LabelCluster: cluster}}}
	lister := func(nodes ...*corev1.Node) corelisters.NodeLister {
		idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
		for _, n := range nodes {
			if err := idx.Add(n); err != nil {
				t.Fatal(err)
			}
		}
		return corelisters.NewNodeLister(idx)
	}
	annotations := func(t *testing.T, client *fake.Clientset) (node, lease string) {
		t.Helper()
		n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n.Annotations["someone"] != "else" {
			t.Errorf("another actor's annotation on the Node is gone: %v", n.Annotations)
		}
		l, err := client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return n.Annotations[AnnotationWriter], l.Annotations[AnnotationWriter]
	}
	writes := func(client *fake.Clientset) int {
		return countVerb(client, "update") + countVerb(client, "patch") + countVerb(client, "create") +
			countVerb(client, "update", "leases") + countVerb(client, "patch", "leases") + countVerb(client, "create", "leases")
	}

	t.Run("leaf and lease: both written, the Node from the cache", func(t *testing.T) {
		client := fake.NewClientset(leaf.DeepCopy(), lease.DeepCopy())
		if err := (Fence{Client: client, Nodes: lister(leaf)}).Write(ctx, cluster, name, writer); err != nil {
			t.Fatal(err)
		}
		if got := countVerb(client, "get") + countVerb(client, "get", "leases"); got != 0 {
			t.Errorf("%d reads, want none (the Node from the cache, the Lease patched)", got)
		}
		if got := countVerb(client, "update") + countVerb(client, "patch", "leases"); got != 2 {
			t.Errorf("%d writes, want one of the Node and one of the Lease", got)
		}
		if n, l := annotations(t, client); n != writer || l != writer {
			t.Errorf("writer annotations: Node %q, Lease %q; want %q on both", n, l, writer)
		}
	})

	t.Run("a stale cache: the Node read again and written", func(t *testing.T) {
		client := fake.NewClientset(leaf.DeepCopy(), lease.DeepCopy())
		conflicts := 0
		client.PrependReactor("update", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
			if conflicts > 0 {
				return false, nil, nil
			}
			conflicts++
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, name, errors.New("stale"))
		})
		if err := (Fence{Client: client, Nodes: lister(leaf)}).Write(ctx, cluster, name, writer); err != nil {
			t.Fatal(err)
		}
		if n, _ := annotations(t, client); n != writer {
			t.Errorf("Node's writer annotation %q after a conflict, want %q", n, writer)
		}
	})

	t.Run("a leaf not in the cache yet: read from the API server", func(t *testing.T) {
		client := fake.NewClientset(leaf.DeepCopy())
		if err := (Fence{Client: client, Nodes: lister()}).Write(ctx, cluster, name, writer); err != nil {
			t.Fatal(err)
		}
		if n, _ := annotations(t, client); n != writer {
			t.Errorf("Node's writer annotation %q, want %q", n, writer)
		}
	})

	t.Run("no leaf: nothing written", func(t *testing.T) {
		client := fake.NewClientset(lease.DeepCopy())
		if err := (Fence{Client: client, Nodes: lister()}).Write(ctx, cluster, name, writer); err != nil {
			t.Fatal(err)
		}
		if n := writes(client); n != 0 {
			t.Errorf("%d writes without a leaf", n)
		}
	})

	t.Run("a Node not the cluster's leaf: nothing written", func(t *testing.T) {
		other := leafNode(map[string]string{LabelCluster: "west"})
		client := fake.NewClientset(other, lease.DeepCopy())
		if err := (Fence{Client: client}).Write(ctx, cluster, name, writer); err != nil {
			t.Fatal(err)
		}
		if n := writes(client); n != 0 {
			t.Errorf("%d writes of a Node that is not the cluster's leaf", n)
		}
	})

	t.Run("the Lease write fails: an error, so the writer does not act yet", func(t *testing.T) {
		client := fake.NewClientset(leaf.DeepCopy(), lease.DeepCopy())
		client.PrependReactor("patch", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewServiceUnavailable("host unreachable")
		})
		if err := (Fence{Client: client, Nodes: lister(leaf)}).Write(ctx, cluster, name, writer); err == nil {
			t.Fatal("a failed Lease write reported as done")
		}
	})
}
