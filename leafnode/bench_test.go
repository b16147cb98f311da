package leafnode

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/leafsync/leafsync/hysteresis"
)

// BenchmarkCompute recomputes a leaf for members of growing size: the work
// leafsync does on every member Node or Pod change (debounced to 2/s).
func BenchmarkCompute(b *testing.B) {
	for _, size := range []struct{ nodes, pods int }{{10, 300}, {100, 3000}, {1000, 30000}} {
		b.Run(fmt.Sprintf("nodes=%d/pods=%d", size.nodes, size.pods), func(b *testing.B) {
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
			in := Input{Cluster: "eu-1", LeafName: "leaf-eu-1", MemberNodes: nodes, MemberPods: pods,
				Status: hysteresis.Status{State: hysteresis.Ready}, Options: Options{LeafTaint: true, IsSyncedPod: isSynced}}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				_ = Compute(in)
			}
		})
	}
}
