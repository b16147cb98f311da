package harness

import (
	"archive/tar"
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// NodeNetwork is the bridge the pods of a test node attach to (the CNI
// bridge plugin reuses it). Its gateway is the host-side IP those pods
// reach the machine at: the clusters they call listen there
// (ClusterOptions.Address).
type NodeNetwork struct {
	Bridge  string
	Subnet  string
	Gateway string
}

// StartNodeNetwork creates the bridge, up, with the gateway address, before
// any cluster starts, so that API servers can listen on the gateway. It is
// deleted when the test ends.
func StartNodeNetwork(t TB) *NodeNetwork {
	t.Helper()
	requireRoot(t, "a test node")
	lockMachineNode(t)
	n := &NodeNetwork{Bridge: "lsync-br0", Subnet: "10.201.0.0/24", Gateway: "10.201.0.1"}
	_ = exec.Command("ip", "link", "del", n.Bridge).Run() // left by a killed run
	for _, args := range [][]string{
		{"link", "add", n.Bridge, "type", "bridge"},
		{"addr", "add", n.Gateway + "/24", "dev", n.Bridge},
		{"link", "set", n.Bridge, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("harness: ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "link", "del", n.Bridge).CombinedOutput(); err != nil {
			t.Logf("harness: deleting bridge %s: %v: %s", n.Bridge, err, out)
		}
	})
	return n
}

// nodeLock serialises the tests of every process on this machine that use
// its one test node: the bridge, its subnet and the kubelet's sysctls are
// global. A second run waits here instead of tearing the first one's
// network down.
const nodeLock = "/tmp/leafsync-test-node.lock"

func lockMachineNode(t TB) {
	t.Helper()
	f, err := os.OpenFile(nodeLock, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Logf("harness: another process uses this machine's test node (%s); waiting", nodeLock)
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			t.Fatalf("harness: locking %s: %v", nodeLock, err)
		}
	}
	t.Cleanup(func() { f.Close() }) // closing releases the lock
}

func requireRoot(t TB, what string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("harness: %s needs root (containerd, the kubelet, bridges and iptables)", what)
	}
}

// NodeOptions shapes a test node.
type NodeOptions struct {
	// Name of the Node (default "node-1").
	Name string
	// Network the pods attach to (StartNodeNetwork).
	Network *NodeNetwork
	// Images are OCI archives imported into containerd before the kubelet
	// starts; pods use them with imagePullPolicy IfNotPresent, as nothing
	// can be pulled here. The pause image is always imported.
	Images []string
}

// Node is a real node of the host: containerd (Debian's package) with runc
// and the CNI bridge plugin, a real kubelet and kube-proxy built from
// Kubernetes' source, registered to the host. Everything it starts or
// changes on the machine is undone when the test ends, and what is left
// behind anyway (a process, a mount, an iptables chain) fails the test.
type Node struct {
	Name string

	host       *Cluster
	dir        string // short: containerd's socket path must fit in 108 bytes
	logDir     string
	socket     string
	containerd *process
	kubelet    *process
	kubeProxy  *process
	dns        *process
	sysctls    map[string]string
	netns      []string // network namespaces there before the node
	chains     map[string]bool
	created    []string // outsideDirs the node created
	t          TB
}

// PauseImage is the sandbox image containerd runs for each pod, built by
// `make tools` (test/tools/pause).
const PauseImage = "leafsync.local/pause:3.10"

// kubeletSysctls are the kernel settings the kubelet changes at start
// (protectKernelDefaults is off, as by default): restored when the node
// stops, because on this machine they are global.
var kubeletSysctls = []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops", "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"}

