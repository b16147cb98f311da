// Command demo runs leafsync's main job on this machine, with real parts,
// and shows what it saves next to the virtual-kubelet architecture: a host
// cluster (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, a
// kwok worker) and three member clusters with kwok nodes, each behind a
// TCP fault proxy. leafsync serves member-a and member-b as leaves;
// virtual-kubelet v1.13.0 with a pass-through provider (bin/vk-baseline,
// the baseline of the flap benchmark) serves member-vk. Each leaf runs a
// Deployment and a StatefulSet of two pods. Then member-a and member-vk
// flap for 30s (the same flap, shorter than leafsync's notReadyAfter) and
// member-b goes down for 90s (an outage): the demo narrates what happens,
// from the host's leaves, pods and Events, and ends with a table.
//
// Run it with `make demo`, which builds the control-plane binaries,
// leafsync and the baseline first. With -hold (the default) everything
// stays up until Ctrl-C, for a look with kubectl; Ctrl-C tears down and
// exits 0.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/leafsync/leafsync/test/harness"
)

// demoConfig scales leafsync's thresholds down so the story plays out in
// minutes: probe 1s, cordon after 2s, NotReady after 40s, Ready after 5s.
// The host's KCM marks a silent node Unknown after 8s and evicts its pods
// 10s later (tolerationSeconds).
const demoConfig = `
hysteresis:
  probeInterval: 1s
  cordonAfter: 2s
  notReadyAfter: 40s
  readyAfter: 5s
  window: 120s
leaves:
  leaseRenewInterval: 1s
  leaseRenewTimeout: 5s
members:
  probeTimeout: 1s
podSync:
  maxDeferral: 60s
  reapAfter: 10s
  resync: 5s
verification:
  retryMin: 1s
  retryMax: 2s
  canary: false
`

const (
	flap              = 30 * time.Second
	outage            = 90 * time.Second
	tolerationSeconds = 10
)

func main() {
	hold := flag.Bool("hold", true, "keep everything running until Ctrl-C after the scenario")
	flag.Parse()
	env := &demoEnv{}
	code := 0
	func() {
		defer env.teardown()
		defer func() {
			if r := recover(); r != nil && r != errFatal {
				panic(r)
			} else if r != nil {
				code = 1
			}
		}()
		code = run(env, *hold)
	}()
	os.Exit(code)
}

// leafView is one leaf and the workloads on it, as the demo follows them.
type leafView struct {
	leaf, ns, by string
	member       *harness.Cluster
	proxy        *harness.FaultProxy
}

