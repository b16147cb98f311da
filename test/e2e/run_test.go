//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leafsync/leafsync/test/harness"
)

// TestRunServesHealthAndStopsOnSIGTERM runs the real binary against a real
// API server: it becomes ready, takes the leader Lease, and exits 0 on
// SIGTERM, releasing the Lease so a successor need not wait it out.
func TestRunServesHealthAndStopsOnSIGTERM(t *testing.T) {
	host := harness.StartCluster(t, harness.ClusterOptions{Name: "host"})
	ctx := context.Background()
	if err := host.EnsureNamespace(ctx, "leafsync-system"); err != nil {
		t.Fatal(err)
	}
	ls := harness.StartLeafsync(t, "leafsync", host.Kubeconfig(), "--namespace=leafsync-system", "--leader-elect")

	var holder string
	harness.Eventually(t, 30*time.Second, "leader Lease taken", func() error {
		l, err := host.Client().CoordinationV1().Leases("leafsync-system").Get(ctx, "leafsync-leader", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			return errEmptyHolder
		}
		holder = *l.Spec.HolderIdentity
		return nil
	})
	t.Logf("leader: %s", holder)

	start := time.Now()
	if err := ls.Terminate(15 * time.Second); err != nil {
		t.Fatalf("leafsync exit after SIGTERM: %v", err)
	}
	t.Logf("leafsync exited %s after SIGTERM", time.Since(start).Round(time.Millisecond))
	l, err := host.Client().CoordinationV1().Leases("leafsync-system").Get(ctx, "leafsync-leader", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
		t.Fatalf("leader Lease still held by %q after a clean stop", *l.Spec.HolderIdentity)
	}
}

// TestRunRejectsBadConfig: invalid flags or config exit non-zero with a
// message naming the bad field, before touching any cluster.
func TestRunRejectsBadConfig(t *testing.T) {
	cases := map[string]struct {
		args []string
		want string
	}{
		"bad log level":       {[]string{"--log-level=loud"}, "logLevel"},
		"bad namespace":       {[]string{"--namespace=Not_A_Namespace"}, "namespace"},
		"bad metrics address": {[]string{"--metrics-bind-address=nonsense"}, "metricsBindAddress"},
		"missing config file": {[]string{"--config=/nonexistent/leafsync.yaml"}, "reading config file"},
		"unknown flag":        {[]string{"--no-such-flag"}, "no-such-flag"},
	}
	dir := t.TempDir()
	for name, body := range map[string]string{
		"unknown.yaml":    "namespace: leafsync-system\nlogLevl: debug\n",
		"hysteresis.yaml": "hysteresis:\n  suppress: 500\n  reuse: 900\n",
		"election.yaml":   "leaderElection:\n  leaseDuration: 5s\n  renewDeadline: 10s\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cases["misspelt config key"] = struct {
		args []string
		want string
	}{[]string{"--config=" + filepath.Join(dir, "unknown.yaml")}, "logLevl"}
	cases["reuse above suppress"] = struct {
		args []string
		want string
	}{[]string{"--config=" + filepath.Join(dir, "hysteresis.yaml")}, "hysteresis.reuse"}
	cases["renew deadline above lease"] = struct {
		args []string
		want string
	}{[]string{"--config=" + filepath.Join(dir, "election.yaml")}, "leaderElection.renewDeadline"}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := exec.Command(harness.LeafsyncBinary(t), append([]string{"run"}, tc.args...)...).CombinedOutput()
			if err == nil {
				t.Fatalf("leafsync run %v exited 0; output:\n%s", tc.args, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Fatalf("leafsync run %v: output does not name %q:\n%s", tc.args, tc.want, out)
			}
		})
	}
}
