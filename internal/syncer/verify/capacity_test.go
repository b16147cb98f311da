package verify

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leafsync/leafsync/internal/syncer/member"
	"github.com/leafsync/leafsync/internal/syncer/member/membertest"
	"github.com/leafsync/leafsync/internal/syncer/registration"
)

// The capacity check reads the member's cached nodes: a Ready,
// schedulable node passes, and the node selector narrows which count.
func TestCheckCapacityReadsCachedNodes(t *testing.T) {
	node := func(name, pool string, cordoned bool) corev1.Node {
		return corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name, "pool": pool}},
			Spec:       corev1.NodeSpec{Unschedulable: cordoned},
			Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
		}
	}
	api := membertest.NewServer(t, []corev1.Node{node("cpu-0", "cpu", false), node("gpu-0", "gpu", true)}, nil)
	rt, err := member.New(member.Options{Cluster: "east", RESTConfig: api.RESTConfig(), Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rt.Start(ctx)
	if !rt.WaitForCacheSync(ctx) {
		t.Fatal("caches did not sync")
	}
	for _, tc := range []struct {
		selector string
		want     Outcome
		message  string
	}{
		{"", Passed, ""},
		{"pool=cpu", Passed, ""},
		{"kubernetes.io/hostname=cpu-0", Passed, ""},
		{"pool=gpu", Failed, "(1 seen)"},
		{"pool=tpu", Failed, "(0 seen)"},
	} {
		r := checkCapacity(rt, map[string]string{registration.AnnotationNodeSelector: tc.selector})
		if r.Outcome != tc.want || !strings.Contains(r.Message, tc.message) {
			t.Errorf("selector %q: %s %q, want %s %q", tc.selector, r.Outcome, r.Message, tc.want, tc.message)
		}
	}
}
