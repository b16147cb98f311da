package guard

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestRecordsUserTaints: the record lists the leaf's NoExecute taints that
// node lifecycle did not set, keeps them across state changes, and drops
// them when they go; nothing is written before the member's state is.
func TestRecordsUserTaints(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset()
	r := &Records{Client: c, Namespace: "leafsync-system"}
	data := func() map[string]string {
		t.Helper()
		cm, err := c.CoreV1().ConfigMaps("leafsync-system").Get(ctx, RecordName("m1"), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return cm.Data
	}
	taints := []corev1.Taint{
		{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute},
		{Key: "maintenance", Effect: corev1.TaintEffectNoExecute},
		{Key: "example.com/drain", Value: "now", Effect: corev1.TaintEffectNoExecute},
		{Key: "leafsync.io/leaf", Effect: corev1.TaintEffectNoSchedule},
	}
	if err := r.SetUserTaints(ctx, "m1", "leaf-m1", taints); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().ConfigMaps("leafsync-system").Get(ctx, RecordName("m1"), metav1.GetOptions{}); err == nil {
		t.Fatal("record written before the member's state")
	}
	if err := r.Set(ctx, "m1", "leaf-m1", "Ready", time.Now()); err != nil {
		t.Fatal(err)
	}
	if got := data()[KeyUserNoExecute]; got != "maintenance=,example.com/drain=now" {
		t.Fatalf("%s = %q", KeyUserNoExecute, got)
	}
	if err := r.Set(ctx, "m1", "leaf-m1", "Suspect", time.Now()); err != nil {
		t.Fatal(err)
	}
	if d := data(); d[KeyState] != "Suspect" || d[KeyUserNoExecute] == "" {
		t.Fatalf("after a state change: %v", d)
	}
	if err := r.SetUserTaints(ctx, "m1", "leaf-m1", taints[:1]); err != nil {
		t.Fatal(err)
	}
	if d := data(); d[KeyState] != "Suspect" {
		t.Fatalf("state lost: %v", d)
	} else if v, ok := d[KeyUserNoExecute]; ok {
		t.Fatalf("user taints removed, record still lists %q", v)
	}
}
