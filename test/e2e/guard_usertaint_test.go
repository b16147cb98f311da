//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/leafsync/leafsync/internal/syncer/guard"
	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
	"github.com/leafsync/leafsync/test/harness"
)

// TestEvictionGuardUserTaint: a user's NoExecute taint on a leaf whose
// member is Ready is the user's intent, not a lapsed Lease. leafsync lists
// it in the leaf's readiness record (userNoExecute), and the real API
// server's policy lets the taint manager's eviction for it through: a pod
// tolerating the taint for 5s is evicted by the taint manager itself, not
// refused and completed by leafsync. Nothing is counted in
// leafsync_evictions_refused_total, and no EvictionRefused Event.
func TestEvictionGuardUserTaint(t *testing.T) {
	const leaf = "leaf-member-a"
	f := newPodSyncFleet(t, "member-a")
	hc := f.host.Client()
	ctx := context.Background()
	ls := f.startLeafsync(t, "leafsync")
	f.register(t, "member-a", nil)
	f.waitLeafReady(t, leaf, time.Minute)
	d := leafWorkload("maint", 1, leaf).Deployment()
	d.Spec.Template.Spec.Tolerations = append(d.Spec.Template.Spec.Tolerations, corev1.Toleration{
		Key: "maintenance", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](5)})
	if _, err := hc.AppsV1().Deployments(appsNS).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := waitHostPodsReady(t, f, "app=maint", 1, time.Minute, leaf)[0]
	hostRec := recordPods(t, f.host, "app=maint")

	n := f.node(t, leaf)
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "maintenance", Value: "true", Effect: corev1.TaintEffectNoExecute})
	if _, err := hc.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	taintedAt := time.Now()
	var evicted *corev1.Pod
	harness.Eventually(t, 30*time.Second, "the host pod evicted", func() error {
		for _, e := range hostRec.events(t) {
			if e.pod.UID == before.UID && e.pod.DeletionTimestamp != nil {
				evicted = e.pod
				return nil
			}
		}
		return fmt.Errorf("not yet")
	})
	c := podCondition(evicted, corev1.DisruptionTarget)
	switch {
	case c == nil || c.Reason != podmeta.CauseTaintManager:
		t.Errorf("host pod deleted without the taint manager's condition: %+v", c)
	case strings.HasPrefix(c.Message, "leafsync:"):
		t.Errorf("the eviction was completed by leafsync (the guard refused the taint manager's): %s", c.Message)
	default:
		t.Logf("evicted by the taint manager %s after the taint", time.Since(taintedAt).Round(time.Millisecond))
	}
	// A refusal is counted before leafsync's completion of the eviction
	// (in the same plan), so by now.
	if n := metricValue(scrape(t, ls), "leafsync_evictions_refused_total", "cluster", "member-a"); n != 0 {
		t.Errorf("leafsync_evictions_refused_total = %v for an eviction a user's taint asked for", n)
	}
	if ev := hostEvents(t, f, "EvictionRefused"); len(ev) != 0 {
		t.Errorf("EvictionRefused Events: %v", ev)
	}
	harness.Eventually(t, 5*time.Second, "the readiness record lists the user's taint", func() error {
		cm, err := hc.CoreV1().ConfigMaps(leafsyncNamespace).Get(ctx, guard.RecordName("member-a"), metav1.GetOptions{})
		if err == nil && cm.Data[guard.KeyUserNoExecute] != "maintenance=true" {
			err = fmt.Errorf("record data %v", cm.Data)
		}
		return err
	})
}