// StartNode starts a node and waits until the host sees it Ready.
func StartNode(t TB, host *Cluster, opts NodeOptions) *Node {
	t.Helper()
	requireRoot(t, "a test node")
	if opts.Name == "" {
		opts.Name = "node-1"
	}
	if opts.Network == nil {
		t.Fatalf("harness: StartNode needs a NodeNetwork")
	}
	for _, b := range []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "iptables"} {
		if _, err := exec.LookPath(b); err != nil {
			t.Fatalf("harness: %s not found: a test node needs Debian's containerd, runc, containernetworking-plugins and iptables (make node-packages)", b)
		}
	}
	dir, err := os.MkdirTemp("/tmp", "lsn-")
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	n := &Node{Name: opts.Name, host: host, dir: dir, logDir: filepath.Join(LogDir(t), opts.Name), t: t}
	n.socket = filepath.Join(dir, "containerd.sock")
	if err := os.MkdirAll(n.logDir, 0o755); err != nil {
		t.Fatalf("harness: %v", err)
	}
	n.sysctls, err = originalSysctls(sysctlsFile, readSysctls())
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	restoreSysctls(n.sysctls) // those a killed run left changed
	n.netns = listNetns()
	n.chains = kubeChains()
	for _, d := range outsideDirs {
		if _, err := os.Stat(d); os.IsNotExist(err) {
			n.created = append(n.created, d)
		}
	}
	t.Cleanup(n.stop)
	steps := []struct {
		what string
		run  func() error
	}{
		{"containerd", n.startContainerd},
		{"images", func() error { return n.importImages(append([]string{Bin(t, "pause-image.tar")}, opts.Images...)) }},
		{"cni", func() error { return n.writeCNIConfig(opts.Network) }},
		{"kubelet access", n.allowAPIServer},
		{"cluster DNS", func() error { return n.startDNS(opts.Network) }},
		{"kubelet", func() error { return n.startKubelet(opts.Network) }},
		{"kube-proxy", func() error { return n.startKubeProxy(opts.Network) }},
	}
	for _, s := range steps {
		if err := s.run(); err != nil {
			t.Fatalf("harness: node %s: %s: %v", n.Name, s.what, err)
		}
	}
	if err := n.kubelet.waitFor(120*time.Second, "Ready", n.ready); err != nil {
		t.Fatalf("harness: node %s: %v", n.Name, err)
	}
	return n
}

func (n *Node) path(elem ...string) string { return filepath.Join(append([]string{n.dir}, elem...)...) }

func (n *Node) startContainerd() error {
	cfg := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[4]q
  # The sandbox lacks CAP_SYS_RESOURCE: a pod's oom_score_adj can only rise.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %[5]q
`, n.path("root"), n.path("state"), n.socket, PauseImage, n.path("cni"))
	if err := os.WriteFile(n.path("containerd.toml"), []byte(cfg), 0o600); err != nil {
		return err
	}
	bin, err := exec.LookPath("containerd")
	if err != nil {
		return err
	}
	if n.containerd, err = startProcess(n.logDir, "containerd", bin, "--config", n.path("containerd.toml")); err != nil {
		return err
	}
	return n.containerd.waitFor(30*time.Second, "serving", func() error {
		_, err := n.ctr("version")
		return err
	})
}

// ctr runs containerd's client in the CRI namespace.
func (n *Node) ctr(args ...string) (string, error) {
	out, err := exec.Command("ctr", append([]string{"--address", n.socket, "--namespace", "k8s.io"}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ctr %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func (n *Node) importImages(archives []string) error {
	for _, a := range archives {
		if _, err := os.Stat(a); err != nil {
			return fmt.Errorf("image archive %s: %w (make tools builds the pause image, make image leafsync's)", a, err)
		}
		if _, err := n.ctr("images", "import", a); err != nil {
			return err
		}
	}
	return nil
}

// writeCNIConfig: the bridge plugin on the node network, addresses from
// host-local IPAM kept in the node's folder, no masquerade (nothing here
// leaves the machine).
func (n *Node) writeCNIConfig(net *NodeNetwork) error {
	if err := os.MkdirAll(n.path("cni"), 0o755); err != nil {
		return err
	}
	conf := fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "leafsync-test",
  "plugins": [{
    "type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false,
    "ipam": {"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": %q, "gateway": %q}]], "routes": [{"dst": "0.0.0.0/0"}]}
  }]
}
`, net.Bridge, n.path("ipam"), net.Subnet, net.Gateway)
	return os.WriteFile(n.path("cni", "10-leafsync-test.conflist"), []byte(conf), 0o644)
}

