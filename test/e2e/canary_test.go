//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/leafsync/leafsync/internal/syncer/verify/canary"
	"github.com/leafsync/leafsync/test/harness"
)

// Images the kwok member's canary stages know; kwok pulls nothing.
const (
	canaryPassImage = "leafsync.local/canary-pass"
	canaryFailImage = "leafsync.local/canary-dns-fails"
	canaryHangImage = "leafsync.local/canary-hangs" // no stage: runs for ever
)

// canaryStages finish a running canary pod of image as `leafsync verify`
// would: its report as the termination message, exit code 0 or 1.
func canaryStages() string {
	stage := func(name, image, phase string, exit int, report string) string {
		return fmt.Sprintf(`apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: %s
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - {key: '.metadata.deletionTimestamp', operator: DoesNotExist}
    - {key: '.status.phase', operator: In, values: [Running]}
    - {key: '.spec.containers.[].image', operator: In, values: [%q]}
  next:
    statusTemplate: |
      {{ $now := Now }}
      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: false
        restartCount: 0
        started: false
        state:
          terminated:
            exitCode: %d
            finishedAt: {{ $now | Quote }}
            startedAt: {{ $now | Quote }}
            message: %q
      {{ end }}
      phase: %s
`, name, image, exit, report, phase)
	}
	return stage("canary-pass", canaryPassImage, "Succeeded", 0,
		`{"passed":true,"checks":[{"name":"api","outcome":"passed","detail":"GET /version with the pod's ServiceAccount token: v1.36.3"},{"name":"dns","outcome":"skipped","detail":"skipped: no cluster DNS"}]}`) +
		"---\n" + stage("canary-dns-fails", canaryFailImage, "Failed", 1,
		`{"passed":false,"checks":[{"name":"api","outcome":"passed"},{"name":"dns","outcome":"failed","detail":"lookup kubernetes.default: i/o timeout"}]}`)
}

// TestCanary runs the canary of a member's verification (canary.Run)
// against a real member API server, scheduler and ServiceAccount
// admission, with kwok as the member's kubelet: kwok runs no container, so
// its stages finish the pod with the report `leafsync verify` would write
// (the command itself runs on a real node in TestCanaryRealNode). Each
// outcome — passed, a failed check, a pod that never finishes, a member
// whose nodes are all cordoned — is the verdict Run returns, and no canary
// pod is left in the member after any of them.
func TestCanary(t *testing.T) {
	ctx := context.Background()
	member := harness.StartMember(t, harness.MemberOptions{Name: "member-a", Nodes: 1, KwokConfig: canaryStages()})
	if err := member.LiftNotReadyTaints(ctx); err != nil {
		t.Fatal(err)
	}
	if err := member.StartScheduler(); err != nil {
		t.Fatal(err)
	}
	// leafsync's claim creates its member namespace at registration.
	if err := member.EnsureNamespace(ctx, canary.Namespace); err != nil {
		t.Fatal(err)
	}
	mc := member.Client()

	run := func(image string, timeout time.Duration) canary.Result {
		t.Helper()
		r, err := canary.Run(ctx, mc, canary.Options{Image: image, Timeout: timeout})
		if err != nil {
			t.Fatalf("canary %s: %v", image, err)
		}
		t.Logf("canary %s: %s in %s: %s", image, r.Reason, r.Duration.Round(time.Millisecond), r.Message)
		noCanaryLeft(t, mc)
		return r
	}

	r := run(canaryPassImage, 2*time.Minute)
	if !r.Passed || r.Reason != canary.ReasonPassed || len(r.Checks) != 2 || r.Checks[1].Outcome != canary.OutcomeSkipped {
		t.Errorf("pass: got %+v", r)
	}

	r = run(canaryFailImage, 2*time.Minute)
	if r.Passed || r.Reason != canary.ReasonCheckFailed || strings.Join(canary.FailedChecks(r), ",") != canary.CheckDNS || !strings.Contains(r.Message, "i/o timeout") {
		t.Errorf("failed check: got %+v", r)
	}

	// A pod that runs and never reports: the timeout is the verdict, and
	// the running pod is deleted.
	r = run(canaryHangImage, 10*time.Second)
	if r.Passed || r.Reason != canary.ReasonTimeout || !strings.Contains(r.Message, "phase Running") || r.Duration < 10*time.Second {
		t.Errorf("hang: got %+v", r)
	}

	// Every member node cordoned: the scheduler never places the canary.
	nodes, err := mc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		n.Spec.Unschedulable = true
		if _, err := mc.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	r = run(canaryPassImage, 10*time.Second)
	if r.Passed || r.Reason != canary.ReasonNotScheduled || !strings.Contains(r.Message, "unschedulable") {
		t.Errorf("cordoned: got %+v", r)
	}
}

