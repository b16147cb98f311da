package leafnode

import (
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/component-helpers/nodedeclaredfeatures/features/inplacepodresize"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/leafsync/leafsync/hysteresis"
)

// Labels, taints and names leafsync puts on leaf nodes.
const (
	// LabelCluster names the member a leaf stands for.
	LabelCluster = "leafsync.io/cluster"
	// TaintLeaf keeps pods that do not tolerate it off leaves (optional).
	TaintLeaf = "leafsync.io/leaf"
	// TaintUnreachable cordons a leaf while the engine says Cordoned: new
	// pods stay away, running ones are untouched.
	TaintUnreachable = "leafsync.io/unreachable"
	// TaintUnverified keeps new pods off a leaf until leafsync has shown
	// the member can run them (internal/syncer/verify): its value names
	// the failed checks, or "pending". Running pods are untouched.
	TaintUnverified = "leafsync.io/unverified"
	// fieldManager is leafsync's name in managedFields and patches.
	fieldManager = "leafsync"
	// containerRuntime is what leaves report as their container runtime.
	containerRuntime = "leafsync://member-cluster"
)

// Condition reasons on a leaf's Ready condition.
const (
	ReasonMemberReachable   = "MemberReachable"
	ReasonMemberSuspect     = "MemberUnreachableTolerated"
	ReasonMemberUnreachable = "MemberUnreachable"
	ReasonMemberRecovering  = "MemberRecovering"
	reasonMemberPressure    = "MemberUnderPressure"
	reasonNoPressure        = "MemberHasNoPressure"
)

// Options shape every leaf.
type Options struct {
	// LeafTaint adds leafsync.io/leaf=true:NoSchedule, so that only pods
	// that tolerate it land on leaves.
	LeafTaint bool
	// NodeSelector restricts which member nodes count (nil: all).
	NodeSelector labels.Selector
	// IsSyncedPod tells pods leafsync placed in the member: their requests
	// are already accounted for by the host's scheduler on the leaf.
	IsSyncedPod func(*corev1.Pod) bool
}

// Input is everything a leaf's desired state depends on.
type Input struct {
	Cluster  string
	LeafName string
	// MemberNodes come from the member's node informer, as its cache
	// keeps them (MemberNodeOf).
	MemberNodes []*MemberNode
	// MemberPods are member pods in full (the member's cache keeps those
	// leafsync placed so).
	MemberPods []*corev1.Pod
	// ForeignUsage is what the member's pods leafsync did not place
	// request, by node (Usage.Snapshot): counted like MemberPods that are
	// not synced. Read-only.
	ForeignUsage map[string]NodeSum
	// Status is the hysteresis engine's decision for the member.
	Status hysteresis.Status
	// Config is the member's effective thresholds (for messages).
	Config hysteresis.Config
	// Unverified, when not empty, is the leafsync.io/unverified taint's
	// value: the member is not (or no longer) verified to run new pods.
	// It never changes the leaf's readiness.
	Unverified string
	Options
}

// Desired is what leafsync owns on a leaf Node. Everything else on the Node
// (other actors' labels, taints and conditions) is left alone.
type Desired struct {
	Labels map[string]string
	Taints []corev1.Taint // leafsync's taints that must be present
	// Capacity and Allocatable are nil when unknown (the member's caches
	// have not synced yet): the leaf keeps what it has.
	Capacity    corev1.ResourceList
	Allocatable corev1.ResourceList
	// nodes is the counted member nodes' allocatable before the member's
	// own pods are taken off: not written, it tells the writer a change of
	// the member's nodes (written at once) from its pods coming and going
	// (written at most every Writer.AllocatableEvery).
	nodes corev1.ResourceList
	// Conditions carry no timestamps; the writer fills them in.
	Conditions []corev1.NodeCondition
	NodeInfo   corev1.NodeSystemInfo
	// DeclaredFeatures are the node features the leaf declares, sorted
	// (declaredFeatures).
	DeclaredFeatures []string
	// Ready is whether the Lease should be renewed.
	Ready bool
}

// ownedTaintKeys are the taint keys leafsync adds and removes.
var ownedTaintKeys = []string{TaintLeaf, TaintUnreachable, TaintUnverified}

