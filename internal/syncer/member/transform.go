package member

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"unique"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// transform is the informer transform of a member: it keeps of each
// object only what leafsync reads (listed, reader by reader, in
// transform_test.go's TestTransformKeepsWhatReadersRead), before objects
// enter the cache, so that memory per member stays small.
//
//   - Nodes keep their name, labels and leafsync.io/ annotations,
//     unschedulable, allocatable, the type and status of their conditions,
//     kubelet version, OS and architecture, and declared features: what
//     the leaf's aggregation reads. Conditions and allocatable lists are
//     shared between nodes that report the same.
//   - Pods leafsync synced (IsLeafsyncPod) keep everything but managed
//     fields and the last-applied annotation: the pod syncer mirrors their
//     status to the host.
//   - Every other pod, most of a member, becomes a ForeignPod: its
//     name and its usage (node, phase, effective requests, shared
//     between pods that request the same), not in the namespace index
//     (syncedNamespace): about 230 bytes in all, where the smallest
//     *corev1.Pod took 1,500 (TestCacheFootprint).
func transform(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Node:
		return stripNode(o), nil
	case *corev1.Pod:
		if !IsLeafsyncPod(o) {
			return foreignPod(o), nil
		}
		o.ManagedFields = nil
		delete(o.Annotations, corev1.LastAppliedConfigAnnotation)
	}
	return obj, nil
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

func stripNode(n *corev1.Node) *corev1.Node {
	info := n.Status.NodeInfo
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion,
			CreationTimestamp: n.CreationTimestamp, DeletionTimestamp: n.DeletionTimestamp,
			Labels: internLabels(n.Labels), Annotations: keepLeafsyncKeys(n.Annotations),
		},
		Spec: corev1.NodeSpec{Unschedulable: n.Spec.Unschedulable},
		Status: corev1.NodeStatus{
			Allocatable: requestShapes.intern(n.Status.Allocatable),
			Conditions:  conditionShapes.intern(n.Status.Conditions),
			NodeInfo: corev1.NodeSystemInfo{KubeletVersion: intern(info.KubeletVersion),
				OperatingSystem: intern(info.OperatingSystem), Architecture: intern(info.Architecture)},
			DeclaredFeatures: n.Status.DeclaredFeatures,
		},
	}
}

// intern returns the one copy of s that every member's cache shares: a
// decoded object's strings are allocations of their own, and most of a
// node's labels, its OS and version, a pod's namespace, node and phase,
// repeat across the objects of a member and across members.
func intern(s string) string { return unique.Make(s).Value() }

// internLabels keeps a node's labels with shared keys and values (a
// hostname label's value is the node's own; the keys and the other values
// repeat from node to node).
func internLabels(l map[string]string) map[string]string {
	if len(l) == 0 {
		return nil
	}
	out := make(map[string]string, len(l))
	for k, v := range l {
		out[intern(k)] = intern(v)
	}
	return out
}

// Cached objects are never modified, so objects that hold the same list
// can share one. Most pods of a workload request the same, and most nodes
// of a member offer the same and report the same conditions.
var (
	requestShapes   = resourceShapes{&shapes[corev1.ResourceList]{}}
	conditionShapes = conditionShapeSet{&shapes[[]corev1.NodeCondition]{}}
)

// maxShapes bounds each set: past it, new shapes are kept unshared.
const maxShapes = 4096

type shapes[T any] struct {
	mu sync.Mutex
	m  map[string]T
}

func (s *shapes[T]) intern(key string, v T) T {
	s.mu.Lock()
	defer s.mu.Unlock()
	if shared, ok := s.m[key]; ok {
		return shared
	}
	if s.m == nil {
		s.m = map[string]T{}
	}
	if len(s.m) < maxShapes {
		s.m[key] = v
	}
	return v
}

type resourceShapes struct{ *shapes[corev1.ResourceList] }

func (s resourceShapes) intern(rl corev1.ResourceList) corev1.ResourceList {
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
	return s.shapes.intern(b.String(), rl)
}

// conditionShapeSet keeps of node conditions their type and status, what
// the leaf reads (reasons, messages and times differ from node to node and
// change at every heartbeat).
type conditionShapeSet struct {
	*shapes[[]corev1.NodeCondition]
}

func (s conditionShapeSet) intern(conds []corev1.NodeCondition) []corev1.NodeCondition {
	if len(conds) == 0 {
		return nil
	}
	var b strings.Builder
	kept := make([]corev1.NodeCondition, len(conds))
	for i, c := range conds {
		kept[i] = corev1.NodeCondition{Type: c.Type, Status: c.Status}
		b.WriteString(string(c.Type))
		b.WriteByte('=')
		b.WriteString(string(c.Status))
		b.WriteByte(';')
	}
	return s.shapes.intern(b.String(), kept)
}
