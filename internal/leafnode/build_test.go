package leafnode

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	nodeutil "k8s.io/component-helpers/node/util"

	"github.com/leafsync/leafsync/hysteresis"
)

func memberNode(name string, ready bool, alloc map[string]string, lbls map[string]string, kubelet string) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{},
			NodeInfo:    corev1.NodeSystemInfo{KubeletVersion: kubelet, OperatingSystem: "linux", Architecture: "amd64"},
		},
	}
	for k, v := range alloc {
		n.Status.Allocatable[corev1.ResourceName(k)] = resource.MustParse(v)
	}
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}
	return n
}

// members are nodes as the member's cache keeps them.
func members(nodes ...*corev1.Node) []*MemberNode {
	out := make([]*MemberNode, len(nodes))
	for i, n := range nodes {
		out[i] = MemberNodeOf(n)
	}
	return out
}

func memberPod(name, node string, phase corev1.PodPhase, synced bool, req map[string]string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{
			Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{}},
		}}},
		Status: corev1.PodStatus{Phase: phase},
	}
	for k, v := range req {
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceName(k)] = resource.MustParse(v)
	}
	if synced {
		p.Labels = map[string]string{"leafsync.io/cluster": "eu-1"}
	}
	return p
}

func isSynced(p *corev1.Pod) bool { return p.Labels["leafsync.io/cluster"] != "" }

func TestComputeAggregatesExactly(t *testing.T) {
	zoneA := map[string]string{corev1.LabelTopologyZone: "eu-1a", corev1.LabelTopologyRegion: "eu-1", "pool": "gpu"}
	nodes := []*corev1.Node{
		memberNode("n1", true, map[string]string{"cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi", "nvidia.com/gpu": "2"}, zoneA, "v1.35.2"),
		memberNode("n2", true, map[string]string{"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"}, zoneA, "v1.34.9"),
		memberNode("not-ready", false, map[string]string{"cpu": "64", "memory": "256Gi", "pods": "110"}, zoneA, "v1.30.0"),
	}
	cordoned := memberNode("cordoned", true, map[string]string{"cpu": "64", "memory": "256Gi", "pods": "110"}, zoneA, "v1.30.0")
	cordoned.Spec.Unschedulable = true
	nodes = append(nodes, cordoned)
	pods := []*corev1.Pod{
		memberPod("web", "n1", corev1.PodRunning, false, map[string]string{"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": "1"}),
		memberPod("db", "n2", corev1.PodPending, false, map[string]string{"cpu": "1500m", "memory": "2Gi", "ephemeral-storage": "10Gi"}),
		memberPod("done", "n2", corev1.PodSucceeded, false, map[string]string{"cpu": "3", "memory": "3Gi"}),
		memberPod("failed", "n1", corev1.PodFailed, false, map[string]string{"cpu": "3", "memory": "3Gi"}),
		memberPod("synced", "n1", corev1.PodRunning, true, map[string]string{"cpu": "2", "memory": "2Gi"}),
		memberPod("on-not-ready", "not-ready", corev1.PodRunning, false, map[string]string{"cpu": "7", "memory": "7Gi"}),
	}
	d := Compute(Input{Cluster: "eu-1", LeafName: "leaf-eu-1", MemberNodes: members(nodes...), MemberPods: pods,
		Status: hysteresis.Status{State: hysteresis.Ready}, Config: hysteresis.DefaultConfig(),
		Options: Options{LeafTaint: true, IsSyncedPod: isSynced}})

	// n1 + n2 minus web and db; terminal, synced and not-counted-node pods don't count.
	want := corev1.ResourceList{
		"cpu":               resource.MustParse("10"),   // 12 - 0.5 - 1.5
		"memory":            resource.MustParse("45Gi"), // 48Gi - 1Gi - 2Gi
		"pods":              resource.MustParse("218"),  // 220 - 2
		"ephemeral-storage": resource.MustParse("190Gi"),
		"nvidia.com/gpu":    resource.MustParse("1"),
	}
	for name, q := range want {
		got := d.Allocatable[name]
		if got.Cmp(q) != 0 {
			t.Errorf("allocatable[%s] = %s, want %s", name, got.String(), q.String())
		}
		if c := d.Capacity[name]; c.Cmp(q) != 0 {
			t.Errorf("capacity[%s] = %s, want %s", name, c.String(), q.String())
		}
	}
	if len(d.Allocatable) != len(want) {
		t.Errorf("allocatable has %d resources, want %d: %v", len(d.Allocatable), len(want), d.Allocatable)
	}
	if d.NodeInfo.KubeletVersion != "v1.34.9" {
		t.Errorf("kubelet version %q, want the lowest of counted nodes v1.34.9", d.NodeInfo.KubeletVersion)
	}
	for k, v := range map[string]string{
		LabelCluster: "eu-1", "type": "virtual-kubelet", "kubernetes.io/role": "leaf",
		corev1.LabelTopologyZone: "eu-1a", corev1.LabelTopologyRegion: "eu-1", corev1.LabelHostname: "leaf-eu-1",
	} {
		if d.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, d.Labels[k], v)
		}
	}
	if _, ok := d.Labels["pool"]; ok {
		t.Error("non-topology member labels must not be copied")
	}
	if len(d.Taints) != 1 || d.Taints[0].Key != TaintLeaf || d.Taints[0].Effect != corev1.TaintEffectNoSchedule {
		t.Errorf("taints %v, want only %s:NoSchedule", d.Taints, TaintLeaf)
	}
	if !d.Ready || d.Conditions[0].Status != corev1.ConditionTrue || d.Conditions[0].Reason != ReasonMemberReachable {
		t.Errorf("Ready condition %+v", d.Conditions[0])
	}
}