// Compute derives a leaf's desired state. It is pure: same input, same output.
func Compute(in Input) Desired {
	nodes := countedNodes(in.MemberNodes, in.NodeSelector)
	gross, alloc := aggregate(nodes, in.MemberPods, in.ForeignUsage, in.IsSyncedPod)
	d := Desired{
		Labels:           leafLabels(in.Cluster, in.LeafName, nodes),
		Capacity:         alloc,
		Allocatable:      alloc.DeepCopy(),
		nodes:            gross,
		NodeInfo:         nodeInfo(nodes),
		DeclaredFeatures: declaredFeatures(nodes),
		Ready:            in.Status.State.LeafReady(),
	}
	if in.LeafTaint {
		d.Taints = append(d.Taints, corev1.Taint{Key: TaintLeaf, Value: "true", Effect: corev1.TaintEffectNoSchedule})
	}
	if in.Status.Cordoned {
		d.Taints = append(d.Taints, corev1.Taint{Key: TaintUnreachable, Value: in.Status.Reason, Effect: corev1.TaintEffectNoSchedule})
	}
	if in.Unverified != "" {
		d.Taints = append(d.Taints, corev1.Taint{Key: TaintUnverified, Value: in.Unverified, Effect: corev1.TaintEffectNoSchedule})
	}
	d.Conditions = append([]corev1.NodeCondition{readyCondition(in)}, pressureConditions(nodes)...)
	return d
}

// countedNodes are the member nodes whose capacity the leaf offers: Ready,
// schedulable, and matching the selector.
func countedNodes(all []*MemberNode, sel labels.Selector) []*MemberNode {
	var out []*MemberNode
	for _, n := range all {
		if n.Unschedulable || !n.Ready {
			continue
		}
		if sel != nil && !sel.Matches(&n.Labels) {
			continue
		}
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// aggregate sums allocatable over the counted nodes (gross) and subtracts
// what non-terminal pods not placed by leafsync request on them (one "pods"
// each): the full pods that are not synced, and the foreign pods' sums.
func aggregate(nodes []*MemberNode, pods []*corev1.Pod, foreign map[string]NodeSum, isSynced func(*corev1.Pod) bool) (gross, total corev1.ResourceList) {
	total = corev1.ResourceList{}
	onCounted := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		onCounted[n.Name] = true
		for name, q := range n.Allocatable {
			add(total, name, q)
		}
	}
	gross = total.DeepCopy()
	// Subtracting sums instead of each pod changes nothing: requests are
	// never negative, so either way the result is max(0, total - all).
	for _, p := range pods {
		if isSynced == nil || !isSynced(p) {
			if u := UsageOf(p); counts(&u) && onCounted[u.NodeName] {
				for name, q := range u.Requests {
					sub(total, name, q)
				}
				sub(total, corev1.ResourcePods, onePod)
			}
		}
	}
	for _, n := range nodes {
		foreign[n.Name].subtractFrom(total)
	}
	return gross, total
}

// onePod is what a pod takes of a node's pods, parsed once: aggregate
// takes it for every pod of the member.
var onePod = resource.MustParse("1")

// PodUsage is what leaf accounting reads of a member pod: where it runs,
// whether it has finished, and its effective requests.
type PodUsage struct {
	NodeName string
	Phase    corev1.PodPhase
	// Requests are resourcehelper.PodRequests of the pod: containers,
	// init containers, sidecars, overhead, pod-level resources. Read-only:
	// the member's cache shares one list between pods that request the
	// same.
	Requests corev1.ResourceList
}

// UsageOf reduces a pod to its PodUsage. The member's cache does it once,
// when a pod enters it (internal/syncer/member's transform), and Usage
// sums it by node from there.
func UsageOf(p *corev1.Pod) PodUsage {
	return PodUsage{NodeName: p.Spec.NodeName, Phase: p.Status.Phase,
		Requests: resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})}
}

func add(list corev1.ResourceList, name corev1.ResourceName, q resource.Quantity) {
	cur := list[name]
	cur.Add(q)
	list[name] = cur
}

// sub subtracts but never below zero, for resources the list has; a pod
// requesting something no counted node offers changes nothing.
func sub(list corev1.ResourceList, name corev1.ResourceName, q resource.Quantity) {
	cur, ok := list[name]
	if !ok {
		return
	}
	cur.Sub(q)
	if cur.Sign() < 0 {
		cur = *resource.NewQuantity(0, cur.Format)
	}
	list[name] = cur
}

// Topology labels copied from the member when all counted nodes agree.
var topologyLabels = []string{corev1.LabelTopologyRegion, corev1.LabelTopologyZone}

func leafLabels(cluster, leaf string, nodes []*MemberNode) map[string]string {
	l := map[string]string{
		LabelCluster:         cluster,
		"type":               "virtual-kubelet",
		"kubernetes.io/role": "leaf",
		corev1.LabelHostname: leaf,
	}
	for _, key := range append(topologyLabels, corev1.LabelOSStable, corev1.LabelArchStable) {
		if v, ok := uniformLabel(nodes, key); ok {
			l[key] = v
		}
	}
	return l
}

