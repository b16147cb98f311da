package leafnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
)

// AnnotationWriter, on a leaf Node and its Lease, names the member's writer
// that last took the member (sharded replicas): "<incarnation>/<term>",
// written by Fence.
const AnnotationWriter = "leafsync.io/writer"

// Fence is the first write of a member's new writer (sharded replicas):
// made once the writer took the member, before it acts on it.
//
// Writer and Heartbeat carry the version of the leaf Node and of its Lease
// as their writer last wrote them, so that a former writer's write checked
// before a pause and sent after the new writer wrote is refused. But
// between the take and the new writer's first write nothing changes those
// versions, and the new writer may not write for long (a leaf whose status
// is already as wanted, a Lease not renewed while NotReady). Fence changes
// them at once: it writes the leaf Node and its Lease once each, setting
// AnnotationWriter, so that every version a former writer holds is stale.
//
// The Node is written at the version read (the cache, or a GET if the
// cache lacks it), once more after a fresh read if that conflicts; the
// Lease by a merge patch of the annotation, without a version: its only
// purpose is the new version, and it saves the read, so both writes go out
// together and the take costs one round trip more. A leaf not made yet,
// or a Node that is not the cluster's leaf, is not written; a Lease not
// made yet neither.
type Fence struct {
	// Client writes the Node.
	Client kubernetes.Interface
	// Leases writes the Lease (nil: Client).
	Leases kubernetes.Interface
	// Nodes reads the Node from a synced informer cache (nil: a GET).
	Nodes corelisters.NodeLister
}

// Write fences the leaf name of cluster for writer.
func (f Fence) Write(ctx context.Context, cluster, name, writer string) error {
	node, err := f.read(ctx, name)
	if apierrors.IsNotFound(err) {
		return nil // no leaf yet: no version to make stale
	}
	if err != nil {
		return fmt.Errorf("fencing leaf node %s: %w", name, err)
	}
	if !Owns(node, cluster) {
		return nil // not the cluster's leaf: never written
	}
	var leaseErr error
	var wg sync.WaitGroup
	wg.Go(func() { leaseErr = f.writeLease(ctx, name, writer) })
	nodeErr := f.writeNode(ctx, cluster, node, writer)
	wg.Wait()
	return errors.Join(nodeErr, leaseErr)
}

// read is the Node from the cache, or from the API server when the cache
// has none (a leaf made a moment ago may not be in it yet).
func (f Fence) read(ctx context.Context, name string) (*corev1.Node, error) {
	if f.Nodes != nil {
		if n, err := f.Nodes.Get(name); err == nil {
			return n, nil
		}
	}
	return f.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
}

// writeNode sets the annotation at node's version; after a conflict (a
// stale cache, KCM, the former writer's last write) once more at a
// version read afresh.
func (f Fence) writeNode(ctx context.Context, cluster string, node *corev1.Node, writer string) error {
	name := node.Name
	err := f.annotateNode(ctx, node, writer)
	if apierrors.IsConflict(err) {
		node, err = f.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err == nil && !Owns(node, cluster):
			return nil
		case err == nil:
			err = f.annotateNode(ctx, node, writer)
		}
	}
	if err != nil {
		return fmt.Errorf("fencing leaf node %s: %w", name, err)
	}
	return nil
}

func (f Fence) annotateNode(ctx context.Context, node *corev1.Node, writer string) error {
	upd := node.DeepCopy()
	if upd.Annotations == nil {
		upd.Annotations = map[string]string{}
	}
	upd.Annotations[AnnotationWriter] = writer
	_, err := f.Client.CoreV1().Nodes().Update(ctx, upd, metav1.UpdateOptions{FieldManager: fieldManager})
	return err
}

func (f Fence) writeLease(ctx context.Context, name, writer string) error {
	c := f.Leases
	if c == nil {
		c = f.Client
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{AnnotationWriter: writer}}})
	if err != nil {
		return err
	}
	_, err = c.CoordinationV1().Leases(corev1.NamespaceNodeLease).Patch(ctx, name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: fieldManager})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("fencing the lease of leaf node %s: %w", name, err)
	}
	return nil
}
