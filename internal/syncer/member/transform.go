package member

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"unique"

	corev1 "k8s.io/api/core/v1"
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
//   - A node becomes a leafnode.MemberNode, what the leaf's aggregation
//     and the verifier read: its name, labels, unschedulable, allocatable,
//     whether it is Ready and under each pressure, kubelet version, OS and
//     architecture, and declared features (cachedNode). Label sets (but
//     the hostname), allocatable lists and features are shared between
//     nodes that report the same: about 240 bytes a node in all, where
//     the stripped *corev1.Node took 1,380 (TestCacheFootprint).
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
		return memberNode(o), nil
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

// intern returns the one copy of s that every member's cache shares: a
// decoded object's strings are allocations of their own, and most of a
// node's labels, its OS and version, a pod's namespace, node and phase,
// repeat across the objects of a member and across members.
func intern(s string) string { return unique.Make(s).Value() }

// Cached objects are never modified, so objects that hold the same list
// can share one. Most pods of a workload request the same, and most nodes
// of a member offer the same, carry the same labels but their hostname,
// and declare the same features.
var (
	requestShapes = resourceShapes{&shapes[corev1.ResourceList]{}}
	labelShapes   = labelShapeSet{&shapes[map[string]string]{}}
	featureShapes = featureShapeSet{&shapes[[]string]{}}
)

// maxShapes bounds each set: past it, new shapes are kept unshared.
const maxShapes = 4096

type shapes[T any] struct {
	mu sync.Mutex
	m  map[string]T
}

// intern returns the shared value of key, made by mk if there is none.
func (s *shapes[T]) intern(key string, mk func() T) T {
	s.mu.Lock()
	defer s.mu.Unlock()
	if shared, ok := s.m[key]; ok {
		return shared
	}
	if s.m == nil {
		s.m = map[string]T{}
	}
	v := mk()
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
	return s.shapes.intern(b.String(), func() corev1.ResourceList { return rl })
}

// labelShapeSet shares label sets, their keys and values interned (label
// keys and values hold no '=' or ';').
type labelShapeSet struct{ *shapes[map[string]string] }

func (s labelShapeSet) intern(l map[string]string) map[string]string {
	if len(l) == 0 {
		return nil
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(l)) {
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(l[k])
		b.WriteByte(';')
	}
	return s.shapes.intern(b.String(), func() map[string]string {
		kept := make(map[string]string, len(l))
		for k, v := range l {
			kept[intern(k)] = intern(v)
		}
		return kept
	})
}

// featureShapeSet shares lists of declared features (feature names are
// identifiers: no ';').
type featureShapeSet struct{ *shapes[[]string] }

func (s featureShapeSet) intern(features []string) []string {
	if len(features) == 0 {
		return nil
	}
	return s.shapes.intern(strings.Join(features, ";"), func() []string { return features })
}