// TestCanaryRealNode runs the canary, leafsync's own image (make image)
// with `leafsync verify`, on a real kubelet node of a member (containerd,
// runc, the CNI bridge, kube-proxy; as in the conformance run): it
// reaches the member's API server through the kubernetes Service with its
// ServiceAccount token, resolves kubernetes.default through the harness's CoreDNS, and
// its report comes back through the termination message. An image the
// member cannot pull is a verdict that names the image and what to do.
// Needs root.
func TestCanaryRealNode(t *testing.T) {
	image := imageArchive(t)
	ref, err := harness.ImageRef(image)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	network := harness.StartNodeNetwork(t)
	member := harness.StartCluster(t, harness.ClusterOptions{
		Name:              "member",
		Controllers:       append(harness.MemberControllers, "nodelifecycle"),
		Scheduler:         true,
		KubeletClientCert: true,
		Address:           network.Gateway,
	})
	harness.StartNode(t, member, harness.NodeOptions{Name: "member-node", Network: network, Images: []string{image}})
	if err := member.EnsureNamespace(ctx, canary.Namespace); err != nil {
		t.Fatal(err)
	}

	r, err := canary.Run(ctx, member.Client(), canary.Options{Image: ref, Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("canary %s: %s in %s (create to verdict): %+v %s", ref, r.Reason, r.Duration.Round(time.Millisecond), r.Checks, r.Message)
	outcome := map[string]canary.Check{}
	for _, c := range r.Checks {
		outcome[c.Name] = c
	}
	if !r.Passed || outcome[canary.CheckAPI].Outcome != canary.OutcomePassed || !strings.Contains(outcome[canary.CheckAPI].Detail, "ServiceAccount token") {
		t.Errorf("got %+v, want a pass with the API check made with the pod's token", r)
	}
	// The node's cluster runs CoreDNS (test/harness): the check resolves
	// kubernetes.default through it; the skip without a cluster DNS is
	// TestVerify's (cmd/leafsync).
	if c := outcome[canary.CheckDNS]; c.Outcome != canary.OutcomePassed || !strings.Contains(c.Detail, "kubernetes.default") {
		t.Errorf("dns check %+v, want passed: the harness runs a cluster DNS", c)
	}

	const missing = "leafsync.local/no-such-image:1"
	r, err = canary.Run(ctx, member.Client(), canary.Options{Image: missing, Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("canary %s: %s in %s: %s", missing, r.Reason, r.Duration.Round(time.Millisecond), r.Message)
	if r.Passed || r.Reason != canary.ReasonImagePull || !strings.Contains(r.Message, missing) || !strings.Contains(r.Message, "leafsync.io/verify-canary-image") {
		t.Errorf("got %+v, want ImagePullFailed naming the image and the annotation", r)
	}
	noCanaryLeft(t, member.Client())
}

// noCanaryLeft: Run deleted its pod (gone once its node has cleaned up).
func noCanaryLeft(t *testing.T, c kubernetes.Interface) {
	t.Helper()
	harness.Eventually(t, time.Minute, "no canary pod left in the member", func() error {
		pods, err := c.CoreV1().Pods(canary.Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: canary.LabelCanary})
		if err != nil {
			return err
		}
		if len(pods.Items) > 0 {
			return fmt.Errorf("pod %s left", pods.Items[0].Name)
		}
		return nil
	})
}
