package leafnode

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/leafsync/leafsync/hysteresis"
)

// BenchmarkCompute recomputes a leaf for members of growing size: the work
// leafsync does on every member Node or Pod change (debounced to 2/s).
// foreign: the pods leafsync did not place as the member cache holds them
// (their sums by node, Usage, kept up to date from pod events).
func BenchmarkCompute(b *testing.B) {
	for _, size := range []struct {
		nodes, pods int
		foreign     bool
	}{{10, 300, false}, {100, 3000, false}, {1000, 30000, false}, {200, 2000, false}, {200, 2000, true}, {1000, 30000, true}} {
		foreign := size.foreign
		b.Run(fmt.Sprintf("nodes=%d/pods=%d/foreign=%v", size.nodes, size.pods, foreign), func(b *testing.B) {
			nodes := make([]*corev1.Node, size.nodes)
			for i := range nodes {
				nodes[i] = memberNode(fmt.Sprintf("n%d", i), true,
					map[string]string{"cpu": "16", "memory": "64Gi", "pods": "110", "ephemeral-storage": "200Gi"},
					map[string]string{corev1.LabelTopologyZone: "z1"}, "v1.35.1")
			}
			pods := make([]*corev1.Pod, size.pods)
			for i := range pods {
				pods[i] = memberPod(fmt.Sprintf("p%d", i), nodes[i%size.nodes].Name, corev1.PodRunning, i%3 == 0,
					map[string]string{"cpu": "250m", "memory": "512Mi"})
			}
			in := Input{Cluster: "eu-1", LeafName: "leaf-eu-1", MemberNodes: members(nodes...), MemberPods: pods,
				Status: hysteresis.Status{State: hysteresis.Ready}, Options: Options{LeafTaint: true, IsSyncedPod: isSynced}}
			if foreign {
				in.MemberPods = nil
				var usage Usage
				for _, p := range pods {
					if !isSynced(p) {
						u := UsageOf(p)
						usage.Update(nil, &u)
					}
				}
				in.ForeignUsage = usage.Snapshot()
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				_ = Compute(in)
			}
		})
	}
}
