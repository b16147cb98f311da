//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/leafsync/leafsync/internal/leafnode"
	"github.com/leafsync/leafsync/test/harness"
)

// Test thresholds (testConfig): probe 1s, cordon 2s, NotReady 10s, Ready 4s.
const (
	probeInterval = time.Second
	notReadyAfter = 10 * time.Second
	readyAfter    = 4 * time.Second
	// writeSlack covers the leaf's write path (debounce, API round trip).
	writeSlack = 3 * time.Second
)

// TestLeafNode follows one member's leaf through its life on a real host:
// exact aggregated resources, a flap that changes nothing but the cordon, an
// outage that makes it NotReady on time and back, a slow host, and
// deregistration.
func TestLeafNode(t *testing.T) {
	f := newFleet(t, harness.HostOptions{}, harness.MemberOptions{Name: "member-a", Nodes: 2, Pods: 2})
	member := f.members["member-a"]
	hc := f.host.Client()
	ctx := context.Background()
	ls := f.startLeafsync(t, "leafsync")
	f.register(t, "member-a", nil)
	const leaf = "leaf-member-a"
	f.waitLeafReady(t, leaf, time.Minute)

	t.Run("exact aggregated resources", func(t *testing.T) {
		// 2 nodes x (4 CPU, 16Gi, 110 pods, 100Gi) minus 2 pods x (100m, 128Mi).
		waitAllocatable(t, f, leaf, map[corev1.ResourceName]string{
			"cpu": "7800m", "memory": "32512Mi", "pods": "218", "ephemeral-storage": "200Gi",
		})
		n := f.node(t, leaf)
		for k, v := range map[string]string{"leafsync.io/cluster": "member-a", "type": "virtual-kubelet", "kubernetes.io/role": "leaf"} {
			if n.Labels[k] != v {
				t.Errorf("label %s=%q, want %q", k, n.Labels[k], v)
			}
		}
		if !hasTaint(n, leafnode.TaintLeaf, corev1.TaintEffectNoSchedule) {
			t.Errorf("leaf lacks %s:NoSchedule: %v", leafnode.TaintLeaf, n.Spec.Taints)
		}
		gpu := harness.DefaultAllocatable()
		gpu["nvidia.com/gpu"] = resource.MustParse("2")
		if _, err := member.AddNodes(ctx, "gpu", 1, harness.NodeSpec{Allocatable: gpu}); err != nil {
			t.Fatal(err)
		}
		waitAllocatable(t, f, leaf, map[corev1.ResourceName]string{"cpu": "11800m", "nvidia.com/gpu": "2", "pods": "328"})
		if _, err := member.AddPods(ctx, "extra", 1, []string{"gpu-0"}, harness.PodSpec{Namespace: "workload",
			Requests: corev1.ResourceList{"cpu": resource.MustParse("1"), "nvidia.com/gpu": resource.MustParse("1")}}); err != nil {
			t.Fatal(err)
		}
		waitAllocatable(t, f, leaf, map[corev1.ResourceName]string{"cpu": "10800m", "nvidia.com/gpu": "1", "pods": "327"})
		// The member's pods are summed by node as they come and go
		// (leafnode.Usage): a pod gone gives back what it took.
		if err := member.Client().CoreV1().Pods("workload").Delete(ctx, "extra-0", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
		waitAllocatable(t, f, leaf, map[corev1.ResourceName]string{"cpu": "11800m", "nvidia.com/gpu": "2", "pods": "328"})
	})

	t.Run("no writes while nothing changes", func(t *testing.T) {
		// Resync runs every 10s and the condition heartbeat every 30s
		// (testConfig): over 20s of a quiet member, at most one heartbeat
		// write may land; a write storm would show dozens.
		series := `leafsync_leaf_writes_total{cluster="member-a"}`
		before := scrape(t, ls)[series]
		time.Sleep(20 * time.Second)
		after := scrape(t, ls)[series]
		t.Logf("leaf writes over 20s of a quiet member: %v (total so far %v)", after-before, after)
		if after-before > 1 {
			t.Errorf("%v leaf writes in 20s with nothing changing", after-before)
		}
		if after == 0 {
			t.Errorf("%s is 0: the metric does not count the writes that made the leaf", series)
		}
	})

	t.Run("flap shorter than notReadyAfter", func(t *testing.T) {
		rec := recordNode(t, f.host, leaf)
		before, err := f.lease(leaf)
		if err != nil {
			t.Fatal(err)
		}
		member.proxy.Cut()
		cutAt := time.Now()
		harness.Eventually(t, 10*time.Second, "cordon taint during the flap", func() error {
			if !hasTaint(f.node(t, leaf), leafnode.TaintUnreachable, corev1.TaintEffectNoSchedule) {
				return fmt.Errorf("not cordoned yet")
			}
			return nil
		})
		time.Sleep(time.Until(cutAt.Add(notReadyAfter / 2)))
		during, err := f.lease(leaf)
		if err != nil {
			t.Fatal(err)
		}
		if !during.Spec.RenewTime.After(before.Spec.RenewTime.Time) {
			t.Errorf("Lease not renewed during the flap: renewTime %s, before %s", during.Spec.RenewTime, before.Spec.RenewTime)
		}
		if err := member.proxy.Heal(); err != nil {
			t.Fatal(err)
		}
		t.Logf("member cut for %s", time.Since(cutAt).Round(time.Millisecond))
		harness.Eventually(t, 15*time.Second, "cordon lifted after the flap", func() error {
			if hasTaint(f.node(t, leaf), leafnode.TaintUnreachable, corev1.TaintEffectNoSchedule) {
				return fmt.Errorf("still cordoned")
			}
			return nil
		})
		// Give KCM a full grace period after the heal to react, if it would.
		time.Sleep(harness.DefaultTestTimings.NodeMonitorGracePeriod)
		obs := rec.observations(t)
		cordoned := false
		for _, o := range obs {
			if o.ready != corev1.ConditionTrue {
				t.Fatalf("leaf Ready=%s at %s during a %s flap", o.ready, o.at.Format(time.StampMilli), notReadyAfter/2)
			}
			if hasTaint(o.node, corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute) || hasTaint(o.node, corev1.TaintNodeNotReady, corev1.TaintEffectNoExecute) {
				t.Fatalf("KCM put a NoExecute taint on the leaf during a flap: %v", o.node.Spec.Taints)
			}
			cordoned = cordoned || hasTaint(o.node, leafnode.TaintUnreachable, corev1.TaintEffectNoSchedule)
		}
		if !cordoned {
			t.Fatal("the watch never saw the cordon taint")
		}
		t.Logf("%d versions of the leaf watched; Ready=True in all", len(obs))
	})

	t.Run("outage longer than notReadyAfter", func(t *testing.T) {
		member.proxy.Cut()
		cutAt := time.Now()
		var notReadyAt time.Time
		harness.Eventually(t, notReadyAfter+probeInterval+writeSlack+10*time.Second, "leaf NotReady", func() error {
			n := f.node(t, leaf)
			if s := harness.NodeReady(n); s == corev1.ConditionTrue {
				return fmt.Errorf("Ready=%s", s)
			}
			notReadyAt = time.Now()
			return nil
		})
		took := notReadyAt.Sub(cutAt)
		t.Logf("leaf NotReady %s after the cut (notReadyAfter %s + probe interval %s)", took.Round(time.Millisecond), notReadyAfter, probeInterval)
		if took < notReadyAfter {
			t.Errorf("NotReady after %s, before notReadyAfter %s", took, notReadyAfter)
		}
		// No tight upper bound: liveness is the Eventually above; the
		// figure is logged.
		n := f.node(t, leaf)
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionFalse && !strings.Contains(c.Message, "no successful probe since") {
				t.Errorf("NotReady message %q does not say why", c.Message)
			}
		}

		if err := member.proxy.Heal(); err != nil {
			t.Fatal(err)
		}
		healAt := time.Now()
		f.waitLeafReady(t, leaf, readyAfter+probeInterval+writeSlack+10*time.Second)
		seen := time.Since(healAt)
		// The engine's decision: the LeafReady Event leafsync records on
		// the leaf at the transition (eventTime in microseconds).
		var decided time.Duration
		evs, err := hc.EventsV1().Events("").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs.Items {
			at := e.EventTime.Time // the first of a series; the latest is LastObservedTime
			if e.Series != nil && e.Series.LastObservedTime.After(at) {
				at = e.Series.LastObservedTime.Time
			}
			if e.Regarding.Kind == "Node" && e.Regarding.Name == leaf && e.Reason == "LeafReady" && at.After(healAt) {
				if d := at.Sub(healAt); decided == 0 || d < decided {
					decided = d
				}
			}
		}
		// The breaker keeps its default 5s openTimeout: the probe does not
		// pass through it, so the first probe after the heal succeeds.
		t.Logf("leaf Ready again %s after the heal (decided at %s; readyAfter %s + probe interval %s)",
			seen.Round(time.Millisecond), decided.Round(time.Millisecond), readyAfter, probeInterval)
		if decided == 0 {
			t.Fatalf("no LeafReady Event on %s after the heal", leaf)
		}
		if decided < readyAfter {
			t.Errorf("Ready decided %s after the heal, before readyAfter %s", decided, readyAfter)
		}
		// Liveness, generous: the figure is logged above; on an idle
		// machine it is within readyAfter + probe interval + 0.5s.
		if decided > readyAfter+probeInterval+5*time.Second {
			t.Errorf("Ready decided %s after the heal, later than readyAfter + probe interval (+5s)", decided)
		}
		// Once Ready, the leaf stays Ready: KCM must not take it for a
		// silent node (a stale heartbeat) and flip it back to Unknown.
		rec := recordNode(t, f.host, leaf)
		time.Sleep(2 * harness.DefaultTestTimings.NodeMonitorGracePeriod)
		for _, o := range rec.observations(t) {
			if o.ready != corev1.ConditionTrue {
				t.Fatalf("leaf flipped to Ready=%s at %s after recovering", o.ready, o.at.Format(time.StampMilli))
			}
		}
		harness.Eventually(t, 30*time.Second, "KCM's taints gone once the leaf is Ready", func() error {
			n := f.node(t, leaf)
			if hasTaint(n, corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute) || hasTaint(n, corev1.TaintNodeUnreachable, corev1.TaintEffectNoSchedule) {
				return fmt.Errorf("taints %v", n.Spec.Taints)
			}
			return nil
		})
	})

	t.Run("slow host", func(t *testing.T) {
		rec := recordNode(t, f.host, leaf)
		if err := f.hostProxy.Latency(3*time.Second, 0); err != nil {
			t.Fatal(err)
		}
		time.Sleep(4 * harness.DefaultTestTimings.NodeMonitorGracePeriod)
		if err := f.hostProxy.Heal(); err != nil {
			t.Fatal(err)
		}
		for _, o := range rec.observations(t) {
			if o.ready != corev1.ConditionTrue {
				t.Fatalf("leaf Ready=%s at %s with 3s of latency to the host", o.ready, o.at.Format(time.StampMilli))
			}
		}
	})

	t.Run("deregistration removes leaf and lease", func(t *testing.T) {
		if err := hc.CoreV1().Secrets(leafsyncNamespace).Delete(ctx, "member-member-a", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		f.waitGone(t, "leaf node", func() error {
			_, err := hc.CoreV1().Nodes().Get(ctx, leaf, metav1.GetOptions{})
			return err
		})
		f.waitGone(t, "leaf lease", func() error { _, err := f.lease(leaf); return err })
		f.waitGone(t, "registration secret", func() error {
			_, err := hc.CoreV1().Secrets(leafsyncNamespace).Get(ctx, "member-member-a", metav1.GetOptions{})
			return err
		})
	})
}

func waitAllocatable(t *testing.T, f *fleet, leaf string, want map[corev1.ResourceName]string) {
	t.Helper()
	harness.Eventually(t, 20*time.Second, "leaf allocatable", func() error {
		n := f.node(t, leaf)
		for name, v := range want {
			got, ok := n.Status.Allocatable[name]
			if !ok || got.Cmp(resource.MustParse(v)) != 0 {
				return fmt.Errorf("allocatable[%s]=%s, want %s (all: %v)", name, got.String(), v, n.Status.Allocatable)
			}
			if c := n.Status.Capacity[name]; c.Cmp(resource.MustParse(v)) != 0 {
				return fmt.Errorf("capacity[%s]=%s, want %s", name, c.String(), v)
			}
		}
		return nil
	})
}
