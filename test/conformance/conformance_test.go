//go:build conformance

package conformance

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leafsync/leafsync/test/harness"
)

// leafsyncConfig: the e2e thresholds (a Lease renewed well inside the host
// KCM's 8s grace), the kubelet API on so that logs, exec and attach reach
// the member's kubelet, and the leaf verified within seconds without the
// canary (leafsync's image is not on the member's node). Flap damping is
// off: the suite measures pods on a leaf, not flap handling, and a probe
// late on a loaded 2-core machine must not cordon the only leaf for the
// penalty's half-life (it did in a run of 2026-11-25, and every spec after
// found no schedulable node).
const leafsyncConfig = `
hysteresis: {probeInterval: 1s, cordonAfter: 2s, notReadyAfter: 10s, readyAfter: 4s, window: 60s, penaltyPerFlap: 0}
leaves: {leaseRenewInterval: 1s, leaseDuration: 40s, leaseRenewTimeout: 8s}
members: {probeTimeout: 1s}
kubeletAPI: {enabled: true, port: %d, advertiseAddress: 127.0.0.1, connectTimeout: 2s}
verification: {retryMin: 1s, retryMax: 2s, canary: false}
`

// TestConformance starts the topology, runs e2e.test with the focus
// serially against the host, and writes the report to $CONFORMANCE_REPORT
// (default _output/conformance). $CONFORMANCE_FOCUS narrows the run (a
// regular expression); CONFORMANCE_SMOKE=1 runs the Smoke specs alone;
// $CONFORMANCE_TIMEOUT bounds the suite (default 6h; the specs it did not
// reach are reported as not run).
//
//	host:   etcd, kube-apiserver (kubelet client certificate), KCM with the
//	        controllers the specs need, kube-scheduler; no worker node, so
//	        every pod the suite creates lands on the leaf
//	member: etcd, kube-apiserver, KCM, kube-scheduler, one real kubelet node
//	        (containerd, runc, CNI bridge) with the suite's images imported
//	leafsync: bin/leafsync (or $LEAFSYNC_BINARY), the member registered
//	        with its leaf untainted and privileged pods allowed
func TestConformance(t *testing.T) {
	suite := harness.Bin(t, "e2e.test")
	images, err := filepath.Glob(filepath.Join(filepath.Dir(suite), "conformance-images", "*.tar"))
	if err != nil || len(images) == 0 {
		t.Fatalf("no test images in %s (test/conformance/build.sh): %v", filepath.Dir(suite), err)
	}
	ctx := context.Background()
	network := harness.StartNodeNetwork(t)
	host := harness.StartCluster(t, harness.ClusterOptions{
		Name:              "host",
		Controllers:       append(harness.HostControllers, "replicationcontroller", "endpoint", "endpointslice"),
		Scheduler:         true,
		KubeletClientCert: true,
		Address:           network.Gateway,
	})
	// The member's endpointslice controller gives its copies of host
	// Services the endpoints of the member's pods, as in any cluster
	// (Guestbook's frontend finds its backend by name through the node's
	// cluster DNS).
	member := harness.StartCluster(t, harness.ClusterOptions{
		Name:              "member",
		Controllers:       append(harness.MemberControllers, "nodelifecycle", "endpointslice"),
		Scheduler:         true,
		KubeletClientCert: true,
		Address:           network.Gateway,
	})
	harness.StartNode(t, member, harness.NodeOptions{Name: "member-node", Network: network, Images: images})

	// The host's API server reaches the leaf's kubelet API (leafsync) as
	// kubeadm's reaches kubelets.
	if _, err := host.Client().RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-apiserver-kubelet-client"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:kubelet-api-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: harness.KubeletClientUser}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const ns = "leafsync-system"
	if err := host.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	port, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	dir := harness.LogDir(t)
	config := filepath.Join(dir, "leafsync-config.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(leafsyncConfig, port)), 0o600); err != nil {
		t.Fatal(err)
	}
	// Pods on the leaf reach the host API server where the node's pods
	// reach the gateway: their in-cluster clients (agnhost nettest in the
	// PreStop spec) talk to the host as their host ServiceAccount.
	harness.StartLeafsync(t, "leafsync", host.Kubeconfig(), "--namespace="+ns, "--config="+config, "--host-api-server="+host.Addr())
	if _, err := host.Client().CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: "member-member", Namespace: ns,
			Labels: map[string]string{"leafsync.io/cluster": "member"},
			Annotations: map[string]string{
				"leafsync.io/leaf-taint":   "false",      // the framework schedules only on untainted nodes
				"leafsync.io/pod-security": "privileged", // the Security Context specs run privileged pods
			},
		},
		Data: map[string][]byte{"kubeconfig": member.Kubeconfig()},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 2*time.Minute, "leaf-member Ready and untainted", func() error {
		n, err := host.Client().CoreV1().Nodes().Get(ctx, "leaf-member", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(n.Spec.Taints) > 0 {
			return fmt.Errorf("taints %v", n.Spec.Taints)
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("not Ready")
	})

	focus := Focus
	if f := os.Getenv("CONFORMANCE_FOCUS"); f != "" {
		focus = f
	}
	if os.Getenv("CONFORMANCE_SMOKE") == "1" {
		focus = Smoke
	}
	timeout := "6h"
	if d := os.Getenv("CONFORMANCE_TIMEOUT"); d != "" {
		timeout = d
	}
	var skips []string
	for s := range Skips {
		skips = append(skips, s)
	}
	kubeconfig, err := host.WriteKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	junitDir := filepath.Join(dir, "suite")
	logPath := filepath.Join(dir, "e2e.test.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(suite,
		"--kubeconfig="+kubeconfig,
		"--provider=skeleton",
		"--kubectl-path="+harness.Bin(t, "kubectl"),
		"--node-os-distro=debian",
		"--disable-log-dump",
		"--dump-logs-on-failure=false",
		"--report-dir="+junitDir,
		"--ginkgo.focus="+focus,
		"--ginkgo.skip="+strings.Join(skips, "|"),
		"--ginkgo.timeout="+timeout,
		"--ginkgo.no-color",
		"--ginkgo.v",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	start := time.Now()
	t.Logf("running e2e.test (log: %s)", logPath)
	runErr := cmd.Run()
	wall := time.Since(start)
	t.Logf("e2e.test ended after %s: %v", wall.Round(time.Second), runErr)

	junit := filepath.Join(junitDir, "junit_01.xml")
	specs, err := readJUnit(junit, Focus)
	if err != nil {
		t.Fatal(err)
	}
	markSkipped(specs, Skips)
	out := os.Getenv("CONFORMANCE_REPORT")
	if out == "" {
		root, err := harness.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		out = filepath.Join(root, "_output", "conformance")
	}
	r := report{Focus: focus, Wall: wall, Specs: specs, Skips: Skips, Machine: harness.Machine()}
	if err := r.write(out); err != nil {
		t.Fatal(err)
	}
	t.Logf("report in %s: %s", out, r.totals())
	for _, s := range specs {
		if s.Result == "failed" {
			t.Errorf("failed: %s: %s", s.Name, s.Reason)
		}
	}
	if runErr != nil && r.count("failed") == 0 {
		t.Errorf("e2e.test: %v (see %s)", runErr, logPath)
	}
}
