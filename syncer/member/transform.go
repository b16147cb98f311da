package member

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// LeafsyncPrefix is the prefix of labels and annotations leafsync keeps on
// member objects.
const LeafsyncPrefix = "leafsync.io/"

// IsLeafsyncPod is the default test for a pod leafsync synced into the
// member: it carries a label with the leafsync.io/ prefix.
func IsLeafsyncPod(p *corev1.Pod) bool {
	for k := range p.Labels {
		if strings.HasPrefix(k, LeafsyncPrefix) {
			return true
		}
	}
	return false
}

// Transform returns the informer transform of a member: it strips what
// leafsync does not need before objects enter the cache, so that memory per
// member stays small.
//
//   - Nodes keep metadata (labels, leafsync.io/ annotations), spec, and
//     status capacity, allocatable, conditions, addresses and node info;
//     images and volume lists (the bulk of a Node) are dropped.
//   - Pods leafsync synced (isSynced; IsLeafsyncPod when nil) keep
//     everything but managed fields and the last-applied annotation: the
//     pod syncer mirrors their status to the host.
//   - Every other pod is kept only for resource accounting: name, labels,
//     node, phase, QoS class, and per-container resources; the rest is
//     dropped.
func Transform(isSynced func(*corev1.Pod) bool) cache.TransformFunc {
	if isSynced == nil {
		isSynced = IsLeafsyncPod
	}
	return func(obj any) (any, error) {
		switch o := obj.(type) {
		case *corev1.Node:
			stripNode(o)
		case *corev1.Pod:
			if isSynced(o) {
				o.ManagedFields = nil
				delete(o.Annotations, corev1.LastAppliedConfigAnnotation)
			} else {
				stripPod(o)
			}
		}
		return obj, nil
	}
}

func keepLeafsyncAnnotations(m map[string]string) map[string]string {
	var kept map[string]string
	for k, v := range m {
		if strings.HasPrefix(k, LeafsyncPrefix) {
			if kept == nil {
				kept = map[string]string{}
			}
			kept[k] = v
		}
	}
	return kept
}

func stripMeta(m *metav1.ObjectMeta) {
	m.ManagedFields = nil
	m.Annotations = keepLeafsyncAnnotations(m.Annotations)
	m.OwnerReferences = nil
	m.Finalizers = nil
}

func stripNode(n *corev1.Node) {
	stripMeta(&n.ObjectMeta)
	n.Status.Images = nil
	n.Status.VolumesInUse = nil
	n.Status.VolumesAttached = nil
	n.Status.Config = nil
	n.Status.RuntimeHandlers = nil
	n.Status.DeclaredFeatures = nil
	for i := range n.Status.Conditions {
		// Heartbeat times change every few seconds and nobody reads them.
		n.Status.Conditions[i].LastHeartbeatTime = metav1.Time{}
	}
}

func stripContainers(cs []corev1.Container) []corev1.Container {
	if len(cs) == 0 {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i, c := range cs {
		out[i] = corev1.Container{Name: c.Name, Resources: c.Resources, RestartPolicy: c.RestartPolicy}
	}
	return out
}

func stripPod(p *corev1.Pod) {
	stripMeta(&p.ObjectMeta)
	p.Spec = corev1.PodSpec{
		NodeName:       p.Spec.NodeName,
		Containers:     stripContainers(p.Spec.Containers),
		InitContainers: stripContainers(p.Spec.InitContainers),
		Overhead:       p.Spec.Overhead,
		Resources:      p.Spec.Resources,
		Priority:       p.Spec.Priority,
	}
	p.Status = corev1.PodStatus{Phase: p.Status.Phase, QOSClass: p.Status.QOSClass}
}