func run(env *demoEnv, hold bool) int {
	ctx := context.Background()
	start := time.Now()
	say("starting a host and three member clusters (real kube-apiserver, KCM, scheduler, etcd, kwok)...")
	host := harness.StartHost(env, harness.HostOptions{})
	hc := host.Client()
	views := []*leafView{
		{leaf: "leaf-member-a", ns: "shop-a", by: "leafsync"},
		{leaf: "leaf-member-b", ns: "shop-b", by: "leafsync"},
		{leaf: "vk-member-vk", ns: "shop-vk", by: "virtual-kubelet"},
	}
	for _, v := range views {
		name := strings.TrimPrefix(strings.TrimPrefix(v.leaf, "leaf-"), "vk-")
		v.member = harness.StartMember(env, harness.MemberOptions{Name: name, Nodes: 2})
		must(v.member.LiftNotReadyTaints(ctx))
		must(v.member.StartScheduler())
		v.proxy = harness.NewFaultProxy(env, name, v.member.Addr())
		must(host.EnsureNamespace(ctx, v.ns))
	}
	a, b, vk := views[0], views[1], views[2]
	say("control planes up in %s", time.Since(start).Round(time.Second))

	must(host.EnsureNamespace(ctx, "leafsync-system"))
	cfgPath := filepath.Join(harness.LogDir(env), "leafsync-config.yaml")
	must(os.WriteFile(cfgPath, []byte(demoConfig), 0o600))
	ls := harness.StartLeafsync(env, "leafsync", host.Kubeconfig(), "--namespace=leafsync-system", "--config="+cfgPath, "--log-level=info")
	register := func(v *leafView) {
		name := strings.TrimPrefix(v.leaf, "leaf-")
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "leafsync-system",
				Labels: map[string]string{"leafsync.io/cluster": name}},
			Data: map[string][]byte{"kubeconfig": v.member.KubeconfigVia(v.proxy.Addr())},
		}
		_, err := hc.CoreV1().Secrets("leafsync-system").Create(ctx, secret, metav1.CreateOptions{})
		must(err)
		harness.Eventually(env, time.Minute, v.leaf+" Ready", func() error { return readyErr(hc, v.leaf) })
	}
	// member-b first, so that its StatefulSet (allowed on both leafsync
	// leaves) starts there and has somewhere to fail over to.
	register(b)
	createWorkloads(ctx, hc, b, b.leaf, a.leaf)
	register(a)
	createWorkloads(ctx, hc, a, a.leaf)
	dir := harness.LogDir(env)
	hostKC, vkKC := filepath.Join(dir, "vk-host.kubeconfig"), filepath.Join(dir, "vk-member.kubeconfig")
	must(os.WriteFile(hostKC, host.Kubeconfig(), 0o600))
	must(os.WriteFile(vkKC, vk.member.KubeconfigVia(vk.proxy.Addr()), 0o600))
	harness.StartBinary(env, "vk-baseline", harness.Bin(env, "vk-baseline"),
		"--kubeconfig="+hostKC, "--member-kubeconfig="+vkKC, "--node-name="+vk.leaf,
		"--ping-interval=1s", "--ping-timeout=1s", "--lease-renew-interval=1s", "--status-update-interval=10s", "--informer-resync=10s",
		"--label=kubernetes.io/hostname="+vk.leaf+",type=virtual-kubelet")
	harness.Eventually(env, time.Minute, vk.leaf+" Ready", func() error { return readyErr(hc, vk.leaf) })
	createWorkloads(ctx, hc, vk, vk.leaf)
	for _, v := range views {
		harness.Eventually(env, 2*time.Minute, v.ns+" running", func() error {
			if n := readyPods(ctx, hc, v.ns); n < 4 {
				return fmt.Errorf("%d of 4 pods Ready", n)
			}
			return nil
		})
	}
	say("three leaves, a Deployment and a StatefulSet of 2 pods on each:")
	kubectl(host, "get", "nodes", "-L", "leafsync.io/cluster,type")

	fmt.Println()
	say("now: member-a and member-vk cut for %s (a flap: longer than KCM's 8s grace, shorter than leafsync's notReadyAfter 40s);", flap)
	say("     member-b cut for %s (an outage). Pods tolerate an unreachable node for %ds.", outage, tolerationSeconds)
	fmt.Println()
	nar := narrate(hc, views)
	t0 := time.Now()
	for _, v := range views {
		v.proxy.Cut()
	}
	time.Sleep(flap)
	must(a.proxy.Heal())
	must(vk.proxy.Heal())
	nar.note(fmt.Sprintf("member-a and member-vk reachable again (after %s)", flap))
	time.Sleep(outage - flap)
	must(b.proxy.Heal())
	nar.note(fmt.Sprintf("member-b reachable again (after %s)", outage))
	// leafsync's leaves and pods must be back: that is the promise. The
	// virtual-kubelet leaf must be Ready, but its replacement pods may take
	// minutes: it retries a pod delete that failed during the cut with a
	// per-pod backoff that doubles up to 1000s (client-go's workqueue), so
	// the demo waits a while for them, then says how far they got.
	harness.Eventually(env, 2*time.Minute, "every leaf Ready and every pod on leafsync's leaves Ready", func() error {
		for _, v := range views {
			if err := readyErr(hc, v.leaf); err != nil {
				return fmt.Errorf("%s: %v", v.leaf, err)
			}
			if n := readyPods(ctx, hc, v.ns); n < 4 && v.by == "leafsync" {
				return fmt.Errorf("%s: %d of 4 pods Ready", v.ns, n)
			}
		}
		return nil
	})
	for end := time.Now().Add(time.Minute); readyPods(ctx, hc, vk.ns) < 4 && time.Now().Before(end); {
		time.Sleep(time.Second)
	}
	if n := readyPods(ctx, hc, vk.ns); n < 4 {
		say("%s: %d of 4 pods Ready %s after the flap: virtual-kubelet retries the deletes that failed during the cut with a growing per-pod backoff", vk.ns, n, time.Since(t0).Round(time.Second))
	}
	time.Sleep(5 * time.Second)
	sum := nar.stop()

	fmt.Println()
	say("summary, %s from the first cut:", time.Since(t0).Round(time.Second))
	fmt.Printf("  %-15s %-16s %-18s %-13s %-15s %-15s %s\n", "LEAF", "SERVED BY", "FAULT", "LEAF NOTREADY", "PODS EVICTED", "MEMBER PODS DEL", "POD-SECONDS NOT READY")
	faults := map[string]string{a.leaf: "30s flap", b.leaf: "90s outage", vk.leaf: "30s flap"}
	for _, v := range views {
		s := sum[v.leaf]
		fmt.Printf("  %-15s %-16s %-18s %-13d %-15d %-15d %.0f\n", v.leaf, v.by, faults[v.leaf], s.notReady, len(s.evicted), len(s.memberDeleted), s.podSeconds)
	}
	fmt.Println()
	sa, sb, sv := sum[a.leaf], sum[b.leaf], sum[vk.leaf]
	say("the same 30s flap: on leafsync's leaf %d NotReady, %d pods evicted, %d member pods deleted, %.0f pod-seconds not Ready; on virtual-kubelet's %d, %d, %d, %.0f.",
		sa.notReady, len(sa.evicted), len(sa.memberDeleted), sa.podSeconds, sv.notReady, len(sv.evicted), len(sv.memberDeleted), sv.podSeconds)
	var moved []string
	for pod, node := range sb.elsewhere {
		moved = append(moved, pod+" on "+node)
	}
	sort.Strings(moved)
	byLeafsync, byKCM := sb.evictions()
	say("%s", outageSentence(outage.String(), byLeafsync, byKCM, moved))
	say("leafsync's own account:")
	cmd := exec.Command(harness.LeafsyncBinary(env), "status", "-n", "leafsync-system", "--kubeconfig", mustWrite(host))
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	_ = cmd.Run()
	say("from leafsync's metrics:")
	printMetrics(ls.MetricsAddr, "leafsync_member_flaps_suppressed_total", "leafsync_evictions_refused_total", "leafsync_evictions_completed_total")
	if !hold {
		return 0
	}
	fmt.Printf("\ndemo: logs are in %s\n", filepath.Dir(host.Dir))
	fmt.Printf("demo: host:      kubectl --kubeconfig %s get nodes,pods -A -o wide\n", mustWrite(host))
	for _, v := range views {
		fmt.Printf("demo: %-10s kubectl --kubeconfig %s get pods -A\n", v.leaf[strings.LastIndex(v.leaf, "-")+1:]+":", mustWrite(v.member))
	}
	fmt.Println("demo: press Ctrl-C to tear everything down")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	fmt.Println("\ndemo: tearing down")
	return 0
}