func TestComputeNodeSelectorAndMixedZones(t *testing.T) {
	nodes := []*corev1.Node{
		memberNode("a", true, map[string]string{"cpu": "4"}, map[string]string{"pool": "leaf", corev1.LabelTopologyZone: "z1"}, "v1.35.0"),
		memberNode("b", true, map[string]string{"cpu": "4"}, map[string]string{"pool": "leaf", corev1.LabelTopologyZone: "z2"}, "v1.35.0"),
		memberNode("c", true, map[string]string{"cpu": "4"}, map[string]string{"pool": "system", corev1.LabelTopologyZone: "z1"}, "v1.35.0"),
	}
	d := Compute(Input{Cluster: "eu-1", LeafName: "leaf", MemberNodes: members(nodes...),
		Status:  hysteresis.Status{State: hysteresis.Ready},
		Options: Options{NodeSelector: labels.SelectorFromSet(labels.Set{"pool": "leaf"})}})
	if cpu := d.Allocatable["cpu"]; cpu.Cmp(resource.MustParse("8")) != 0 {
		t.Errorf("cpu %s, want 8 (selector keeps a and b)", cpu.String())
	}
	if _, ok := d.Labels[corev1.LabelTopologyZone]; ok {
		t.Errorf("zone label %q set although member nodes disagree", d.Labels[corev1.LabelTopologyZone])
	}
	if len(d.Taints) != 0 {
		t.Errorf("taints %v with LeafTaint off", d.Taints)
	}
}

