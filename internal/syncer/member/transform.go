package member

import (
	"maps"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/leafsync/leafsync/internal/leafnode"
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

// transform returns the informer transform of a member: it strips what
// leafsync does not need before objects enter the cache, so that memory per
// member stays small.
//
//   - Nodes keep metadata (labels, leafsync.io/ annotations), spec, and
//     status capacity, allocatable, conditions, addresses and node info;
//     images and volume lists (the bulk of a Node) are dropped.
//   - Pods leafsync synced (isSynced; IsLeafsyncPod when nil) keep
//     everything but managed fields and the last-applied annotation: the
//     pod syncer mirrors their status to the host.
//   - Every other pod is kept only for resource accounting: name, node,
//     phase, and its effective requests (summarised, shared between pods
//     that request the same); the rest is dropped: about half the memory a
//     pod with only its containers' resources took, and no requests
//     arithmetic at every leaf recompute.
func transform(isSynced func(*corev1.Pod) bool) cache.TransformFunc {
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

func keepLeafsyncKeys(m map[string]string) map[string]string {
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
	m.Annotations = keepLeafsyncKeys(m.Annotations)
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

// stripPod keeps of a pod leafsync did not place what leaf accounting
// reads: where it runs, whether it has finished, and its effective
// requests (leafnode.SummarizeRequests), shared with every pod that
// requests the same. Labels and annotations keep only leafsync's own.
func stripPod(p *corev1.Pod) {
	leafnode.SummarizeRequests(p)
	p.ObjectMeta = metav1.ObjectMeta{
		Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
		CreationTimestamp: p.CreationTimestamp, DeletionTimestamp: p.DeletionTimestamp,
		Labels: keepLeafsyncKeys(p.Labels), Annotations: keepLeafsyncKeys(p.Annotations),
	}
	p.Spec = corev1.PodSpec{NodeName: p.Spec.NodeName, Overhead: requestShapes.intern(p.Spec.Overhead)}
	p.Status = corev1.PodStatus{Phase: p.Status.Phase}
}

// requestShapes shares one read-only ResourceList among the cached pods
// that request the same, as most pods of a workload do: the list is
// most of what a summarised pod weighs (~900 of ~2,600 bytes). Cached
// objects are never modified, so sharing is safe. Bounded: past maxShapes
// distinct shapes, new ones are kept unshared.
var requestShapes = &shapes{m: map[string]corev1.ResourceList{}}

const maxShapes = 4096

type shapes struct {
	mu sync.Mutex
	m  map[string]corev1.ResourceList
}

func (s *shapes) intern(rl corev1.ResourceList) corev1.ResourceList {
	if len(rl) == 0 {
		return nil
	}
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(rl)) {
		q := rl[name]
		b.WriteString(string(name))
		b.WriteByte('=')
		b.WriteString(q.String())
		b.WriteByte(';')
	}
	key := b.String()
	s.mu.Lock()
	defer s.mu.Unlock()
	if shared, ok := s.m[key]; ok {
		return shared
	}
	if len(s.m) < maxShapes {
		s.m[key] = rl
	}
	return rl
}