func (n *Node) startKubelet(net *NodeNetwork) error {
	kc, err := n.host.componentKubeconfig("kubelet-"+n.Name, "system:node:"+n.Name, []string{"system:nodes"})
	if err != nil {
		return err
	}
	ports := freePorts(n.t, 2)
	cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# cgroup v1 without systemd on this machine.
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://%[1]s
address: %[6]s
port: %[2]d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %[3]d
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[4]q}
authorization: {mode: Webhook}
# The machine's disk is shared with everything else: evict only when it is
# truly full, and never collect the imported images (nothing can pull them).
evictionHard: {memory.available: "50Mi", nodefs.available: "1%%", imagefs.available: "1%%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
nodeStatusUpdateFrequency: 2s
maxPods: 30
# Container logs stay with the test's logs.
podLogsDir: %[5]q
# The cluster's DNS (startDNS) on the gateway.
clusterDNS: [%[6]s]
clusterDomain: %[7]s
`, n.socket, ports[0], ports[1], n.host.pki.path("ca.crt"), filepath.Join(n.logDir, "pods"), net.Gateway, clusterDomain)
	if err := os.WriteFile(n.path("kubelet.yaml"), []byte(cfg), 0o600); err != nil {
		return err
	}
	n.kubelet, err = startProcess(n.logDir, "kubelet", Bin(n.t, "kubelet"),
		"--config="+n.path("kubelet.yaml"),
		"--kubeconfig="+kc,
		"--root-dir="+n.path("kubelet"),
		"--cert-dir="+n.path("kubelet-pki"),
		"--hostname-override="+n.Name,
		"--node-ip="+net.Gateway,
		"--v=1",
	)
	return err
}

// clusterDomain is the DNS domain of the node's cluster, as kubeadm's.
const clusterDomain = "cluster.local"

// startDNS runs CoreDNS as the cluster DNS of the node's cluster, as every
// real cluster has one: on the gateway, where the pods reach the machine,
// answering for Services and pods from the cluster's API (admin
// kubeconfig). Nothing is forwarded: there is no network outside. It waits
// until the kubernetes plugin has synced (the ready plugin).
func (n *Node) startDNS(net *NodeNetwork) error {
	kc := n.path("coredns.kubeconfig")
	if err := os.WriteFile(kc, n.host.Kubeconfig(), 0o600); err != nil {
		return err
	}
	ready := freePorts(n.t, 1)[0]
	corefile := fmt.Sprintf(`.:53 {
    bind %s
    errors
    ready 127.0.0.1:%d
    kubernetes %s in-addr.arpa ip6.arpa {
        kubeconfig %s
        pods insecure
    }
}
`, net.Gateway, ready, clusterDomain, kc)
	if err := os.WriteFile(n.path("Corefile"), []byte(corefile), 0o600); err != nil {
		return err
	}
	var err error
	if n.dns, err = startProcess(n.logDir, "coredns", Bin(n.t, "coredns"), "-conf", n.path("Corefile")); err != nil {
		return err
	}
	return n.dns.waitFor(60*time.Second, "ready", func() error { return httpOK(fmt.Sprintf("http://127.0.0.1:%d/ready", ready)) })
}

// allowAPIServer lets the host's API server reach the kubelet (kubectl
// logs, exec) as kubeadm does: its kubelet client (HostOptions
// .KubeletClientCert) gets system:kubelet-api-admin, which the kubelet's
// webhook authorisation asks for.
func (n *Node) allowAPIServer() error {
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "harness:apiserver-kubelet-client"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:kubelet-api-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: KubeletClientUser}},
	}
	_, err := n.host.client.RbacV1().ClusterRoleBindings().Create(context.Background(), crb, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// startKubeProxy: iptables mode, so that pods reach the host's API server
// at the kubernetes Service's ClusterIP as in any cluster. It leaves the
// conntrack limits and route_localnet alone (global settings).
func (n *Node) startKubeProxy(net *NodeNetwork) error {
	kc, err := n.host.componentKubeconfig("kube-proxy-"+n.Name, "system:kube-proxy", nil)
	if err != nil {
		return err
	}
	ports := freePorts(n.t, 2)
	cfg := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: %q}
mode: iptables
hostnameOverride: %q
clusterCIDR: %q
healthzBindAddress: 127.0.0.1:%d
metricsBindAddress: 127.0.0.1:%d
iptables: {localhostNodePorts: false}
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
`, kc, n.Name, net.Subnet, ports[0], ports[1])
	if err := os.WriteFile(n.path("kube-proxy.yaml"), []byte(cfg), 0o600); err != nil {
		return err
	}
	n.kubeProxy, err = startProcess(n.logDir, "kube-proxy", Bin(n.t, "kube-proxy"), "--config="+n.path("kube-proxy.yaml"), "--v=1")
	return err
}

