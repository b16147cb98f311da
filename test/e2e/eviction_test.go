//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/leafsync/leafsync/test/harness"
)

// TestSilentLeafIsEvicted reproduces, on a real host control plane, the
// failure leafsync exists to prevent: a virtual node whose heartbeat stops
// is tainted unreachable, and kube-controller-manager's taint-eviction
// controller marks its pods DisruptionTarget=DeletionByTaintManager and
// deletes them as the node-controller service account. Every step is
// asserted; if KCM did not evict, the test fails.
func TestSilentLeafIsEvicted(t *testing.T) {
	host := harness.StartHost(t, harness.HostOptions{})
	memberA := harness.StartMember(t, harness.MemberOptions{Name: "member-a", Nodes: 2, Pods: 2})
	memberB := harness.StartMember(t, harness.MemberOptions{Name: "member-b", Nodes: 1, Pods: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, m := range []*harness.Cluster{memberA, memberB} {
		if err := m.WaitPodsRunning(ctx, "workload", []string{m.Name + "-pod-0"}, 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}

	hc := host.Client()
	const leaf = "leaf-test"
	createLeaf(ctx, t, hc, leaf)
	hb := startHeartbeat(ctx, hc, leaf, time.Second)

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeName:   leaf,
			Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}},
			// Short tolerations, as the DefaultTolerationSeconds admission
			// plugin adds with 300s in production.
			Tolerations: []corev1.Toleration{
				{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](3)},
				{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](3)},
			},
		},
	}
	if _, err := hc.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// While the heartbeat runs, the node stays Ready and untainted for well
	// over the grace period.
	quiet := 3 * harness.DefaultTestTimings.NodeMonitorGracePeriod
	assertNodeUntainted(ctx, t, hc, leaf, quiet)

	// Stop the heartbeat: from here on KCM sees a silent node.
	stopped := time.Now()
	hb()

	waitNodeTaint(ctx, t, hc, leaf, corev1.TaintNodeUnreachable, corev1.TaintEffectNoSchedule)
	waitNodeTaint(ctx, t, hc, leaf, corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute)
	harness.Eventually(t, time.Minute, "leaf Ready=Unknown", func() error {
		n, err := hc.CoreV1().Nodes().Get(ctx, leaf, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s := harness.NodeReady(n); s != corev1.ConditionUnknown {
			return fmt.Errorf("Ready=%s", s)
		}
		return nil
	})

	// The taint-eviction controller marks the pod and deletes it.
	var evicted *corev1.Pod
	harness.Eventually(t, 2*time.Minute, "pod marked for deletion by the taint manager", func() error {
		p, err := hc.CoreV1().Pods("default").Get(ctx, "web-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.DeletionTimestamp == nil {
			return errors.New("no deletionTimestamp yet")
		}
		evicted = p
		return nil
	})
	t.Logf("pod deleted %s after the heartbeat stopped", time.Since(stopped).Round(time.Second))
	cond := podCondition(evicted, corev1.DisruptionTarget)
	if cond == nil || cond.Status != corev1.ConditionTrue || cond.Reason != "DeletionByTaintManager" {
		t.Fatalf("evicted pod's DisruptionTarget condition = %+v, want True/DeletionByTaintManager", cond)
	}
	// Without a kubelet, nobody finishes the pod: it stays Terminating.
	if len(evicted.Finalizers) == 0 && evicted.DeletionGracePeriodSeconds != nil && *evicted.DeletionGracePeriodSeconds == 0 {
		t.Fatalf("pod was deleted with grace 0; want a graceful delete that leaves it Terminating")
	}

	// The audit log names who deleted it.
	deletes, err := host.AuditEvents(func(e harness.AuditEvent) bool {
		return e.Verb == "delete" && e.ObjectRef.Resource == "pods" && e.ObjectRef.Subresource == "" && e.ObjectRef.Name == "web-0"
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(deletes) == 0 {
		t.Fatal("no DELETE of web-0 in the host's audit log")
	}
	if got, want := deletes[0].User.Username, "system:serviceaccount:kube-system:node-controller"; got != want {
		t.Fatalf("web-0 deleted by %q, want %q", got, want)
	}
	t.Logf("DELETE of web-0 by %s (user agent %q)", deletes[0].User.Username, deletes[0].UserAgent)

	// The members were never touched: their pods still run.
	for _, m := range []*harness.Cluster{memberA, memberB} {
		if err := m.WaitPodsRunning(ctx, "workload", []string{m.Name + "-pod-0"}, 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFaultProxyCutsMember shows a member behind the fault proxy becoming
// unreachable when cut and answering again when healed.
func TestFaultProxyCutsMember(t *testing.T) {
	member := harness.StartMember(t, harness.MemberOptions{Name: "member-a", Nodes: 1})
	fp := harness.NewFaultProxy(t, "member-a", member.Addr())
	cfg := member.RESTConfig()
	cfg.Host = "https://" + fp.Addr()
	cfg.Timeout = 2 * time.Second
	client := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	get := func() error {
		_, err := client.CoreV1().Nodes().Get(ctx, "member-a-node-0", metav1.GetOptions{})
		return err
	}

	if err := get(); err != nil {
		t.Fatalf("through the healthy proxy: %v", err)
	}
	fp.Cut()
	if err := get(); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("through the cut proxy: want connection refused, got %v", err)
	}
	if err := fp.Heal(); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 10*time.Second, "member answers after heal", get)

	if err := fp.Blackhole(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := get(); err == nil {
		t.Fatal("through the blackholed proxy: want a timeout, got an answer")
	} else if !strings.Contains(err.Error(), "Timeout") && !strings.Contains(err.Error(), "deadline") {
		t.Fatalf("through the blackholed proxy: want a timeout, got %v", err)
	}
	t.Logf("blackholed request failed after %s", time.Since(start).Round(time.Millisecond))
	if err := fp.Heal(); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 10*time.Second, "member answers after heal", get)
}

func createLeaf(ctx context.Context, t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: name,
		// Its own zone, as leafsync gives each leaf: a zone whose only node
		// is down is fully disrupted and evicted at the normal rate, while
		// the host's other zones stay healthy.
		Labels: map[string]string{"type": "virtual-kubelet", "topology.kubernetes.io/zone": name},
	}}
	if _, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: corev1.NamespaceNodeLease},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](40)},
	}
	if _, err := c.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// KCM's controllers write a new Node too (its taints, its CIDR): the
	// first report of Ready may meet their change and is tried again.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error { return heartbeat(ctx, c, name) }); err != nil {
		t.Fatal(err)
	}
}

