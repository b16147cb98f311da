//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/leafsync/leafsync/test/harness"
)

// Verification's names (docs/verification.md), spelled out so that the
// test also builds, and fails, on a leafsync without it.
const (
	taintUnverified          = "leafsync.io/unverified"
	annVerified              = "leafsync.io/verified"
	annVerifyFailed          = "leafsync.io/verify-failed"
	reasonVerificationFailed = "VerificationFailed"
	reasonVerificationLost   = "VerificationLost"
	reasonMemberVerified     = "MemberVerified"
)

// verifyMemberRules are the rights `leafsync register
// --create-service-account` grants in a member (cmd/leafsync's
// memberRules), but for pods without create: podsCreate says whether to
// add it.
func verifyMemberRules(podsCreate bool) []rbacv1.PolicyRule {
	podVerbs := []string{"get", "list", "watch", "update", "patch", "delete"}
	if podsCreate {
		podVerbs = append(podVerbs, "create")
	}
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: podVerbs},
		{APIGroups: []string{""}, Resources: []string{"pods/status"}, Verbs: []string{"get", "update", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"pods/eviction"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"pods/resize", "pods/ephemeralcontainers"}, Verbs: []string{"update"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch", "create", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets", "services"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		{NonResourceURLs: []string{"/readyz", "/livez", "/healthz"}, Verbs: []string{"get"}},
	}
}

// TestVerification: a member gets new pods only after leafsync has shown
// it can run them (#31).
//
//   - registered with credentials that lack create pods, its leaf is Ready
//     but tainted leafsync.io/unverified:NoSchedule, a Warning Event names
//     the missing right, and a host pod for it stays unplaced;
//   - granted the right, it is verified within one retry, the taint goes
//     and the pod runs;
//   - the right revoked (re-verification every 3s), the verified leaf is
//     cordoned with the reason; every node cordoned in the member, it
//     stays unverified. Throughout, the leaf is never NotReady, and the
//     running pod is never deleted in the member.
func TestVerification(t *testing.T) {
	ctx := context.Background()
	f := newPodSyncFleet(t, "member-v")
	cfg := strings.Replace(testConfig, "verification:\n", "verification:\n  interval: 3s\n", 1)
	if err := os.WriteFile(f.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	m := f.members["member-v"]
	const leaf, secret, role = "leaf-member-v", "member-member-v", "leafsync-verify-test"
	setRole := func(podsCreate bool) {
		t.Helper()
		cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role}, Rules: verifyMemberRules(podsCreate)}
		if _, err := m.Client().RbacV1().ClusterRoles().Update(ctx, cr, metav1.UpdateOptions{}); err != nil {
			if _, err := m.Client().RbacV1().ClusterRoles().Create(ctx, cr, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	setRole(false)
	kubeconfig, err := m.ServiceAccountKubeconfig(ctx, "leafsync-system", "limited", m.proxy.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Client().RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "leafsync-system", Name: "limited"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	f.startLeafsync(t, "leafsync")
	start := time.Now()
	if _, err := f.host.Client().CoreV1().Secrets(leafsyncNamespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secret, Namespace: leafsyncNamespace, Labels: map[string]string{"leafsync.io/cluster": "member-v"}},
		Data:       map[string][]byte{"kubeconfig": kubeconfig},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitLeafReady(t, leaf, time.Minute)
	leafRec := recordNode(t, f.host, leaf)

	// Without create pods: tainted, a Warning naming the right, no pod placed.
	ev := waitEvent(t, f, secret, reasonVerificationFailed, start, 30*time.Second)
	if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Note, "create pods") {
		t.Errorf("event %s %q: want a Warning naming create pods", ev.Type, ev.Note)
	}
	waitTaint(t, f, leaf, "rights", 10*time.Second)
	if s := getSecret(t, f, secret); s.Annotations[annVerified] != "false" || !strings.Contains(s.Annotations[annVerifyFailed], "create pods") {
		t.Errorf("Secret annotations %s=%q %s=%q", annVerified, s.Annotations[annVerified], annVerifyFailed, s.Annotations[annVerifyFailed])
	}
	f.createWorkloads(t, []harness.LeafWorkload{leafWorkload("web", 1, leaf)}, nil)
	time.Sleep(5 * time.Second)
	for _, p := range listPods(t, f.host, "app=web") {
		if p.Spec.NodeName != "" {
			t.Fatalf("host pod %s was placed on %s while the leaf is unverified", p.Name, p.Spec.NodeName)
		}
	}

	// Granted: verified within one retry (retryMax 2s), and the pod runs.
	setRole(true)
	granted := time.Now()
	waitTaint(t, f, leaf, "", 20*time.Second)
	t.Logf("verified %.1fs after the right was granted", time.Since(granted).Seconds())
	waitEvent(t, f, secret, reasonMemberVerified, granted, 10*time.Second)
	running := waitHostPodsReady(t, f, "app=web", 1, 90*time.Second, leaf)
	waitOneToOne(t, f, "member-v", leaf, time.Minute)
	memberPods := listPods(t, m.Cluster, managedPodSelector)
	if len(memberPods) != 1 {
		t.Fatalf("%d member pods, want 1", len(memberPods))
	}
	memberRec := recordPods(t, m.Cluster, managedPodSelector)

	// Revoked after the pass: cordoned with the reason at the next
	// re-verification; the leaf stays Ready and the pod keeps running.
	setRole(false)
	revoked := time.Now()
	waitTaint(t, f, leaf, "rights", 20*time.Second)
	ev = waitEvent(t, f, secret, reasonVerificationLost, revoked, 10*time.Second)
	if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Note, "create pods") {
		t.Errorf("event %s %q: want a Warning naming create pods", ev.Type, ev.Note)
	}
	setRole(true)
	waitTaint(t, f, leaf, "", 20*time.Second)

	// Every member node cordoned: unverified, and it stays so.
	nodes, err := m.Client().CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		setUnschedulable(t, m.Client(), n.Name, true)
	}
	waitTaint(t, f, leaf, "capacity", 20*time.Second)
	time.Sleep(10 * time.Second) // three re-verifications
	if v := taintValue(f.node(t, leaf)); v != "capacity" {
		t.Errorf("with every member node cordoned the leaf's taint is %q, want capacity", v)
	}
	hp := listPods(t, f.host, "app=web")
	if len(hp) != 1 || hp[0].UID != running[0].UID || hp[0].Status.Phase != corev1.PodRunning {
		t.Errorf("host pods %v, want %s still Running", podNames(hp), running[0].Name)
	}

	for _, o := range leafRec.observations(t) {
		if o.ready != corev1.ConditionTrue {
			t.Fatalf("leaf Ready=%q at %s: verification must never change readiness", o.ready, o.at.Format(time.RFC3339Nano))
		}
	}
	for _, e := range memberRec.events(t) {
		if e.typ == watch.Deleted || e.pod.DeletionTimestamp != nil {
			t.Fatalf("member pod %s deleted at %s while verification failed", e.pod.Name, e.at.Format(time.RFC3339Nano))
		}
	}
}

