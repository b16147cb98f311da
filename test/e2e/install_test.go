//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/leafsync/leafsync/internal/leafnode"
	"github.com/leafsync/leafsync/test/harness"
)

// installValues are the test's values for the chart: the image built by
// make image, leafsync's pods on the real node (the host's other workers
// are kwok's), and the e2e thresholds (testConfig) so that flaps and
// handovers play out in seconds against KCM's 8s grace period.
const installValues = `image:
  repository: %s
  tag: %q
  pullPolicy: IfNotPresent
nodeSelector:
  kubernetes.io/hostname: %s
config:
  hysteresis: {probeInterval: 1s, cordonAfter: 2s, notReadyAfter: 10s, readyAfter: 4s, window: 60s}
  leaves: {leafTaint: true, leaseRenewInterval: 1s, leaseDuration: 40s, leaseRenewTimeout: 8s}
  leaderElection: {leaseDuration: 4s, renewDeadline: 3s, retryPeriod: 500ms}
  members: {probeTimeout: 1s}
  verification: {retryMin: 1s, retryMax: 2s, canary: false}
  # This journey is one leader and a standby; two replicas would share
  # the members otherwise.
  sharding: {enabled: false}
uninstall: {timeout: 45s}
`

// TestHelmInstall is the user's install, for real. leafsync's image (make
// image) runs as the chart's pods on a real kubelet node of the host
// (containerd, runc, the CNI bridge, kube-proxy), in a namespace that
// enforces the restricted Pod Security Standard, with in-cluster
// credentials. The journey is the one docs/install.md walks through:
// install, register two members with leafsync register, a member flap, the
// leader pod deleted, helm upgrade with a changed threshold, helm rollback,
// uninstall.
// Through all of it neither leaf leaves Ready, no pod of a workload on a
// leaf is lost in the member, and the leaves' Leases are never written by
// two pods taking turns (two leaders at once). Uninstall with leafsync
// stopped is refused and deletes nothing; with a member cut off its drain
// cannot finish, so it is refused too until that member is deregistered
// with --orphan; then it leaves nothing of leafsync in the host.
func TestHelmInstall(t *testing.T) {
	image := imageArchive(t)
	ref, err := harness.ImageRef(image)
	if err != nil {
		t.Fatal(err)
	}
	slash := strings.LastIndex(ref, "/")
	name, tag, _ := strings.Cut(ref[slash+1:], ":")
	repo := ref[:slash+1] + name

	network := harness.StartNodeNetwork(t)
	// The host's API server reaches the node's kubelet (kubectl logs).
	host := harness.StartHost(t, harness.HostOptions{Address: network.Gateway, KubeletClientCert: true})
	members := map[string]*memberFixture{}
	for _, m := range []string{"member-a", "member-b"} {
		c := harness.StartMember(t, harness.MemberOptions{Name: m, Nodes: 1, Address: network.Gateway})
		if err := c.LiftNotReadyTaints(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := c.StartScheduler(); err != nil {
			t.Fatal(err)
		}
		members[m] = &memberFixture{Cluster: c, proxy: harness.NewFaultProxy(t, m, c.Addr())}
	}
	node := harness.StartNode(t, host, harness.NodeOptions{Network: network, Images: []string{image}})
	ctx := context.Background()
	hc := host.Client()
	dir := harness.LogDir(t)
	hostKC, err := host.WriteKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	const ns = "leafsync"
	sh := func(bin string, args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, args...).CombinedOutput()
		t.Logf("$ %s %s\n%s", filepath.Base(bin), strings.Join(args, " "), out)
		if err != nil {
			t.Fatalf("%s: %v", filepath.Base(bin), err)
		}
		return string(out)
	}
	kubectl := func(args ...string) string {
		return sh(harness.Bin(t, "kubectl"), append([]string{"--kubeconfig", hostKC}, args...)...)
	}
	helm := func(args ...string) string {
		return sh(harness.Bin(t, "helm"), append([]string{"--kubeconfig", hostKC}, args...)...)
	}

	// Install, as docs/install.md says.
	kubectl("create", "namespace", ns)
	kubectl("label", "namespace", ns, "pod-security.kubernetes.io/enforce=restricted")
	values := filepath.Join(dir, "values.yaml")
	if err := os.WriteFile(values, []byte(fmt.Sprintf(installValues, repo, tag, node.Name)), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	helm("install", "leafsync", chartDir, "-n", ns, "-f", values, "--wait", "--timeout", "3m")
	t.Logf("helm install --wait: both pods Ready %s after it started", time.Since(start).Round(100*time.Millisecond))
	pods := leafsyncPods(t, hc, ns, 2)
	for _, p := range pods {
		if p.Spec.NodeName != node.Name {
			t.Fatalf("pod %s runs on %q, not on the real node", p.Name, p.Spec.NodeName)
		}
	}
	// The namespace does enforce the restricted standard: leafsync's pods
	// passed it, a root pod does not.
	root := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "root", Namespace: ns}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "c", Image: harness.PauseImage, SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To[int64](0)}}},
	}}
	if _, err := hc.CoreV1().Pods(ns).Create(ctx, root, metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "restricted") {
		t.Fatalf("a root pod in %s: %v, want refused by the restricted Pod Security Standard", ns, err)
	}
	leader := func() (string, error) {
		l, err := hc.CoordinationV1().Leases(ns).Get(ctx, "leafsync-leader", metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			return "", fmt.Errorf("no holder")
		}
		return *l.Spec.HolderIdentity, nil
	}
	var firstLeader string
	harness.Eventually(t, 30*time.Second, "one of the pods leads", func() (err error) {
		if firstLeader, err = leader(); err != nil {
			return err
		}
		if !slices.ContainsFunc(pods, func(p corev1.Pod) bool { return strings.HasPrefix(firstLeader, p.Name+"_") }) {
			return fmt.Errorf("leader %q is none of the pods", firstLeader)
		}
		return nil
	})

	// Register both members the recommended way: a least-privilege
	// ServiceAccount in the member, its token in the Secret.
	for m, mf := range members {
		kc := filepath.Join(dir, m+".kubeconfig")
		if err := os.WriteFile(kc, mf.KubeconfigVia(mf.proxy.Addr()), 0o600); err != nil {
			t.Fatal(err)
		}
		sh(harness.LeafsyncBinary(t), "register", "--kubeconfig", hostKC, "--member-kubeconfig", kc, "--namespace", ns, "--cluster", m, "--create-service-account")
	}
	leaves := []string{"leaf-member-a", "leaf-member-b"}
	for _, leaf := range leaves {
		waitNodeReady(t, host, leaf, 90*time.Second)
	}
	recs := map[string]*nodeRecorder{}
	for _, leaf := range leaves {
		recs[leaf] = recordNode(t, host, leaf)
	}
	// A workload on leaf-member-a: pod sync runs from inside the chart's pods.
	if err := host.EnsureNamespace(ctx, appsNS); err != nil {
		t.Fatal(err)
	}
	if _, err := hc.AppsV1().Deployments(appsNS).Create(ctx, leafWorkload("web", 2, leaves[0]).Deployment(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	memberPods := func() (map[types.UID]string, error) {
		list, err := members["member-a"].Client().CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: managedPodSelector})
		if err != nil {
			return nil, err
		}
		running := map[types.UID]string{}
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running[p.UID] = p.Name
			}
		}
		return running, nil
	}
	var running map[types.UID]string
	harness.Eventually(t, 90*time.Second, "the workload's 2 pods running in member-a", func() (err error) {
		if running, err = memberPods(); err == nil && len(running) != 2 {
			err = fmt.Errorf("%d running", len(running))
		}
		return err
	})

	// A member flaps: 3s cut, past cordonAfter, short of notReadyAfter.
	members["member-a"].proxy.Cut()
	time.Sleep(3 * time.Second)
	if err := members["member-a"].proxy.Heal(); err != nil {
		t.Fatal(err)
	}
	t.Logf("member-a cut for 3s and healed")

	// The leader pod is deleted; the other takes over.
	leaderPod, _, _ := strings.Cut(firstLeader, "_")
	deleted := time.Now()
	kubectl("delete", "pod", "-n", ns, leaderPod, "--wait=false")
	var second string
	harness.Eventually(t, 30*time.Second, "the other pod leads", func() (err error) {
		if second, err = leader(); err != nil {
			return err
		}
		if strings.HasPrefix(second, leaderPod+"_") {
			return fmt.Errorf("still led by the deleted pod")
		}
		return nil
	})
	t.Logf("leader pod %s deleted; %s leads %s later", leaderPod, second, time.Since(deleted).Round(100*time.Millisecond))
	kubectl("rollout", "status", "-n", ns, "deployment/leafsync", "--timeout=3m")

	// helm upgrade with a changed threshold rolls both pods; helm rollback
	// rolls them back.
	rolled := func(what string, args ...string) {
		t.Helper()
		before := leafsyncPods(t, hc, ns, 2)
		start := time.Now()
		helm(args...)
		t.Logf("helm %s --wait: rolled in %s", args[0], time.Since(start).Round(100*time.Millisecond))
		harness.Eventually(t, 2*time.Minute, what+" replaced both pods", func() error {
			after, err := hc.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=leafsync"})
			if err != nil {
				return err
			}
			for _, p := range after.Items {
				for _, b := range before {
					if p.UID == b.UID {
						return fmt.Errorf("pod %s from before %s is still there", p.Name, what)
					}
				}
			}
			return nil
		})
		leafsyncPods(t, hc, ns, 2)
	}
	readyAfter := func() string {
		t.Helper()
		cm, err := hc.CoreV1().ConfigMaps(ns).Get(ctx, "leafsync-config", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(cm.Data["config.yaml"], "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "readyAfter: "); ok {
				return v
			}
		}
		t.Fatalf("no readyAfter in the config:\n%s", cm.Data["config.yaml"])
		return ""
	}
	rolled("the upgrade", "upgrade", "leafsync", chartDir, "-n", ns, "--reuse-values", "--set", "config.hysteresis.readyAfter=5s", "--wait", "--timeout", "3m")
	if got := readyAfter(); got != "5s" {
		t.Fatalf("readyAfter %s after the upgrade, want 5s", got)
	}
	rolled("the rollback", "rollback", "leafsync", "1", "-n", ns, "--wait", "--timeout", "3m")
	if got := readyAfter(); got != "4s" {
		t.Fatalf("readyAfter %s after the rollback, want 4s", got)
	}
	// Leave KCM two grace periods to notice a gap, if there was one.
	time.Sleep(2 * harness.DefaultTestTimings.NodeMonitorGracePeriod)
	for _, leaf := range leaves {
		obs := recs[leaf].observations(t)
		for _, o := range obs {
			if o.ready != corev1.ConditionTrue {
				t.Errorf("%s Ready=%s at %s", leaf, o.ready, o.at.Format(time.StampMilli))
			}
		}
		t.Logf("%s: %d versions watched from registration to after the rollback; Ready=True in all", leaf, len(obs))
	}
	after, err := memberPods()
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(after, running) {
		t.Errorf("member-a's pods were %v and are now %v: a pod was lost", running, after)
	}
	writers := leaseWriters(t, host, "system:serviceaccount:"+ns+":leafsync", leaves)
	if len(writers) < 4 {
		t.Errorf("the leaves' Leases were written from %v: want at least four pods in turn (first leader, after the delete, after the upgrade, after the rollback)", writers)
	}
	t.Logf("the leaves' Leases were written by one pod at a time, in turn from %v", writers)

	// Uninstall while leafsync is stopped: the hook refuses at once, says
	// why in its Job's log, and deletes nothing.
	kubectl("scale", "-n", ns, "deployment/leafsync", "--replicas=0")
	harness.Eventually(t, 2*time.Minute, "leafsync's pods gone", func() error {
		list, err := hc.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=leafsync"})
		if err == nil && len(list.Items) > 0 {
			err = fmt.Errorf("%d pods", len(list.Items))
		}
		return err
	})
	out, err := exec.Command(harness.Bin(t, "helm"), "--kubeconfig", hostKC, "uninstall", "leafsync", "-n", ns, "--wait", "--timeout", "3m").CombinedOutput()
	if err == nil {
		t.Fatalf("helm uninstall with leafsync stopped succeeded:\n%s", out)
	}
	t.Logf("helm uninstall with leafsync stopped: %v: %s", err, strings.TrimSpace(string(out)))
	if log := kubectl("logs", "-n", ns, "job/leafsync-uninstall"); !strings.Contains(log, "no ready replica") || !strings.Contains(log, "nothing was deleted") {
		t.Errorf("the hook's log does not say why it refused:\n%s", log)
	}
	regs, err := hc.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "leafsync.io/cluster"})
	if err != nil || len(regs.Items) != len(members) {
		t.Fatalf("registrations after the refused uninstall: %v, %d of %d", err, len(regs.Items), len(members))
	}
	kubectl("scale", "-n", ns, "deployment/leafsync", "--replicas=2")
	leafsyncPods(t, hc, ns, 2)

	// Uninstall with the member of the workload cut off: the hook's drain
	// cannot delete the member copies, so it fails naming them and
	// deregisters nothing (a workload never runs twice). Deregistering
	// that member with --orphan is the user's choice; then uninstall
	// leaves nothing of leafsync in the host.
	members["member-a"].proxy.Cut()
	out, err = exec.Command(harness.Bin(t, "helm"), "--kubeconfig", hostKC, "uninstall", "leafsync", "-n", ns, "--wait", "--timeout", "3m").CombinedOutput()
	if err == nil {
		t.Fatalf("helm uninstall drained a leaf whose member is cut off:\n%s", out)
	}
	if log := kubectl("logs", "-n", ns, "job/leafsync-uninstall"); !strings.Contains(log, "Nothing was deregistered") || !strings.Contains(log, "--orphan") {
		t.Errorf("the hook's log does not say that it deregistered nothing and what to do:\n%s", log)
	}
	if out, err := exec.Command(harness.LeafsyncBinary(t), "deregister", "--kubeconfig", hostKC, "-n", ns, "--cluster", "member-a", "--orphan").CombinedOutput(); err != nil {
		t.Fatalf("leafsync deregister --orphan: %v\n%s", err, out)
	} else if !strings.Contains(string(out), "is left running") {
		t.Errorf("deregister --orphan does not say what it left:\n%s", out)
	}
	helm("uninstall", "leafsync", "-n", ns, "--wait", "--timeout", "3m")
	harness.Eventually(t, 2*time.Minute, "nothing of leafsync left in the host", func() error {
		return leftovers(ctx, hc, ns, leaves)
	})
}

