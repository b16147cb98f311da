package member

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNodeRecordChanged(t *testing.T) {
	node := func(rv string, mutate func(*corev1.Node)) *cachedNode {
		n := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: rv, Labels: map[string]string{"pool": "a"}},
			Status: corev1.NodeStatus{
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
				Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Unix(100, 0)}},
			},
		}
		if mutate != nil {
			mutate(n)
		}
		return memberNode(n)
	}
	base := node("1", nil)
	for _, tc := range []struct {
		name string
		cur  *cachedNode
		want bool
	}{
		{"heartbeat only", node("2", func(n *corev1.Node) { n.Status.Conditions[0].LastHeartbeatTime = metav1.Unix(200, 0) }), false},
		{"images only", node("2", func(n *corev1.Node) { n.Status.Images = []corev1.ContainerImage{{Names: []string{"x"}}} }), false},
		{"not ready", node("2", func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }), true},
		{"cordoned", node("2", func(n *corev1.Node) { n.Spec.Unschedulable = true }), true},
		{"relabelled", node("2", func(n *corev1.Node) { n.Labels["pool"] = "b" }), true},
		{"allocatable", node("2", func(n *corev1.Node) { n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("8") }), true},
	} {
		if got := NodeRecordChanged(base, tc.cur); got != tc.want {
			t.Errorf("%s: NodeRecordChanged = %v, want %v", tc.name, got, tc.want)
		}
	}
	if !NodeRecordChanged(base, "other") {
		t.Error("an object of another type must count as changed")
	}
}