func (n *Node) ready() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	node, err := n.host.client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				return nil
			}
			return fmt.Errorf("condition Ready=%s: %s", c.Status, c.Message)
		}
	}
	return fmt.Errorf("no Ready condition yet")
}

// stop tears the node down in the order that leaves nothing behind: the
// host's pods on the node are deleted and the kubelet stops their
// sandboxes (which removes their network namespaces and mounts); then the
// processes stop; then whatever is left is removed by force and reported.
func (n *Node) stop() {
	n.drain(60 * time.Second)
	for _, p := range []*process{n.kubeProxy, n.kubelet, n.dns} {
		if p != nil {
			p.Stop(10 * time.Second)
		}
	}
	// What a clean stop leaves by design is removed without a word: the
	// kubelet's bind mount of its root folder, its iptables chains.
	var left []string
	if n.containerd != nil {
		left = append(left, n.killTasks()...)
		n.containerd.Stop(10 * time.Second)
	}
	left = append(left, n.killShims()...)
	left = append(left, n.unmountAll()...)
	left = append(left, n.removeNetns()...)
	left = append(left, n.removeChains()...)
	left = append(left, n.removeOutsideDirs()...)
	removeCgroups("kubepods")
	restoreSysctls(n.sysctls)
	restored := true
	for k, v := range readSysctls() {
		if v != n.sysctls[k] {
			restored = false
			left = append(left, fmt.Sprintf("sysctl %s is %s, was %s (could not restore)", k, v, n.sysctls[k]))
		}
	}
	if restored {
		_ = os.Remove(sysctlsFile)
	}
	if err := os.RemoveAll(n.dir); err != nil {
		left = append(left, fmt.Sprintf("%s: %v", n.dir, err))
	}
	if len(left) > 0 {
		n.t.Logf("harness: node %s left these behind; removed by force: %s", n.Name, strings.Join(left, "; "))
		n.t.Fatalf("harness: node %s was not torn down cleanly (see above)", n.Name)
	}
}

// drain deletes the pods bound to the node and waits for the kubelet to
// stop every sandbox, so that the CNI plugin releases their networks, and
// to unmount their volumes (a projected or Secret volume is a tmpfs the
// kubelet's volume manager unmounts a moment after the sandbox stops).
func (n *Node) drain(timeout time.Duration) {
	if n.kubelet == nil || n.host == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// Cordoned first, so that no replacement lands on the node.
	patch := []byte(`{"spec":{"unschedulable":true}}`)
	if _, err := n.host.client.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		n.t.Logf("harness: node %s: cordon: %v", n.Name, err)
	}
	list, err := n.host.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n.Name})
	if err != nil {
		n.t.Logf("harness: node %s: listing its pods: %v", n.Name, err)
		return
	}
	for _, p := range list.Items {
		if err := n.host.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
			n.t.Logf("harness: node %s: deleting pod %s/%s: %v", n.Name, p.Namespace, p.Name, err)
		}
	}
	for ctx.Err() == nil {
		out, err := n.ctr("tasks", "list", "--quiet")
		if err == nil && strings.TrimSpace(out) == "" && len(mountsUnder(n.path("kubelet", "pods"))) == 0 {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	n.t.Logf("harness: node %s: sandboxes or pod volumes still there %s after its pods were deleted", n.Name, timeout)
}

// killTasks kills containers the kubelet did not stop.
func (n *Node) killTasks() []string {
	out, err := n.ctr("tasks", "list", "--quiet")
	if err != nil {
		return nil
	}
	var left []string
	for _, id := range strings.Fields(out) {
		left = append(left, "container "+id)
		_, _ = n.ctr("tasks", "kill", "--signal", "SIGKILL", id)
		time.Sleep(200 * time.Millisecond)
		_, _ = n.ctr("tasks", "delete", "--force", id)
	}
	return left
}

// killShims kills the containerd shims of this node, which outlive
// containerd by design.
func (n *Node) killShims() []string {
	var left []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(b), "containerd-shim") || !strings.Contains(string(b), n.socket) {
			continue
		}
		pid := filepath.Base(filepath.Dir(p))
		left = append(left, "shim pid "+pid)
		_ = exec.Command("kill", "-9", pid).Run()
	}
	return left
}