// heartbeat does what a kubelet does: renew the Lease and report Ready.
func heartbeat(ctx context.Context, c kubernetes.Interface, name string) error {
	now := metav1.NowMicro()
	lease, err := c.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	lease.Spec.RenewTime = &now
	if _, err := c.CoordinationV1().Leases(corev1.NamespaceNodeLease).Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		return err
	}
	node, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if harness.NodeReady(node) == corev1.ConditionTrue {
		return nil
	}
	node.Status.Capacity = harness.DefaultAllocatable()
	node.Status.Allocatable = harness.DefaultAllocatable()
	node.Status.Conditions = []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
	}}
	_, err = c.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	return err
}

// startHeartbeat renews the leaf's heartbeat every interval until the
// returned stop function is called (which waits for the loop to end).
func startHeartbeat(ctx context.Context, c kubernetes.Interface, name string, every time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				_ = heartbeat(ctx, c, name)
			}
		}
	}()
	return func() { cancel(); <-done }
}

// assertNodeUntainted watches the node for d and fails on any taint or on
// Ready leaving True.
func assertNodeUntainted(ctx context.Context, t *testing.T, c kubernetes.Interface, name string, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	w, err := c.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok {
				return
			}
			if ev.Type == watch.Error {
				t.Fatalf("watch error: %v", ev.Object)
			}
			n, ok := ev.Object.(*corev1.Node)
			if !ok {
				continue
			}
			if len(n.Spec.Taints) > 0 {
				t.Fatalf("heartbeating node %s got taints %v", name, n.Spec.Taints)
			}
			if s := harness.NodeReady(n); s != corev1.ConditionTrue {
				t.Fatalf("heartbeating node %s has Ready=%s", name, s)
			}
		}
	}
}

func waitNodeTaint(ctx context.Context, t *testing.T, c kubernetes.Interface, node, key string, effect corev1.TaintEffect) {
	t.Helper()
	harness.Eventually(t, time.Minute, fmt.Sprintf("taint %s:%s on %s", key, effect, node), func() error {
		n, err := c.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, tt := range n.Spec.Taints {
			if tt.Key == key && tt.Effect == effect {
				return nil
			}
		}
		return fmt.Errorf("taints %v", n.Spec.Taints)
	})
}

func podCondition(p *corev1.Pod, typ corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == typ {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

var errEmptyHolder = errors.New("no holder")