func createWorkloads(ctx context.Context, hc kubernetes.Interface, v *leafView, dbLeaves ...string) {
	web := harness.LeafWorkload{Namespace: v.ns, Name: "web", Replicas: 2, Leaves: []string{v.leaf},
		TolerationSeconds: tolerationSeconds, TerminationGracePeriodSeconds: ptr.To[int64](5)}
	db := web
	db.Name, db.Leaves = "db", dbLeaves
	_, err := hc.AppsV1().Deployments(v.ns).Create(ctx, web.Deployment(), metav1.CreateOptions{})
	must(err)
	_, err = hc.AppsV1().StatefulSets(v.ns).Create(ctx, db.StatefulSet(), metav1.CreateOptions{})
	must(err)
}

func readyPods(ctx context.Context, hc kubernetes.Interface, ns string) int {
	pods, err := hc.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0
	}
	n := 0
	for i := range pods.Items {
		if p := &pods.Items[i]; p.DeletionTimestamp == nil && podReady(p) {
			n++
		}
	}
	return n
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// leafSummary is what a leaf's workloads went through.
type leafSummary struct {
	notReady int
	// evicted: the leaf's host pods seen being deleted, by UID, and who
	// evicted them (evictedBy).
	evicted       map[types.UID]string
	memberDeleted map[types.UID]bool
	podSeconds    float64
	// elsewhere: pods of this leaf's workloads seen Ready on another node.
	elsewhere map[string]string
}