// unmountAll unmounts everything under the node's folder, deepest first.
func (n *Node) unmountAll() []string {
	var left []string
	for _, m := range mountsUnder(n.dir) {
		if m != n.path("kubelet") {
			left = append(left, "mount "+m)
		}
		if out, err := exec.Command("umount", "-l", m).CombinedOutput(); err != nil {
			n.t.Logf("harness: umount %s: %v: %s", m, err, out)
		}
	}
	return left
}

func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var ms []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			ms = append(ms, fields[4])
		}
	}
	slices.SortFunc(ms, func(a, b string) int { return len(b) - len(a) })
	return ms
}

func listNetns() []string {
	entries, _ := os.ReadDir("/var/run/netns")
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func (n *Node) removeNetns() []string {
	var left []string
	for _, name := range listNetns() {
		if slices.Contains(n.netns, name) || !strings.HasPrefix(name, "cni-") {
			continue
		}
		left = append(left, "netns "+name)
		_ = exec.Command("umount", "-l", filepath.Join("/var/run/netns", name)).Run()
		_ = os.Remove(filepath.Join("/var/run/netns", name))
	}
	return left
}

// kubeChains lists the KUBE- and CNI- iptables chains of the machine, as
// table/chain for iptables and ip6tables.
func kubeChains() map[string]bool {
	chains := map[string]bool{}
	for _, cmd := range []string{"iptables-save", "ip6tables-save"} {
		out, err := exec.Command(cmd).Output()
		if err != nil {
			continue
		}
		table := ""
		for _, line := range strings.Split(string(out), "\n") {
			switch {
			case strings.HasPrefix(line, "*"):
				table = line[1:]
			case strings.HasPrefix(line, ":KUBE-"), strings.HasPrefix(line, ":CNI-"):
				chains[cmd+" "+table+" "+strings.Fields(line[1:])[0]] = true
			}
		}
	}
	return chains
}

// removeChains deletes the chains the kubelet and kube-proxy made, and
// the rules that jump to them. kube-proxy --cleanup removes its own; the
// kubelet leaves its KUBE-FIREWALL and canary chains when it stops. What
// cannot be deleted is reported.
func (n *Node) removeChains() []string {
	if n.kubeProxy != nil {
		if out, err := exec.Command(Bin(n.t, "kube-proxy"), "--cleanup").CombinedOutput(); err != nil {
			n.t.Logf("harness: kube-proxy --cleanup: %v: %s", err, out)
		}
	}
	added := map[string]bool{} // "iptables table chain"
	for c := range kubeChains() {
		if !n.chains[c] {
			added[c] = true
		}
	}
	for _, save := range []string{"iptables-save", "ip6tables-save"} {
		bin := strings.TrimSuffix(save, "-save")
		out, _ := exec.Command(save).Output()
		table := ""
		for _, line := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(line, "*") {
				table = line[1:]
			}
			f := strings.Fields(line)
			if len(f) < 4 || f[0] != "-A" || added[save+" "+table+" "+f[1]] || !added[save+" "+table+" "+f[len(f)-1]] {
				continue
			}
			// A rule of a chain we keep jumping to a chain we delete.
			_ = exec.Command(bin, append([]string{"-t", table, "-D"}, f[1:]...)...).Run()
		}
	}
	for _, op := range []string{"-F", "-X"} {
		for c := range added {
			f := strings.Fields(c)
			_ = exec.Command(strings.TrimSuffix(f[0], "-save"), "-t", f[1], op, f[2]).Run()
		}
	}
	var left []string
	for c := range kubeChains() {
		if !n.chains[c] {
			left = append(left, "iptables chain "+c)
		}
	}
	return left
}

