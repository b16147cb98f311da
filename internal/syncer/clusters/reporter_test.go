package clusters

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/syncer/registration"
)

// Status writes to one Secret are spaced by the interval, on the injected
// clock, and the status time is that clock's.
func TestReporterSpacesWritesByInterval(t *testing.T) {
	ctx := context.Background()
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	fleet, err := hysteresis.NewFleet(hysteresis.DefaultFleetConfig())
	if err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: ns, Name: "east"}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "east", Labels: map[string]string{registration.LabelCluster: "east"}},
	}).Build()
	rec := &recorder{}
	reg := newRegistry(fleet, clk)
	w := newReporter(c, reg, rec, 5*time.Second, clk)

	write := func(reason string) (time.Duration, string) {
		t.Helper()
		reg.setStatus(Status{Cluster: "east", Secret: key, Phase: phaseUnreachable, Reason: reason})
		var s corev1.Secret
		if err := c.Get(ctx, key, &s); err != nil {
			t.Fatal(err)
		}
		res, err := w.writeStatus(ctx, &s)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Get(ctx, key, &s); err != nil {
			t.Fatal(err)
		}
		return res.RequeueAfter, s.Annotations[registration.AnnotationStatusReason]
	}

	if wait, got := write("A"); wait != 0 || got != "A" {
		t.Fatalf("first write: requeue %s, reason %q", wait, got)
	}
	clk.Step(2 * time.Second)
	if wait, got := write("B"); wait != 3*time.Second || got != "A" {
		t.Fatalf("write within the interval: requeue %s (want 3s), reason %q (want A)", wait, got)
	}
	clk.Step(3 * time.Second)
	if wait, got := write("B"); wait != 0 || got != "B" {
		t.Fatalf("write after the interval: requeue %s, reason %q", wait, got)
	}
	var s corev1.Secret
	if err := c.Get(ctx, key, &s); err != nil {
		t.Fatal(err)
	}
	if got, want := s.Annotations[registration.AnnotationStatusTime], start.Add(2*time.Second).Format(time.RFC3339); got != want {
		t.Errorf("status time %s, want %s (when the reason changed, on the injected clock)", got, want)
	}
	if _, ok := rec.find("B", "east"); !ok {
		t.Error("no Event for the second write")
	}
}

// Deregistering removes a member identity the Secret as read did not show
// yet (recorded just before, not yet in the cache).
func TestClearStatusRemovesWhatTheReadMissed(t *testing.T) {
	ctx := context.Background()
	key := types.NamespacedName{Namespace: ns, Name: "east"}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: "east", UID: "secret-uid", Annotations: map[string]string{
			registration.AnnotationStatus: string(phaseConnected), registration.AnnotationMemberIdentity: "uid-a", "team": "a"}}}).Build()
	var read corev1.Secret
	if err := c.Get(ctx, key, &read); err != nil {
		t.Fatal(err)
	}
	delete(read.Annotations, registration.AnnotationMemberIdentity) // the cache's older copy
	clk := clocktesting.NewFakeClock(time.Now())
	fleet, err := hysteresis.NewFleet(hysteresis.DefaultFleetConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := newReporter(c, newRegistry(fleet, clk), &recorder{}, time.Second, clk).clearStatus(ctx, &read); err != nil {
		t.Fatal(err)
	}
	var s corev1.Secret
	if err := c.Get(ctx, key, &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Annotations) != 1 || s.Annotations["team"] != "a" {
		t.Errorf("annotations after clearing: %v, want only team=a", s.Annotations)
	}
}