// narrator polls the host (leaves, pods, Events) and the members (pods)
// once a second and prints what changed.
type narrator struct {
	start  time.Time
	notes  chan string
	stopCh chan struct{}
	done   chan map[string]*leafSummary
}

func (n *narrator) note(s string) { n.notes <- s }

func (n *narrator) stop() map[string]*leafSummary {
	close(n.stopCh)
	return <-n.done
}

// events worth narrating, from leafsync (on leaves and pods) and KCM.
var narrated = map[string]bool{
	"LeafFlapSuppressed": true, "LeafNotReady": true, "LeafRecovering": true, "LeafReady": true, "LeafCordoned": true,
	"EvictionRefused": true, "EvictionCompleted": true, "StaleEvictionDeferred": true, "MemberPodAdopted": true,
	"PodReaped": true, "DeleteOwed": true, "TaintManagerEviction": true, "NodeNotReady": true,
}

func narrate(hc kubernetes.Interface, views []*leafView) *narrator {
	n := &narrator{start: time.Now(), notes: make(chan string, 8), stopCh: make(chan struct{}), done: make(chan map[string]*leafSummary, 1)}
	ctx := context.Background()
	sum := map[string]*leafSummary{}
	last := map[string]string{}
	memberSeen := map[string]map[types.UID]bool{}
	for _, v := range views {
		sum[v.leaf] = &leafSummary{evicted: map[types.UID]string{}, memberDeleted: map[types.UID]bool{}, elsewhere: map[string]string{}}
		memberSeen[v.leaf] = map[types.UID]bool{}
	}
	seenEvents := map[types.UID]bool{}
	if evs, err := hc.EventsV1().Events("").List(ctx, metav1.ListOptions{}); err == nil {
		for _, e := range evs.Items {
			seenEvents[e.UID] = true
		}
	}
	print := func(format string, args ...any) {
		fmt.Printf("  t+%-4s "+format+"\n", append([]any{time.Since(n.start).Round(time.Second).String()}, args...)...)
	}
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			for _, v := range views {
				s := sum[v.leaf]
				node, err := hc.CoreV1().Nodes().Get(ctx, v.leaf, metav1.GetOptions{})
				ready := "missing"
				if err == nil {
					ready = string(harness.NodeReady(node))
				}
				pods, _ := hc.CoreV1().Pods(v.ns).List(ctx, metav1.ListOptions{})
				readyN := 0
				if pods != nil {
					for i := range pods.Items {
						p := &pods.Items[i]
						if p.DeletionTimestamp == nil && podReady(p) {
							readyN++
						}
						if p.Spec.NodeName == v.leaf {
							s.observe(p)
						}
						if p.Spec.NodeName != "" && p.Spec.NodeName != v.leaf && podReady(p) {
							s.elsewhere[p.Name] = p.Spec.NodeName
						}
					}
				}
				s.podSeconds += float64(max(4-readyN, 0))
				if mp, err := v.member.Client().CoreV1().Pods(v.ns).List(ctx, metav1.ListOptions{}); err == nil {
					now := map[types.UID]bool{}
					for i := range mp.Items {
						now[mp.Items[i].UID] = true
						memberSeen[v.leaf][mp.Items[i].UID] = true
					}
					for uid := range memberSeen[v.leaf] {
						if !now[uid] {
							s.memberDeleted[uid] = true
						}
					}
				}
				state := fmt.Sprintf("leaf Ready=%s, %d/4 pods Ready", ready, readyN)
				if state != last[v.leaf] {
					if strings.HasPrefix(last[v.leaf], "leaf Ready=True") && ready != "True" {
						s.notReady++
					}
					print("%-14s (%s) %s", v.leaf, v.by, state)
					last[v.leaf] = state
				}
			}
			if evs, err := hc.EventsV1().Events("").List(ctx, metav1.ListOptions{}); err == nil {
				var fresh []string
				for _, e := range evs.Items {
					if seenEvents[e.UID] || !narrated[e.Reason] {
						continue
					}
					seenEvents[e.UID] = true
					fresh = append(fresh, fmt.Sprintf("event %s on %s %s: %s", e.Reason, strings.ToLower(e.Regarding.Kind), e.Regarding.Name, firstLine(e.Note)))
				}
				sort.Strings(fresh)
				for _, f := range fresh {
					print("%s", f)
				}
			}
			select {
			case s := <-n.notes:
				print("--- %s", s)
			case <-n.stopCh:
				n.done <- sum
				return
			case <-tick.C:
			}
		}
	}()
	return n
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 140 {
		s = s[:140] + "…"
	}
	return s
}

