//go:build e2e

package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/leafsync/leafsync/test/harness"
)

// TestSmoke runs the built binary between a real host (KCM, scheduler) and
// a real member (2 kwok nodes, its own scheduler) behind a fault proxy:
// the Node gets Ready, a pod round-trips, and a member outage shows what
// stock VK does (times are logged).
func TestSmoke(t *testing.T) {
	if os.Getenv("LEAFSYNC_E2E_LOGS") == "" {
		// Keep logs inside this module, not in the repository's _output.
		dir, _ := filepath.Abs(filepath.Join("_output", "e2e-logs"))
		t.Setenv("LEAFSYNC_E2E_LOGS", dir)
	}
	ctx := context.Background()
	const leaf, ns = "vk-smoke", "apps"

	bin := filepath.Join(t.TempDir(), "vk-baseline")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	host := harness.StartHost(t, harness.HostOptions{})
	member := harness.StartMember(t, harness.MemberOptions{Name: "member", Nodes: 2})
	if err := member.LiftNotReadyTaints(ctx); err != nil {
		t.Fatal(err)
	}
	if err := member.StartScheduler(); err != nil {
		t.Fatal(err)
	}
	link := harness.NewFaultProxy(t, "member", member.Addr())

	dir := harness.LogDir(t)
	hostKC, memberKC := filepath.Join(dir, "vk-host.kubeconfig"), filepath.Join(dir, "vk-member.kubeconfig")
	if err := os.WriteFile(hostKC, host.Kubeconfig(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(memberKC, member.KubeconfigVia(link.Addr()), 0o600); err != nil {
		t.Fatal(err)
	}
	port, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	healthAddr := fmt.Sprintf("127.0.0.1:%d", port)
	start := time.Now()
	// Renew well inside the test KCM's 8s grace period (VK's 10s would
	// make the node Unknown between renewals).
	proc := harness.StartBinary(t, "vk-baseline", bin,
		"--kubeconfig="+hostKC, "--member-kubeconfig="+memberKC, "--node-name="+leaf,
		"--lease-duration=40s", "--lease-renew-interval=2s", "--health-addr="+healthAddr, "-v=2")

	harness.Eventually(t, 30*time.Second, "/healthz", func() error {
		resp, err := http.Get("http://" + healthAddr + "/healthz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s", resp.Status)
		}
		return nil
	})
	hc, mc := host.Client(), member.Client()
	waitReady := func(ready bool, timeout time.Duration) {
		t.Helper()
		harness.Eventually(t, timeout, fmt.Sprintf("node ready=%v", ready), func() error {
			n, err := hc.CoreV1().Nodes().Get(ctx, leaf, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if s := harness.NodeReady(n); ready != (s == corev1.ConditionTrue) {
				return fmt.Errorf("Ready=%q", s)
			}
			return nil
		})
	}
	waitReady(true, 2*time.Minute)
	t.Logf("node Ready %s after start", time.Since(start).Round(time.Millisecond))

	n, err := hc.CoreV1().Nodes().Get(ctx, leaf, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels["type"] != "virtual-kubelet" || n.Labels[contestantLabel] != contestant {
		t.Errorf("node labels %v", n.Labels)
	}
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "leafsync.io/leaf" || n.Spec.Taints[0].Effect != corev1.TaintEffectNoSchedule {
		t.Errorf("node taints %v", n.Spec.Taints)
	}
	if q := n.Status.Allocatable[corev1.ResourcePods]; q.Value() != 1000 {
		t.Errorf("allocatable pods %s", q.String())
	}
	lease, err := hc.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, leaf, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("node Lease: %v", err)
	}
	if ptr.Deref(lease.Spec.LeaseDurationSeconds, 0) != 40 {
		t.Errorf("Lease duration %v", lease.Spec.LeaseDurationSeconds)
	}

	// A pod round-trips: host Deployment -> member pod on a kwok node ->
	// host pod Running and Ready -> deleted in the host and in the member.
	if err := host.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	if _, err := hc.AppsV1().Deployments(ns).Create(ctx, smokeDeployment(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var hostPod corev1.Pod
	pods, err := host.WaitPods(ctx, ns, "app=smoke", 2*time.Minute, func(ps []corev1.Pod) error {
		if len(ps) != 1 {
			return fmt.Errorf("%d host pods", len(ps))
		}
		p := ps[0]
		if p.Spec.NodeName != leaf || p.Status.Phase != corev1.PodRunning || !podReady(&p) || p.Status.PodIP == "" {
			return fmt.Errorf("host pod on %q: phase %s ready %v ip %q", p.Spec.NodeName, p.Status.Phase, podReady(&p), p.Status.PodIP)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	hostPod = pods[0]
	t.Logf("host pod Running and Ready %s after the Deployment", time.Since(created).Round(time.Millisecond))
	mp, err := mc.CoreV1().Pods(ns).Get(ctx, hostPod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("member pod: %v", err)
	}
	if mp.Annotations[hostUIDAnnotation] != string(hostPod.UID) || mp.Labels[contestantLabel] != contestant ||
		mp.Spec.NodeName == "" || mp.Status.Phase != corev1.PodRunning || mp.Status.PodIP != hostPod.Status.PodIP {
		t.Errorf("member pod: node %q phase %s ip %q (host %q) labels %v annotations %v",
			mp.Spec.NodeName, mp.Status.Phase, mp.Status.PodIP, hostPod.Status.PodIP, mp.Labels, mp.Annotations)
	}

	deleted := time.Now()
	if err := hc.AppsV1().Deployments(ns).Delete(ctx, "smoke", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, time.Minute, "member pod deleted", func() error {
		_, err := mc.CoreV1().Pods(ns).Get(ctx, hostPod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
	t.Logf("member pod gone %s after deleting the Deployment", time.Since(deleted).Round(time.Millisecond))
	harness.Eventually(t, time.Minute, "host pod deleted", func() error {
		_, err := hc.CoreV1().Pods(ns).Get(ctx, hostPod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
	t.Logf("host pod gone %s after deleting the Deployment", time.Since(deleted).Round(time.Millisecond))

	// Member outage: pings fail, VK stops renewing the Lease, KCM makes the
	// node Unknown; after healing, the Lease is renewed at once but Ready
	// comes back only with VK's next status update (1 min interval).
	cut := time.Now()
	link.Cut()
	waitReady(false, time.Minute)
	t.Logf("node not Ready %s after cutting the member", time.Since(cut).Round(time.Millisecond))
	lease, err = hc.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, leaf, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	frozen := lease.Spec.RenewTime.Time
	t.Logf("Lease last renewed %s after the cut", frozen.Sub(cut).Round(time.Millisecond))
	time.Sleep(5 * time.Second)
	if lease, err = hc.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, leaf, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if !lease.Spec.RenewTime.Time.Equal(frozen) {
		t.Errorf("Lease renewed during the outage: %s then %s", frozen, lease.Spec.RenewTime.Time)
	}

	healed := time.Now()
	if err := link.Heal(); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, time.Minute, "Lease renewed after heal", func() error {
		l, err := hc.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, leaf, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !l.Spec.RenewTime.Time.After(frozen) {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	t.Logf("Lease renewed again %s after healing", time.Since(healed).Round(time.Millisecond))
	waitReady(true, 2*time.Minute)
	t.Logf("node Ready again %s after healing", time.Since(healed).Round(time.Millisecond))

	// SIGTERM: exit 0, the Node stays (as stock VK leaves it).
	proc.Stop(15 * time.Second)
	if exited, err := proc.Exited(); !exited || err != nil {
		t.Errorf("after SIGTERM: exited %v, %v (want exit 0)", exited, err)
	}
	if _, err := hc.CoreV1().Nodes().Get(ctx, leaf, metav1.GetOptions{}); err != nil {
		t.Errorf("node after exit: %v", err)
	}
	// Every status the provider handed VK was accepted by the host.
	logText, err := os.ReadFile(proc.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(logText), "Error processing pod status update") {
		t.Errorf("VK failed to write a pod status; see %s", proc.LogPath())
	}
}

func smokeDeployment() *appsv1.Deployment {
	lbls := map[string]string{"app": "smoke"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke", Namespace: "apps"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: lbls},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbls},
				Spec: corev1.PodSpec{
					NodeSelector:                  map[string]string{contestantLabel: contestant},
					Tolerations:                   []corev1.Toleration{{Key: "leafsync.io/leaf", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
					TerminationGracePeriodSeconds: ptr.To[int64](5),
					Containers: []corev1.Container{{
						Name: "app", Image: "registry.example/app:1",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi"),
						}},
					}},
				},
			},
		},
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
