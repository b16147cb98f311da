package scalebench

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func leafVersion(name string, ready corev1.ConditionStatus, reason string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if ready != "" {
		n.Status.Conditions = []corev1.NodeCondition{
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
			{Type: corev1.NodeReady, Status: ready, Reason: reason},
		}
	}
	return n
}

func TestReadyTrackerCountsLossesOfReadyLeaves(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 17, 10, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	r := newReadyTracker()
	for _, v := range []struct {
		node *corev1.Node
		at   time.Time
	}{
		{leafVersion("leaf-a", "", ""), at(0)}, // just created: no condition
		{leafVersion("leaf-a", corev1.ConditionFalse, "Registering"), at(1)},
		{leafVersion("leaf-a", corev1.ConditionTrue, "LeafReady"), at(2)},
		{leafVersion("leaf-b", corev1.ConditionTrue, "LeafReady"), at(2)},
		{leafVersion("leaf-a", corev1.ConditionTrue, "LeafReady"), at(3)}, // heartbeat
		{leafVersion("leaf-a", corev1.ConditionUnknown, "NodeStatusUnknown"), at(4)},
		{leafVersion("leaf-a", corev1.ConditionUnknown, "NodeStatusUnknown"), at(5)}, // still lost: not again
		{leafVersion("leaf-a", corev1.ConditionTrue, "LeafReady"), at(6)},
		{leafVersion("leaf-a", corev1.ConditionFalse, "MemberNotReady"), at(7)},
	} {
		r.observe(v.node, v.at)
	}
	if r.first["leaf-a"] != at(2) || r.first["leaf-b"] != at(2) {
		t.Errorf("first Ready: %v", r.first)
	}
	want := []ReadyLoss{
		{Leaf: "leaf-a", At: at(4), Status: "Unknown", Reason: "NodeStatusUnknown"},
		{Leaf: "leaf-a", At: at(7), Status: "False", Reason: "MemberNotReady"},
	}
	if len(r.losses) != len(want) {
		t.Fatalf("losses %v, want %v", r.losses, want)
	}
	for i := range want {
		if r.losses[i] != want[i] {
			t.Errorf("loss %d: %v, want %v", i, r.losses[i], want[i])
		}
	}
}

func TestStepReadyLossText(t *testing.T) {
	var s Step
	if s.readyLossText() != "" {
		t.Errorf("no loss, text %q", s.readyLossText())
	}
	t0 := time.Date(2026, 11, 25, 17, 10, 3, 250e6, time.UTC)
	var losses []ReadyLoss
	for i := range keptLosses + 3 {
		losses = append(losses, ReadyLoss{Leaf: fmt.Sprintf("leaf-reg-%03d", i), At: t0, Status: "Unknown", Reason: "NodeStatusUnknown"})
	}
	s.recordLosses(losses)
	if s.ReadyLost != keptLosses+3 || len(s.ReadyLosses) != keptLosses {
		t.Fatalf("recorded %d, kept %d", s.ReadyLost, len(s.ReadyLosses))
	}
	text := s.readyLossText()
	for _, want := range []string{"13 times a leaf lost Ready", "leaf-reg-000 Unknown at 17:10:03.250 (NodeStatusUnknown)", "and 3 more"} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in %q", want, text)
		}
	}
}
