package leafnode

import (
	corev1 "k8s.io/api/core/v1"
)

// MemberNode is what a leaf reads of a member node: whether it counts
// (Ready, schedulable, matching the registration's node selector), what it
// offers, and what the leaf reports of it. The member's cache keeps this
// record instead of the Node (internal/syncer/member's transform), as it
// keeps a PodUsage of each pod leafsync did not place. Read-only: the cache
// shares label sets, allocatable lists and features between the nodes that
// report the same.
type MemberNode struct {
	Name   string
	Labels NodeLabels
	// Unschedulable is spec.unschedulable (cordoned).
	Unschedulable bool
	// Ready and the pressures are whether the node's condition of that
	// type is True: the only conditions, and the only status, the leaf
	// reads.
	Ready, MemoryPressure, DiskPressure, PIDPressure bool
	Allocatable                                      corev1.ResourceList
	KubeletVersion, OperatingSystem, Architecture    string
	DeclaredFeatures                                 []string
}

// MemberNodeOf reduces a node to its MemberNode (the member's cache does it
// once, as a node enters it).
func MemberNodeOf(n *corev1.Node) *MemberNode {
	info := n.Status.NodeInfo
	m := &MemberNode{
		Name: n.Name, Labels: NodeLabelsOf(n.Name, n.Labels), Unschedulable: n.Spec.Unschedulable,
		Allocatable: n.Status.Allocatable, DeclaredFeatures: n.Status.DeclaredFeatures,
		KubeletVersion: info.KubeletVersion, OperatingSystem: info.OperatingSystem, Architecture: info.Architecture,
	}
	for _, c := range n.Status.Conditions {
		if p := m.condition(c.Type); p != nil {
			*p = c.Status == corev1.ConditionTrue
		}
	}
	return m
}

// ConditionTrue reports whether the node's condition typ is True; of the
// conditions a MemberNode keeps (Ready and the pressures), others are
// never True.
func (n *MemberNode) ConditionTrue(typ corev1.NodeConditionType) bool {
	p := n.condition(typ)
	return p != nil && *p
}

func (n *MemberNode) condition(typ corev1.NodeConditionType) *bool {
	switch typ {
	case corev1.NodeReady:
		return &n.Ready
	case corev1.NodeMemoryPressure:
		return &n.MemoryPressure
	case corev1.NodeDiskPressure:
		return &n.DiskPressure
	case corev1.NodePIDPressure:
		return &n.PIDPressure
	}
	return nil
}

// NodeLabels are a node's labels, as a labels.Labels for selectors: the
// hostname label apart, since its value is the node's own (most often its
// name), and the others in a map that the member's cache shares between
// nodes that carry the same (a pool's nodes do).
type NodeLabels struct {
	// Shared are the labels but kubernetes.io/hostname. Read-only.
	Shared map[string]string
	// Hostname is the kubernetes.io/hostname label's value, if HasHostname.
	Hostname    string
	HasHostname bool
}

// NodeLabelsOf splits the labels of the node called name. A hostname
// equal to the name costs nothing more than the name.
func NodeLabelsOf(name string, labels map[string]string) NodeLabels {
	host, ok := labels[corev1.LabelHostname]
	if !ok {
		return NodeLabels{Shared: labels}
	}
	if host == name {
		host = name
	}
	shared := make(map[string]string, len(labels)-1)
	for k, v := range labels {
		if k != corev1.LabelHostname {
			shared[k] = v
		}
	}
	return NodeLabels{Shared: shared, Hostname: host, HasHostname: true}
}

// Has reports whether the node has label key (labels.Labels).
func (l *NodeLabels) Has(key string) bool {
	_, ok := l.Lookup(key)
	return ok
}

// Get is the value of label key, "" if the node has none (labels.Labels).
func (l *NodeLabels) Get(key string) string {
	v, _ := l.Lookup(key)
	return v
}

// Lookup is the value of label key and whether the node has it
// (labels.Labels).
func (l *NodeLabels) Lookup(key string) (string, bool) {
	if key == corev1.LabelHostname {
		return l.Hostname, l.HasHostname
	}
	v, ok := l.Shared[key]
	return v, ok
}
