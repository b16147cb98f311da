package leafnode

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/leafsync/leafsync/hysteresis"
)

// The unverified taint is on the leaf from its creation, survives every
// rewrite (the engine's cordon and uncordon, a status change), goes once
// verification passes, and never touches readiness.
func TestUnverifiedTaintOwnedAndKept(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	w := &Writer{Client: client, Cluster: "eu-1", Name: "leaf"}
	sync := func(st hysteresis.Status, unverified string) *corev1.Node {
		t.Helper()
		d := desired(st)
		in := Input{Status: st, Unverified: unverified}
		if got := Compute(in).Ready; got != st.State.LeafReady() {
			t.Fatalf("unverified=%q changed readiness: Ready=%v", unverified, got)
		}
		d.Taints = Compute(Input{Status: st, Unverified: unverified, Options: Options{LeafTaint: true}}).Taints
		if err := w.Sync(ctx, d); err != nil {
			t.Fatal(err)
		}
		n, err := client.CoreV1().Nodes().Get(ctx, "leaf", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	steps := []struct {
		st         hysteresis.Status
		unverified string
	}{
		{hysteresis.Status{State: hysteresis.Ready}, "pending"},
		{hysteresis.Status{State: hysteresis.Suspect, Cordoned: true}, "pending"},
		{hysteresis.Status{State: hysteresis.Ready}, "rights"},
		{hysteresis.Status{State: hysteresis.Ready}, ""},
		{hysteresis.Status{State: hysteresis.Ready}, "capacity"},
	}
	for i, s := range steps {
		n := sync(s.st, s.unverified)
		got := ""
		for _, tt := range n.Spec.Taints {
			if tt.Key == TaintUnverified && tt.Effect == corev1.TaintEffectNoSchedule {
				got = tt.Value
			}
		}
		if got != s.unverified {
			t.Fatalf("step %d: unverified taint %q, want %q (taints %v)", i, got, s.unverified, n.Spec.Taints)
		}
		if !hasTaintKey(n, TaintLeaf) || hasTaintKey(n, TaintUnreachable) != s.st.Cordoned {
			t.Fatalf("step %d: the other owned taints changed: %v", i, n.Spec.Taints)
		}
	}
}
