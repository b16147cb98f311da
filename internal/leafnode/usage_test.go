package leafnode

import (
	"fmt"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/leafsync/leafsync/hysteresis"
)

// TestUsageKeptFromEventsAggregatesAsAllPods: a leaf computed from Usage
// kept up to date through a random run of pod adds, updates (phase, node,
// requests) and deletes offers exactly what it offers computed from the
// pods left at the end, and a node whose pods all went has no entry left.
func TestUsageKeptFromEventsAggregatesAsAllPods(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	nodes := []*corev1.Node{
		memberNode("n0", true, map[string]string{"cpu": "4", "memory": "16Gi", "pods": "110", "nvidia.com/gpu": "2"}, nil, "v1.35.2"),
		memberNode("n1", true, map[string]string{"cpu": "2", "memory": "8Gi", "pods": "110"}, nil, "v1.35.2"),
		memberNode("n2", false, map[string]string{"cpu": "64", "memory": "256Gi", "pods": "110"}, nil, "v1.35.2"),
	}
	phases := []corev1.PodPhase{corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed}
	requests := []map[string]string{{"cpu": "250m", "memory": "512Mi"}, {"cpu": "1500m"}, {"memory": "3Gi", "nvidia.com/gpu": "1"}, {}}
	randomPod := func(name string) *corev1.Pod {
		node := []string{"n0", "n1", "n2", "gone", ""}[rng.IntN(5)]
		return memberPod(name, node, phases[rng.IntN(len(phases))], false, requests[rng.IntN(len(requests))])
	}
	var usage Usage
	live := map[string]*corev1.Pod{}
	usageOf := func(p *corev1.Pod) *PodUsage {
		if p == nil {
			return nil
		}
		u := UsageOf(p)
		return &u
	}
	for i := range 5000 {
		name := fmt.Sprintf("p%d", rng.IntN(60))
		old := live[name]
		var cur *corev1.Pod
		if rng.IntN(4) > 0 { // else deleted
			cur = randomPod(name)
			if old != nil && rng.IntN(2) == 0 {
				cur = old.DeepCopy() // a status change only
				cur.Status.Phase = phases[rng.IntN(len(phases))]
			}
		}
		usage.Update(usageOf(old), usageOf(cur))
		if cur == nil {
			delete(live, name)
		} else {
			live[name] = cur
		}
		if i%500 != 499 {
			continue
		}
		var pods []*corev1.Pod
		for _, p := range live {
			pods = append(pods, p)
		}
		in := Input{Cluster: "eu-1", LeafName: "leaf-eu-1", MemberNodes: members(nodes...), Status: hysteresis.Status{State: hysteresis.Ready}}
		fromPods := in
		fromPods.MemberPods = pods
		fromUsage := in
		fromUsage.ForeignUsage = usage.Snapshot()
		want, got := Compute(fromPods), Compute(fromUsage)
		if !equality.Semantic.DeepEqual(want.Allocatable, got.Allocatable) {
			t.Fatalf("after %d events: allocatable from the usage %v, from the pods %v", i+1, got.Allocatable, want.Allocatable)
		}
		for node := range usage.Snapshot() {
			found := false
			for _, p := range pods {
				u := UsageOf(p)
				found = found || (counts(&u) && u.NodeName == node)
			}
			if !found {
				t.Fatalf("after %d events: usage of node %s kept with no pod counted on it", i+1, node)
			}
		}
	}
}

// TestUsageSnapshotStaysAsTaken: a later update does not change a
// snapshot's lists (a leaf's sync reads them while the informer goes on).
func TestUsageSnapshotStaysAsTaken(t *testing.T) {
	var usage Usage
	a := UsageOf(memberPod("a", "n0", corev1.PodRunning, false, map[string]string{"cpu": "1"}))
	b := UsageOf(memberPod("b", "n0", corev1.PodRunning, false, map[string]string{"cpu": "2"}))
	usage.Update(nil, &a)
	snap := usage.Snapshot()
	usage.Update(nil, &b)
	if cpu := snap["n0"].milli(corev1.ResourceCPU); cpu != 1000 {
		t.Errorf("snapshot's cpu on n0 became %dm after a later pod, want 1000m", cpu)
	}
	if cpu := usage.Snapshot()["n0"].milli(corev1.ResourceCPU); cpu != 3000 {
		t.Errorf("cpu on n0 = %dm, want 3000m", cpu)
	}
}