func TestComputeFollowsEngine(t *testing.T) {
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		st        hysteresis.Status
		ready     corev1.ConditionStatus
		reason    string
		renew     bool
		cordonTnt bool
	}{
		{hysteresis.Status{State: hysteresis.Ready}, corev1.ConditionTrue, ReasonMemberReachable, true, false},
		{hysteresis.Status{State: hysteresis.Suspect, Since: since, Reason: hysteresis.ReasonNetworkFailure}, corev1.ConditionTrue, ReasonMemberSuspect, true, false},
		{hysteresis.Status{State: hysteresis.Suspect, Cordoned: true, Since: since, Reason: hysteresis.ReasonNetworkFailure}, corev1.ConditionTrue, ReasonMemberSuspect, true, true},
		{hysteresis.Status{State: hysteresis.Ready, Cordoned: true, Reason: hysteresis.ReasonAuthFailure}, corev1.ConditionTrue, ReasonMemberReachable, true, true},
		{hysteresis.Status{State: hysteresis.NotReady, Cordoned: true, OutageSince: since, Reason: hysteresis.ReasonNetworkFailure}, corev1.ConditionFalse, ReasonMemberUnreachable, false, true},
		{hysteresis.Status{State: hysteresis.Recovering, Cordoned: true, Since: since}, corev1.ConditionFalse, ReasonMemberRecovering, false, true},
	}
	for _, tc := range cases {
		d := Compute(Input{Cluster: "eu-1", LeafName: "leaf", Status: tc.st, Config: hysteresis.DefaultConfig()})
		c := d.Conditions[0]
		if c.Type != corev1.NodeReady || c.Status != tc.ready || c.Reason != tc.reason || d.Ready != tc.renew {
			t.Errorf("%s cordoned=%v: Ready=%s/%s renew=%v, want %s/%s renew=%v (message %q)",
				tc.st.State, tc.st.Cordoned, c.Status, c.Reason, d.Ready, tc.ready, tc.reason, tc.renew, c.Message)
		}
		hasCordon := false
		for _, tt := range d.Taints {
			hasCordon = hasCordon || (tt.Key == TaintUnreachable && tt.Effect == corev1.TaintEffectNoSchedule)
		}
		if hasCordon != tc.cordonTnt {
			t.Errorf("%s cordoned=%v: cordon taint %v, want %v", tc.st.State, tc.st.Cordoned, hasCordon, tc.cordonTnt)
		}
	}
}

func TestPressureOnlyWhenAllNodes(t *testing.T) {
	a := memberNode("a", true, map[string]string{"cpu": "1"}, nil, "v1.35.0")
	b := memberNode("b", true, map[string]string{"cpu": "1"}, nil, "v1.35.0")
	a.Status.Conditions = append(a.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionTrue})
	d := Compute(Input{MemberNodes: members(a, b), Status: hysteresis.Status{State: hysteresis.Ready}})
	if c := testCondition(d.Conditions, corev1.NodeMemoryPressure); c == nil || c.Status != corev1.ConditionFalse {
		t.Fatalf("one pressured node of two: MemoryPressure %+v, want False", c)
	}
	b.Status.Conditions = append(b.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionTrue})
	d = Compute(Input{MemberNodes: members(a, b), Status: hysteresis.Status{State: hysteresis.Ready}})
	if c := testCondition(d.Conditions, corev1.NodeMemoryPressure); c == nil || c.Status != corev1.ConditionTrue {
		t.Fatalf("all nodes pressured: MemoryPressure %+v, want True", c)
	}
}

func TestMergeTaintsKeepsOthers(t *testing.T) {
	kcm := corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}
	cur := []corev1.Taint{kcm, {Key: TaintUnreachable, Effect: corev1.TaintEffectNoSchedule}}
	got := mergeTaints(cur, []corev1.Taint{{Key: TaintLeaf, Value: "true", Effect: corev1.TaintEffectNoSchedule}})
	if len(got) != 2 || got[0].Key != kcm.Key || got[1].Key != TaintLeaf {
		t.Fatalf("mergeTaints = %v: want KCM's taint kept, cordon removed, leaf taint added", got)
	}
}