func uniformLabel(nodes []*MemberNode, key string) (string, bool) {
	if len(nodes) == 0 {
		return "", false
	}
	v := nodes[0].Labels.Get(key)
	for _, n := range nodes[1:] {
		if n.Labels.Get(key) != v {
			return "", false
		}
	}
	return v, v != ""
}

// nodeInfo reports the lowest kubelet version among member nodes, and OS
// and architecture when they are uniform.
func nodeInfo(nodes []*MemberNode) corev1.NodeSystemInfo {
	info := corev1.NodeSystemInfo{ContainerRuntimeVersion: containerRuntime}
	var lowest *utilversion.Version
	// A member's nodes run a few versions: each is parsed once (parsing
	// every node's was a third of a recompute).
	compared := map[string]bool{}
	for i, n := range nodes {
		if i == 0 {
			info.OperatingSystem, info.Architecture = n.OperatingSystem, n.Architecture
		} else {
			if info.OperatingSystem != n.OperatingSystem {
				info.OperatingSystem = ""
			}
			if info.Architecture != n.Architecture {
				info.Architecture = ""
			}
		}
		if compared[n.KubeletVersion] {
			continue
		}
		compared[n.KubeletVersion] = true
		v, err := utilversion.ParseGeneric(n.KubeletVersion)
		if err != nil {
			continue
		}
		if lowest == nil || v.LessThan(lowest) {
			lowest = v
			info.KubeletVersion = n.KubeletVersion
		}
	}
	return info
}

// carriedFeatures are the node declared features whose pod updates pod
// sync passes on to the member pod: the resize of pod-level resources and
// of init containers (podsync/decide/resize.go). The host's API server
// refuses those resizes on a node that does not declare them. Other
// features a member node declares (its kubelet API's, its runtime's) are
// not the leaf's to claim.
var carriedFeatures = sets.New(inplacepodresize.IPPRPodLevelResourcesFeatureGate, inplacepodresize.IPPRInitContainersFeatureGate)

// declaredFeatures are those of carriedFeatures that every counted member
// node declares, sorted as the API requires: the member may run a pod on
// any of them, so a feature only some declare is not the leaf's (nor is
// any, for a member whose kubelets are too old to declare features).
func declaredFeatures(nodes []*MemberNode) []string {
	if len(nodes) == 0 {
		return nil
	}
	common := carriedFeatures.Clone()
	for _, n := range nodes {
		common = common.Intersection(sets.New(n.DeclaredFeatures...))
	}
	return sets.List(common)
}

func readyCondition(in Input) corev1.NodeCondition {
	st := in.Status
	c := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: ReasonMemberReachable,
		Message: fmt.Sprintf("member cluster %s answers leafsync's probes", in.Cluster)}
	failure := st.Reason
	if st.Detail != "" {
		failure += ": " + st.Detail
	}
	switch st.State {
	case hysteresis.Ready:
		if st.Cordoned {
			c.Message += fmt.Sprintf("; cordoned (%s)", failure)
		}
	case hysteresis.Suspect:
		c.Reason = ReasonMemberSuspect
		c.Message = fmt.Sprintf("member cluster %s is failing probes since %s (%s); tolerated until %s of continuous failure",
			in.Cluster, stamp(st.Since), failure, in.Config.NotReadyAfter)
	case hysteresis.NotReady:
		c.Status, c.Reason = corev1.ConditionFalse, ReasonMemberUnreachable
		c.Message = fmt.Sprintf("member cluster %s unreachable: no successful probe since %s (%s)",
			in.Cluster, stamp(st.UnreachableSince), failure)
	case hysteresis.Recovering:
		c.Status, c.Reason = corev1.ConditionFalse, ReasonMemberRecovering
		c.Message = fmt.Sprintf("member cluster %s answers again since %s; Ready after %s of continuous success",
			in.Cluster, stamp(st.Since), in.Config.ReadyAfter)
	}
	return c
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "start-up"
	}
	return t.UTC().Format(time.RFC3339)
}

var pressureTypes = []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure}

// pressureConditions are False unless every counted member node is under
// that pressure: one pressured node does not make the member unschedulable.
func pressureConditions(nodes []*MemberNode) []corev1.NodeCondition {
	out := make([]corev1.NodeCondition, 0, len(pressureTypes))
	for _, typ := range pressureTypes {
		all := len(nodes) > 0
		for _, n := range nodes {
			if !n.ConditionTrue(typ) {
				all = false
				break
			}
		}
		c := corev1.NodeCondition{Type: typ, Status: corev1.ConditionFalse, Reason: reasonNoPressure,
			Message: fmt.Sprintf("not every member node reports %s", typ)}
		if all {
			c.Status, c.Reason, c.Message = corev1.ConditionTrue, reasonMemberPressure, fmt.Sprintf("every member node reports %s", typ)
		}
		out = append(out, c)
	}
	return out
}