// leafsyncPods waits until the chart's Deployment has n Ready pods and
// returns them.
func leafsyncPods(t *testing.T, hc kubernetes.Interface, ns string, n int) []corev1.Pod {
	t.Helper()
	var ready []corev1.Pod
	harness.Eventually(t, 3*time.Minute, fmt.Sprintf("%d leafsync pods Ready", n), func() error {
		list, err := hc.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=leafsync"})
		if err != nil {
			return err
		}
		ready = ready[:0]
		for _, p := range list.Items {
			if p.DeletionTimestamp == nil && podReady(&p) {
				ready = append(ready, p)
			}
		}
		if len(ready) != n {
			return fmt.Errorf("%d of %d pods Ready", len(ready), len(list.Items))
		}
		return nil
	})
	return ready
}

// leaseWriters reads the host's audit log: the source IPs (pods) that
// renewed the leaves' Leases as user, in order of first write. It fails
// the test if one pod wrote again after another had taken over: two
// leaders at once.
func leaseWriters(t *testing.T, host *harness.Cluster, user string, leaves []string) []string {
	t.Helper()
	evs, err := host.AuditEvents(func(e harness.AuditEvent) bool {
		return e.User.Username == user && e.ObjectRef.Resource == "leases" && e.ObjectRef.Namespace == corev1.NamespaceNodeLease &&
			slices.Contains(leaves, e.ObjectRef.Name) && e.Verb != "delete" && e.ResponseStatus.Code < 300
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].RequestReceived.Before(evs[j].RequestReceived) })
	var order []string
	for _, e := range evs {
		if len(e.SourceIPs) == 0 {
			continue
		}
		ip := e.SourceIPs[0]
		if len(order) > 0 && order[len(order)-1] == ip {
			continue
		}
		if slices.Contains(order, ip) {
			t.Errorf("%s renewed %s at %s after %s had taken over: two leaders at once", ip, e.ObjectRef.Name, e.RequestReceived.Format(time.StampMilli), order[len(order)-1])
		}
		order = append(order, ip)
	}
	return order
}

