//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/leafnode"
	"github.com/leafsync/leafsync/test/harness"
)

// TestHelmChartLeastPrivilege installs the chart into a real host API
// server (no controllers: nothing of it needs to run) and asks that server,
// as leafsync's ServiceAccount with a token of its own:
//   - `kubectl auth can-i`: no cluster-wide list or watch of Secrets or
//     ConfigMaps, get by name only; with podSync.readReferencedSecrets=false
//     not even that for Secrets;
//   - the node fence: writes and deletes that RBAC allows on a real Node,
//     its status and its Lease are refused by the chart's
//     ValidatingAdmissionPolicy, and the Node and Lease are unchanged;
//   - leafsync's own leaf code (create, status, cordon, Lease create and
//     renewals, deregistration) passes the fence.
func TestHelmChartLeastPrivilege(t *testing.T) {
	ctx := context.Background()
	host := harness.StartCluster(t, harness.ClusterOptions{Name: "host"})
	if err := host.EnsureNamespace(ctx, leafsyncNamespace); err != nil {
		t.Fatal(err)
	}
	adminKC, err := host.WriteKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	helm(t, "install", "leafsync", chartDir, "-n", leafsyncNamespace, "--kubeconfig", adminKC, "--wait=false")
	saKCData, err := host.ServiceAccountKubeconfig(ctx, leafsyncNamespace, "leafsync", "")
	if err != nil {
		t.Fatal(err)
	}
	saKC := filepath.Join(t.TempDir(), "leafsync-sa.kubeconfig")
	if err := os.WriteFile(saKC, saKCData, 0o600); err != nil {
		t.Fatal(err)
	}
	saCfg, err := clientcmd.RESTConfigFromKubeConfig(saKCData)
	if err != nil {
		t.Fatal(err)
	}
	sa := kubernetes.NewForConfigOrDie(saCfg)
	admin := host.Client()

	// kubectl auth can-i, as leafsync's ServiceAccount itself.
	canI := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(harness.Bin(t, "kubectl"), append([]string{"auth", "can-i", "--kubeconfig", saKC}, args...)...).Output()
		answer := strings.TrimSpace(string(out))
		var exit *exec.ExitError
		if err != nil && !(errors.As(err, &exit) && answer == "no") {
			t.Fatalf("kubectl auth can-i %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return answer
	}
	expect := func(want string, args ...string) {
		t.Helper()
		if got := canI(args...); got != want {
			t.Errorf("as leafsync's ServiceAccount, can-i %s: %s, want %s", strings.Join(args, " "), got, want)
		}
	}
	// RBAC and admission policies reach the API server's authorizer and
	// admission through informers: wait until each is in place.
	harness.Eventually(t, 30*time.Second, "the chart's RBAC in effect", func() error {
		if got := canI("get", "secrets", "-n", "default"); got != "yes" {
			return fmt.Errorf("can-i get secrets: %s", got)
		}
		return nil
	})
	for _, q := range [][]string{
		{"list", "secrets", "-A"}, {"watch", "secrets", "-A"}, {"list", "secrets", "-n", "default"},
		{"list", "configmaps", "-A"}, {"watch", "configmaps", "-A"},
		{"create", "configmaps", "-n", "default"},
		{"create", "services", "-n", "default"}, {"patch", "services", "-n", "default"}, {"delete", "services", "-n", "default"},
	} {
		expect("no", q...)
	}
	for _, q := range [][]string{
		{"get", "secrets", "-n", "default"}, {"get", "configmaps", "-n", "default"},
		{"list", "secrets", "-n", leafsyncNamespace},            // registrations
		{"list", "services", "-A"}, {"watch", "services", "-A"}, // copied into members (pod-sync.md#services)
		// RBAC cannot tell a leaf from a real Node: the fence must.
		{"patch", "nodes", "--subresource=status"}, {"delete", "nodes"}, {"update", "nodes"},
		{"patch", "leases", "-n", "kube-node-lease"}, {"delete", "leases", "-n", "kube-node-lease"},
	} {
		expect("yes", q...)
	}

	harness.Eventually(t, 30*time.Second, "the chart's node fence in effect", func() error {
		_, err := sa.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "unlabelled"}},
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if !apierrors.IsForbidden(err) {
			return fmt.Errorf("dry-run create of a Node without the leaf label as leafsync: %v", err)
		}
		return nil
	})

	// A real Node and its Lease, as a kubelet makes them.
	const realNode = "host-real-node"
	renewed := metav1.NewMicroTime(time.Now().Truncate(time.Second))
	if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: realNode}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: realNode, Namespace: corev1.NamespaceNodeLease},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(realNode), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &renewed},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fenced := func(what string, err error) {
		t.Helper()
		// The policy's denial: RBAC said yes above, so a Forbidden naming
		// the policy can come only from the fence.
		const policy = "ValidatingAdmissionPolicy 'leafsync-node-fence'"
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), policy) {
			t.Errorf("%s as leafsync's ServiceAccount: %v, want Forbidden by %s", what, err, policy)
		}
	}
	statusPatch := []byte(`{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Forged","lastHeartbeatTime":"` + time.Now().UTC().Format(time.RFC3339) + `"}]}}`)
	_, err = sa.CoreV1().Nodes().Patch(ctx, realNode, types.StrategicMergePatchType, statusPatch, metav1.PatchOptions{}, "status")
	fenced("status patch of a real Node", err)
	t.Logf("the fence's answer: %v", err)
	err = sa.CoreV1().Nodes().Delete(ctx, realNode, metav1.DeleteOptions{})
	fenced("delete of a real Node", err)
	n, err := admin.CoreV1().Nodes().Get(ctx, realNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Labels = map[string]string{leafnode.LabelCluster: "member-a"}
	_, err = sa.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
	fenced("relabelling a real Node as a leaf", err)
	_, err = sa.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "unlabelled"}}, metav1.CreateOptions{})
	fenced("create of a Node without the leaf label", err)
	leasePatch := []byte(`{"spec":{"renewTime":"` + time.Now().Add(time.Hour).UTC().Format("2006-01-02T15:04:05.000000Z") + `"}}`)
	_, err = sa.CoordinationV1().Leases(corev1.NamespaceNodeLease).Patch(ctx, realNode, types.MergePatchType, leasePatch, metav1.PatchOptions{})
	fenced("renewal of a real Node's Lease", err)
	err = sa.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(ctx, realNode, metav1.DeleteOptions{})
	fenced("delete of a real Node's Lease", err)
	if n, err := admin.CoreV1().Nodes().Get(ctx, realNode, metav1.GetOptions{}); err != nil || len(n.Labels) != 0 || len(n.Status.Conditions) != 0 {
		t.Errorf("the real Node after leafsync's refused writes: %v, labels %v, conditions %v", err, n.Labels, n.Status.Conditions)
	}
	if l, err := admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, realNode, metav1.GetOptions{}); err != nil || !l.Spec.RenewTime.Equal(&renewed) {
		t.Errorf("the real Node's Lease after leafsync's refused writes: %v, %+v", err, l.Spec)
	}

	// leafsync's own leaf code, as its ServiceAccount: not fenced.
	const cluster, leaf = "member-a", "leaf-member-a"
	memberNode := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "member-a-node-0"},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	in := leafnode.Input{Cluster: cluster, LeafName: leaf, MemberNodes: []*leafnode.MemberNode{leafnode.MemberNodeOf(memberNode)},
		Status: hysteresis.Status{State: hysteresis.Ready}}
	w := &leafnode.Writer{Client: sa, Cluster: cluster, Name: leaf, HeartbeatEvery: time.Minute}
	if err := w.Sync(ctx, leafnode.Compute(in)); err != nil {
		t.Fatalf("leaf create and status as leafsync's ServiceAccount: %v", err)
	}
	in.Status.Cordoned, in.Status.Reason = true, hysteresis.ReasonNetworkFailure
	if err := w.Sync(ctx, leafnode.Compute(in)); err != nil {
		t.Fatalf("leaf cordon as leafsync's ServiceAccount: %v", err)
	}
	hb := &leafnode.Heartbeat{Client: sa, Cluster: cluster, Name: leaf, Interval: time.Second, Duration: 40 * time.Second,
		Timeout: 10 * time.Second, Log: logr.Discard()}
	for i := range 2 { // create, then a renewal (an update at the Lease's version)
		if err := hb.Renew(ctx); err != nil {
			t.Fatalf("leaf Lease renewal %d as leafsync's ServiceAccount: %v", i, err)
		}
	}
	l, err := admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, leaf, metav1.GetOptions{})
	if err != nil || l.Labels[leafnode.LabelCluster] != cluster {
		t.Fatalf("leaf Lease: %v, labels %v", err, l.Labels)
	}
	node, err := admin.CoreV1().Nodes().Get(ctx, leaf, metav1.GetOptions{})
	if err != nil || !hasTaint(node, leafnode.TaintUnreachable, corev1.TaintEffectNoSchedule) || len(node.Status.Conditions) == 0 {
		t.Fatalf("leaf after create, status and cordon: %v, taints %v, conditions %v", err, node.Spec.Taints, node.Status.Conditions)
	}
	if err := w.Delete(ctx); err != nil {
		t.Fatalf("leaf deregistration as leafsync's ServiceAccount: %v", err)
	}
	if _, err := admin.CoreV1().Nodes().Get(ctx, leaf, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("leaf Node after deregistration: %v", err)
	}
	if _, err := admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, leaf, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("leaf Lease after deregistration: %v", err)
	}

	// Without podSync.readReferencedSecrets, no Secret outside leafsync's
	// namespace; ConfigMaps still by name.
	helm(t, "upgrade", "leafsync", chartDir, "-n", leafsyncNamespace, "--kubeconfig", adminKC, "--reuse-values",
		"--set", "podSync.readReferencedSecrets=false")
	harness.Eventually(t, 30*time.Second, "Secrets no longer readable", func() error {
		if got := canI("get", "secrets", "-n", "default"); got != "no" {
			return fmt.Errorf("can-i get secrets -n default: %s", got)
		}
		return nil
	})
	expect("yes", "get", "configmaps", "-n", "default")
	expect("yes", "get", "secrets", "-n", leafsyncNamespace)
}
