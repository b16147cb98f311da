package leafnode

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// A selector sees a MemberNode's labels as the Node's, the hostname label
// (kept apart from the shared ones) included.
func TestMemberNodeLabelsSelectLikeTheNode(t *testing.T) {
	nodes := []*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{corev1.LabelHostname: "a", "pool": "gpu"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: map[string]string{corev1.LabelHostname: "b.example", "pool": "gpu"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: map[string]string{"pool": "cpu"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "d"}},
	}
	selectors := []string{"", "pool=gpu", "pool!=gpu", "kubernetes.io/hostname", "!kubernetes.io/hostname",
		"kubernetes.io/hostname=a", "kubernetes.io/hostname in (b.example,c)", "kubernetes.io/hostname!=b", "zone"}
	for _, s := range selectors {
		sel, err := labels.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			m := MemberNodeOf(n)
			if want, got := sel.Matches(labels.Set(n.Labels)), sel.Matches(&m.Labels); got != want {
				t.Errorf("selector %q on node %s: %v, the Node's labels %v", s, n.Name, got, want)
			}
		}
	}
}

// Only Ready and the pressures are kept, and only True counts.
func TestMemberNodeConditions(t *testing.T) {
	n := &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionUnknown},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionTrue},
		{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionTrue},
	}}}
	m := MemberNodeOf(n)
	want := map[corev1.NodeConditionType]bool{corev1.NodeReady: false, corev1.NodeMemoryPressure: false,
		corev1.NodeDiskPressure: true, corev1.NodePIDPressure: false, corev1.NodeNetworkUnavailable: false}
	for typ, w := range want {
		if got := m.ConditionTrue(typ); got != w {
			t.Errorf("ConditionTrue(%s) = %v, want %v", typ, got, w)
		}
	}
}