// leftovers lists what leafsync created in the host and is still there:
// leaf Nodes and their Leases, its ConfigMaps (state records, eviction
// guard records), registration Secrets, its finalizer on any pod.
func leftovers(ctx context.Context, hc kubernetes.Interface, ns string, leaves []string) error {
	var left []string
	for _, leaf := range leaves {
		if _, err := hc.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, leaf, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			left = append(left, "lease "+leaf)
		}
	}
	nodes, err := hc.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: leafnode.LabelCluster})
	if err != nil {
		return err
	}
	for _, n := range nodes.Items {
		left = append(left, "node "+n.Name)
	}
	cms, err := hc.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, c := range cms.Items {
		if c.Name != "kube-root-ca.crt" {
			left = append(left, "configmap "+c.Name)
		}
	}
	secrets, err := hc.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, s := range secrets.Items {
		left = append(left, "secret "+s.Name)
	}
	leases, err := hc.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, l := range leases.Items {
		left = append(left, "lease "+ns+"/"+l.Name)
	}
	pods, err := hc.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, p := range pods.Items {
		if slices.ContainsFunc(p.Finalizers, func(f string) bool { return strings.HasPrefix(f, "leafsync.io/") }) {
			left = append(left, "finalizer on pod "+p.Namespace+"/"+p.Name)
		}
		if p.Namespace == ns {
			left = append(left, "pod "+p.Name)
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("left behind: %s", strings.Join(left, ", "))
	}
	return nil
}

// imageArchive is leafsync's image, written by make image.
func imageArchive(t *testing.T) string {
	t.Helper()
	dir, err := harness.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "leafsync-image.tar")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("leafsync's image: %v (make image writes it)", err)
	}
	return p
}