// waitTaint waits until the leaf's leafsync.io/unverified taint has the
// value want ("": no such taint).
func waitTaint(t *testing.T, f *fleet, leaf, want string, timeout time.Duration) {
	t.Helper()
	harness.Eventually(t, timeout, fmt.Sprintf("leaf %s taint %s=%q", leaf, taintUnverified, want), func() error {
		n, err := f.host.Client().CoreV1().Nodes().Get(context.Background(), leaf, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := taintValue(n); got != want {
			return fmt.Errorf("taint value %q (taints %v)", got, n.Spec.Taints)
		}
		return nil
	})
}

func taintValue(n *corev1.Node) string {
	i := slices.IndexFunc(n.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == taintUnverified && t.Effect == corev1.TaintEffectNoSchedule
	})
	if i < 0 {
		return ""
	}
	return n.Spec.Taints[i].Value
}

func podNames(ps []corev1.Pod) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}

// TestVerificationCanary: verification runs the canary through leafsync, in
// a kwok member whose stages finish the canary pod as `leafsync verify`
// would (TestCanary's canaryStages). With the passing image the leaf is
// verified; the registration's leafsync.io/verify-canary-image switched to
// an image whose DNS check fails, it is re-verified at once and cordoned
// with a Warning naming the canary; leafsync.io/verify-canary: "false"
// skips the canary and verifies it again. No canary pod is left behind.
func TestVerificationCanary(t *testing.T) {
	ctx := context.Background()
	f := newFleet(t, harness.HostOptions{}, harness.MemberOptions{Name: "member-c", Nodes: 1, KwokConfig: canaryStages()})
	m := f.members["member-c"]
	if err := m.LiftNotReadyTaints(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.StartScheduler(); err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(testConfig, "  canary: false\n", "  canary: true\n  canaryImage: "+canaryPassImage+"\n  canaryTimeout: 30s\n", 1)
	if err := os.WriteFile(f.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	const leaf, secret = "leaf-member-c", "member-member-c"
	f.startLeafsync(t, "leafsync")
	start := time.Now()
	f.register(t, "member-c", nil)
	f.waitLeafReady(t, leaf, time.Minute)
	waitTaint(t, f, leaf, "", 60*time.Second)
	t.Logf("verified with the canary %.1fs after registration", time.Since(start).Seconds())
	waitEvent(t, f, secret, reasonMemberVerified, start, 10*time.Second)
	leafRec := recordNode(t, f.host, leaf)

	failing := time.Now()
	f.annotateRegistration(t, "member-c", map[string]string{"leafsync.io/verify-canary-image": canaryFailImage})
	waitTaint(t, f, leaf, "canary", 60*time.Second)
	ev := waitEvent(t, f, secret, reasonVerificationLost, failing, 10*time.Second)
	if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Note, "canary: ") || !strings.Contains(ev.Note, "DNS") {
		t.Errorf("event %s %q: want a Warning naming the canary's failed DNS check", ev.Type, ev.Note)
	}
	if s := getSecret(t, f, secret); !strings.HasPrefix(s.Annotations[annVerifyFailed], "canary: ") {
		t.Errorf("%s=%q, want the canary's failure", annVerifyFailed, s.Annotations[annVerifyFailed])
	}

	f.annotateRegistration(t, "member-c", map[string]string{"leafsync.io/verify-canary": "false"})
	waitTaint(t, f, leaf, "", 30*time.Second)
	for _, o := range leafRec.observations(t) {
		if o.ready != corev1.ConditionTrue {
			t.Fatalf("leaf Ready=%q at %s: verification must never change readiness", o.ready, o.at.Format(time.RFC3339Nano))
		}
	}
	harness.Eventually(t, 30*time.Second, "no canary pod left in the member", func() error {
		pods, err := m.Client().CoreV1().Pods("leafsync-system").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(pods.Items) > 0 {
			return fmt.Errorf("pods left: %v", podNames(pods.Items))
		}
		return nil
	})
}

// TestVerificationRealNode: the canary through leafsync on a member with a
// real kubelet node (containerd, runc, the CNI bridge): leafsync's own
// image (make image) runs `leafsync verify` in the member, and the leaf
// is verified. Needs root and the machine's test node.
func TestVerificationRealNode(t *testing.T) {
	image := imageArchive(t)
	ref, err := harness.ImageRef(image)
	if err != nil {
		t.Fatal(err)
	}
	f := newFleet(t, harness.HostOptions{})
	network := harness.StartNodeNetwork(t)
	member := harness.StartCluster(t, harness.ClusterOptions{
		Name:              "member-r",
		Controllers:       append(harness.MemberControllers, "nodelifecycle"),
		Scheduler:         true,
		KubeletClientCert: true,
		Address:           network.Gateway,
	})
	harness.StartNode(t, member, harness.NodeOptions{Name: "member-node", Network: network, Images: []string{image}})
	f.members["member-r"] = &memberFixture{Cluster: member, proxy: harness.NewFaultProxy(t, "member-r", member.Addr())}
	cfg := strings.Replace(testConfig, "  canary: false\n", "  canary: true\n  canaryImage: "+ref+"\n  canaryTimeout: 2m\n", 1)
	if err := os.WriteFile(f.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	const leaf, secret = "leaf-member-r", "member-member-r"
	f.startLeafsync(t, "leafsync")
	start := time.Now()
	f.register(t, "member-r", nil)
	f.waitLeafReady(t, leaf, 2*time.Minute)
	waitTaint(t, f, leaf, "", 3*time.Minute)
	t.Logf("verified with the canary on a real node %.1fs after registration", time.Since(start).Seconds())
	ev := waitEvent(t, f, secret, reasonMemberVerified, start, 10*time.Second)
	t.Logf("%s: %s", ev.Reason, ev.Note)
	if s := getSecret(t, f, secret); s.Annotations[annVerified] != "true" {
		t.Errorf("%s=%q, want true", annVerified, s.Annotations[annVerified])
	}
}