// outsideDirs are folders the kubelet, containerd and the CNI library
// create outside the node's folder whatever they are configured with: the
// device-plugin folder, the shims' sockets and runc's state, the CNI
// result cache.
var outsideDirs = []string{"/var/lib/kubelet", "/run/containerd", "/var/lib/cni"}

// removeOutsideDirs removes the outsideDirs the node created (empty after
// a clean stop but for the kubelet's device-plugin folder). In one that
// was there before, only a CNI result of the node's network is removed
// (and reported: a clean stop deletes them).
func (n *Node) removeOutsideDirs() []string {
	var left []string
	for _, d := range n.created {
		if ms := mountsUnder(d); len(ms) > 0 {
			left = append(left, fmt.Sprintf("mounts under %s: %v", d, ms))
			continue
		}
		if err := os.RemoveAll(d); err != nil {
			left = append(left, fmt.Sprintf("%s: %v", d, err))
		}
	}
	results, _ := filepath.Glob("/var/lib/cni/results/leafsync-test-*")
	for _, r := range results {
		left = append(left, "CNI result "+r)
		_ = os.Remove(r)
	}
	return left
}

// sysctlsFile keeps the machine's kernel settings from before the first
// test node, until a node stopped and restored them: a run killed before
// its cleanup (SIGKILL, a CI timeout) leaves the kubelet's values behind,
// and the next node must not take those for the machine's.
const sysctlsFile = "/tmp/leafsync-test-node.sysctls"

// originalSysctls are the settings to restore when the node stops: those
// saved in file by a node that never stopped, else current, saved there
// now (one node at a time holds nodeLock).
func originalSysctls(file string, current map[string]string) (map[string]string, error) {
	if b, err := os.ReadFile(file); err == nil {
		saved := map[string]string{}
		if json.Unmarshal(b, &saved) == nil && len(saved) > 0 {
			return saved, nil
		}
	}
	b, err := json.Marshal(current)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		return nil, fmt.Errorf("saving the machine's kernel settings: %w", err)
	}
	return current, nil
}

func readSysctls() map[string]string {
	v := map[string]string{}
	for _, k := range kubeletSysctls {
		if b, err := os.ReadFile("/proc/sys/" + k); err == nil {
			v[k] = strings.TrimSpace(string(b))
		}
	}
	return v
}

func restoreSysctls(v map[string]string) {
	for k, val := range v {
		_ = os.WriteFile("/proc/sys/"+k, []byte(val), 0o644)
	}
}

// removeCgroups removes the kubelet's cgroup tree (name under every cgroup
// v1 hierarchy), leaves first.
func removeCgroups(name string) {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/" + name)
	for _, root := range roots {
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			_ = os.Remove(dirs[i])
		}
	}
}

// ImageRef is the name an OCI archive gives its image (the
// org.opencontainers.image.ref.name annotation of its index), which
// containerd imports it as.
func ImageRef(archive string) (string, error) {
	f, err := os.Open(archive)
	if err != nil {
		return "", err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err != nil {
			return "", fmt.Errorf("%s: no index.json: %v", archive, err)
		}
		if h.Name != "index.json" {
			continue
		}
		var idx struct {
			Manifests []struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"manifests"`
		}
		if err := json.NewDecoder(tr).Decode(&idx); err != nil {
			return "", fmt.Errorf("%s: index.json: %w", archive, err)
		}
		for _, m := range idx.Manifests {
			if ref := m.Annotations["org.opencontainers.image.ref.name"]; ref != "" {
				return ref, nil
			}
		}
		return "", fmt.Errorf("%s: no image name in index.json", archive)
	}
}