// A pod reduced to its usage when it entered the cache accounts exactly as
// the full pod: init containers, a sidecar, overhead.
func TestForeignPodAccountsAsTheFullPod(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	rl := func(cpu, mem string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}
	}
	full := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
		Spec: corev1.PodSpec{NodeName: "n1",
			InitContainers: []corev1.Container{
				{Name: "init", Resources: rl("2", "1Gi")},
				{Name: "sidecar", Resources: rl("100m", "64Mi"), RestartPolicy: &always},
			},
			Containers: []corev1.Container{{Name: "a", Resources: rl("250m", "512Mi")}, {Name: "b", Resources: rl("250m", "256Mi")}},
			Overhead:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	usage := UsageOf(full)
	// The init container (2 CPU, 1Gi) outweighs the containers with their
	// sidecar (600m, 832Mi); plus 50m overhead.
	want := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2050m"), corev1.ResourceMemory: resource.MustParse("1Gi")}
	for r, w := range want {
		if g := usage.Requests[r]; w.Cmp(g) != 0 {
			t.Errorf("%s: usage %s, want %s", r, g.String(), w.String())
		}
	}
	nodes := members(memberNode("n1", true, map[string]string{"cpu": "8", "memory": "32Gi", "pods": "110"}, nil, "v1.35.2"))
	_, a := aggregate(nodes, []*corev1.Pod{full}, nil, nil)
	var sums Usage
	sums.Update(nil, &usage)
	_, b := aggregate(nodes, nil, sums.Snapshot(), nil)
	for r, q := range a {
		if bq := b[r]; q.Cmp(bq) != 0 {
			t.Errorf("aggregate %s: %s with the full pod, %s as a foreign pod", r, q.String(), bq.String())
		}
	}
}

func testCondition(conds []corev1.NodeCondition, typ corev1.NodeConditionType) *corev1.NodeCondition {
	_, c := nodeutil.GetNodeCondition(&corev1.NodeStatus{Conditions: conds}, typ)
	return c
}

// A leaf declares a node feature only when every counted member node does
// and leafsync carries the pod updates it enables (the resize of
// pod-level resources and of init containers); never another one.
func TestDeclaredFeaturesCommonToAllNodes(t *testing.T) {
	const podLevel, initCtrs = "InPlacePodLevelResourcesVerticalScaling", "InPlacePodVerticalScalingInitContainers"
	node := func(name string, features ...string) *corev1.Node {
		n := memberNode(name, true, map[string]string{"cpu": "4"}, nil, "v1.36.3")
		n.Status.DeclaredFeatures = features
		return n
	}
	for _, tc := range []struct {
		name  string
		nodes []*corev1.Node
		want  []string
	}{
		{"all nodes declare both", []*corev1.Node{node("a", "ExtendWebSocketsToKubelet", podLevel, initCtrs), node("b", podLevel, initCtrs)}, []string{podLevel, initCtrs}},
		{"one node lacks one", []*corev1.Node{node("a", podLevel, initCtrs), node("b", initCtrs)}, []string{initCtrs}},
		{"an older member declares none", []*corev1.Node{node("a"), node("b")}, nil},
		{"features leafsync does not carry", []*corev1.Node{node("a", "ExtendWebSocketsToKubelet", "RestartAllContainersOnContainerExits")}, nil},
		{"no counted node", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Compute(Input{Cluster: "eu-1", LeafName: "leaf", MemberNodes: members(tc.nodes...), Status: hysteresis.Status{State: hysteresis.Ready}, Config: hysteresis.DefaultConfig()})
			if !slices.Equal(d.DeclaredFeatures, tc.want) {
				t.Errorf("declared features %v, want %v", d.DeclaredFeatures, tc.want)
			}
		})
	}
}

// TestNodeInfoParsesEachVersionOnce: a leaf is recomputed at every change
// of its member, and parsing the kubelet version of each of its nodes was
// a third of a recompute of 200 nodes (BenchmarkCompute), though a
// member's nodes run a few versions. The lowest version is still found.
func TestNodeInfoParsesEachVersionOnce(t *testing.T) {
	nodes := make([]*MemberNode, 200)
	for i := range nodes {
		v := "v1.36.2"
		if i == 150 {
			v = "v1.35.4"
		}
		nodes[i] = &MemberNode{KubeletVersion: v, OperatingSystem: "linux", Architecture: "amd64"}
	}
	if got := nodeInfo(nodes).KubeletVersion; got != "v1.35.4" {
		t.Errorf("kubelet version %q, want the lowest, v1.35.4", got)
	}
	if allocs := testing.AllocsPerRun(20, func() { nodeInfo(nodes) }); allocs > 20 {
		t.Errorf("nodeInfo of 200 nodes of 2 versions: %.0f allocations, want a version parsed once (at most 20)", allocs)
	}
}
