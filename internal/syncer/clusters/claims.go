package clusters

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/leafsync/leafsync/internal/syncer/registration"
)

// Claims: when two registrations claim the same cluster name or leaf name,
// the older Secret keeps it.

// winner returns the Secret that owns a cluster name: the oldest, then the
// first by name.
func (c *Controller) winner(ctx context.Context, cluster string) (*corev1.Secret, error) {
	var list corev1.SecretList
	if err := c.client.List(ctx, &list, client.InNamespace(c.opts.Namespace), client.MatchingLabels{registration.LabelCluster: cluster}); err != nil {
		return nil, err
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	sort.Slice(list.Items, func(i, j int) bool { return olderThan(&list.Items[i], &list.Items[j]) })
	return &list.Items[0], nil
}

// leafNameRetry: how often a registration refused for its leaf name is
// looked at again.
const leafNameRetry = 30 * time.Second

// checkLeafName refuses a leaf name leafsync may not use. leafsync writes,
// renews and deletes only Nodes (and their Leases and pods) it owns:
//   - a leaf name another cluster's registration uses goes to the older
//     Secret, so the first owner is never disturbed;
//   - a Node of that name that is not this cluster's leaf (no label
//     leafsync.io/cluster=<cluster>: a real worker, another tool's node) is
//     never taken over;
//   - a running member's leaf is not renamed while pods are bound to it
//     (they would be stranded on a leaf nobody serves).
func (c *Controller) checkLeafName(ctx context.Context, s *corev1.Secret, spec *registration.Spec) (Phase, error) {
	reader := c.opts.Reader
	if reader == nil {
		reader = c.client
	}
	leaf := spec.LeafName
	var list corev1.SecretList
	if err := c.client.List(ctx, &list, client.InNamespace(c.opts.Namespace), client.HasLabels{registration.LabelCluster}); err != nil {
		return phaseRefused, &registration.Error{Reason: reasonDuplicateLeafName, Message: fmt.Sprintf("cannot list registrations: %v", err)}
	}
	for i := range list.Items {
		o := &list.Items[i]
		other := o.Labels[registration.LabelCluster]
		if other == spec.Cluster || !o.DeletionTimestamp.IsZero() || leafNameOf(o, other) != leaf || !olderThan(o, s) {
			continue
		}
		return PhaseDuplicate, &registration.Error{Reason: reasonDuplicateLeafName, Message: fmt.Sprintf(
			"Secret %s, created earlier, registers cluster %q with the same leaf name %s, so this Secret is ignored; give one of them another %s",
			client.ObjectKeyFromObject(o), other, leaf, registration.AnnotationLeafName)}
	}
	var node corev1.Node
	switch err := reader.Get(ctx, types.NamespacedName{Name: leaf}, &node); {
	case err == nil && node.Labels[registration.LabelCluster] != spec.Cluster:
		owner := "it is not a leafsync leaf"
		if o := node.Labels[registration.LabelCluster]; o != "" {
			owner = fmt.Sprintf("it is the leaf of cluster %q", o)
		}
		return phaseRefused, &registration.Error{Reason: reasonLeafNameTaken, Message: fmt.Sprintf(
			"Node %s exists and %s: leafsync never writes, renews or deletes a Node it does not own; choose another %s",
			leaf, owner, registration.AnnotationLeafName)}
	case err != nil && !apierrors.IsNotFound(err):
		return phaseRefused, &registration.Error{Reason: reasonLeafNameTaken, Message: fmt.Sprintf("cannot check that Node %s is free: %v", leaf, err)}
	}
	if m, ok := c.reg.Member(spec.Cluster); ok && m.Spec.LeafName != leaf {
		var pods corev1.PodList
		if err := reader.List(ctx, &pods, client.MatchingFields{"spec.nodeName": m.Spec.LeafName}); err != nil {
			return phaseRefused, &registration.Error{Reason: reasonLeafRenameWithPods, Message: fmt.Sprintf("cannot list the pods of leaf %s: %v", m.Spec.LeafName, err)}
		}
		if n := len(pods.Items); n > 0 {
			return phaseRefused, &registration.Error{Reason: reasonLeafRenameWithPods, Message: fmt.Sprintf(
				"the leaf is not renamed from %s to %s while %d pod(s) are bound to it (they would be stranded); the member keeps leaf %s until they are gone",
				m.Spec.LeafName, leaf, n, m.Spec.LeafName)}
		}
	}
	return "", nil
}

// olderThan: a was created before b (ties broken by name), the rule by
// which the first registration keeps what two claim.
func olderThan(a, b *corev1.Secret) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

func leafNameOf(s *corev1.Secret, cluster string) string {
	if v := s.Annotations[registration.AnnotationLeafName]; v != "" {
		return v
	}
	return registration.LeafNamePrefix + cluster
}
