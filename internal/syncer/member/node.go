package member

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/leafsync/leafsync/internal/leafnode"
)

// cachedNode is what a member's cache keeps of a node: what the leaf
// reads of it (leafnode.MemberNode), about a sixth of the stripped
// *corev1.Node it kept before (TestCacheFootprint), and its resource
// version, by which the informer tells a change from a resync.
type cachedNode struct {
	leafnode.MemberNode
	resourceVersion string
}

// GetObjectMeta makes a cachedNode an object the informer's store can key
// (meta.Accessor).
func (n *cachedNode) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Name: n.Name, ResourceVersion: n.resourceVersion}
}

// memberNode reduces a node to its cache entry, with what repeats from
// node to node shared: label sets but the hostname, allocatable, versions
// and features.
func memberNode(n *corev1.Node) *cachedNode {
	m := leafnode.MemberNodeOf(n)
	m.Labels.Shared = labelShapes.intern(m.Labels.Shared)
	m.Allocatable = requestShapes.intern(m.Allocatable)
	m.DeclaredFeatures = featureShapes.intern(m.DeclaredFeatures)
	m.KubeletVersion, m.OperatingSystem, m.Architecture = intern(m.KubeletVersion), intern(m.OperatingSystem), intern(m.Architecture)
	return &cachedNode{MemberNode: *m, resourceVersion: n.ResourceVersion}
}

// memberNodes are the cached nodes as the leaf reads them.
func memberNodes(store cache.Store) []*leafnode.MemberNode {
	return entries(store, func(n *cachedNode) *leafnode.MemberNode { return &n.MemberNode })
}