func say(format string, args ...any) { fmt.Printf("demo: "+format+"\n", args...) }

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		panic(errFatal)
	}
}

func mustWrite(c *harness.Cluster) string {
	p, err := c.WriteKubeconfig()
	must(err)
	return p
}

func readyErr(hc kubernetes.Interface, leaf string) error {
	n, err := hc.CoreV1().Nodes().Get(context.Background(), leaf, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if s := harness.NodeReady(n); s != corev1.ConditionTrue {
		return fmt.Errorf("Ready=%s", s)
	}
	return nil
}

func printMetrics(addr string, names ...string) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		fmt.Println("  metrics:", err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		for _, n := range names {
			if strings.HasPrefix(line, n) {
				fmt.Println("  " + line)
			}
		}
	}
}

func kubectl(c *harness.Cluster, args ...string) {
	path, err := exec.LookPath("kubectl")
	if err != nil {
		nodes, err := c.Client().CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
		must(err)
		for _, n := range nodes.Items {
			fmt.Printf("  %-16s Ready=%s cluster=%s\n", n.Name, harness.NodeReady(&n), n.Labels["leafsync.io/cluster"])
		}
		return
	}
	cmd := exec.Command(path, append([]string{"--kubeconfig", mustWrite(c)}, args...)...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	_ = cmd.Run()
}

var errFatal = fmt.Errorf("demo: fatal")

// demoEnv satisfies harness.TB outside a test.
type demoEnv struct {
	cleanups []func()
	failed   bool
}

func (*demoEnv) Helper()      {}
func (*demoEnv) Name() string { return "demo" }
func (*demoEnv) Logf(format string, args ...any) {
	fmt.Printf(format+"\n", args...)
}
func (e *demoEnv) Fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "demo: "+format+"\n", args...)
	e.failed = true
	panic(errFatal)
}
func (e *demoEnv) Failed() bool     { return e.failed }
func (e *demoEnv) Cleanup(f func()) { e.cleanups = append(e.cleanups, f) }
func (e *demoEnv) teardown() {
	for i := len(e.cleanups) - 1; i >= 0; i-- {
		e.cleanups[i]()
	}
}
