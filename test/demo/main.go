// Command demo runs leafsync's main job on this machine, with real parts: a
// host cluster (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, a kwok worker) and two member clusters with kwok nodes
// and pods, each behind a TCP fault proxy; the real leafsync binary
// registers them as leaf nodes. Then member-a's network flaps for 6s and
// member-b goes down for 20s, and the demo prints what the host saw.
//
// Run it with `make demo`, which builds the control-plane binaries and
// leafsync first. With -hold (the default) everything stays up until
// Ctrl-C, for a look with kubectl.
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
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/leafsync/leafsync/test/harness"
)

// demoConfig scales leafsync's thresholds down so the story plays out in
// seconds: probe 1s, cordon after 2s, NotReady after 10s, Ready after 4s.
const demoConfig = `
hysteresis:
  probeInterval: 1s
  cordonAfter: 2s
  notReadyAfter: 10s
  readyAfter: 4s
  window: 60s
leaves:
  leaseRenewInterval: 1s
  leaseRenewTimeout: 5s
members:
  probeTimeout: 1s
`

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

func run(env *demoEnv, hold bool) int {
	ctx := context.Background()
	start := time.Now()
	say("starting a host and two member clusters (real kube-apiserver, KCM, scheduler, etcd, kwok)...")
	host := harness.StartHost(env, harness.HostOptions{})
	members := map[string]*harness.Cluster{
		"member-a": harness.StartMember(env, harness.MemberOptions{Name: "member-a", Nodes: 3, Pods: 4}),
		"member-b": harness.StartMember(env, harness.MemberOptions{Name: "member-b", Nodes: 2, Pods: 2}),
	}
	proxies := map[string]*harness.FaultProxy{}
	for name, m := range members {
		proxies[name] = harness.NewFaultProxy(env, name, m.Addr())
	}
	say("control planes up in %s", time.Since(start).Round(time.Second))

	hc := host.Client()
	must(host.EnsureNamespace(ctx, "leafsync-system"))
	cfgPath := filepath.Join(harness.LogDir(env), "leafsync-config.yaml")
	must(os.WriteFile(cfgPath, []byte(demoConfig), 0o600))
	ls := harness.StartLeafsync(env, "leafsync", host.Kubeconfig(), "--namespace=leafsync-system", "--config="+cfgPath, "--log-level=info")
	for _, name := range []string{"member-a", "member-b"} {
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "member-" + name, Namespace: "leafsync-system",
				Labels: map[string]string{"leafsync.io/cluster": name}},
			Data: map[string][]byte{"kubeconfig": members[name].KubeconfigVia(proxies[name].Addr())},
		}
		_, err := hc.CoreV1().Secrets("leafsync-system").Create(ctx, secret, metav1.CreateOptions{})
		must(err)
	}
	for _, leaf := range []string{"leaf-member-a", "leaf-member-b"} {
		harness.Eventually(env, time.Minute, leaf+" Ready", func() error { return readyErr(hc, leaf) })
	}
	say("leafsync registered both members; the host now has leaf nodes:")
	kubectl(host, "get", "nodes", "-L", "leafsync.io/cluster")

	watch := watchReady(hc)
	say("member-a: network cut for 6s (a flap, shorter than notReadyAfter=10s)")
	say("member-b: network cut for 20s (an outage, longer than notReadyAfter)")
	proxies["member-a"].Cut()
	proxies["member-b"].Cut()
	time.Sleep(6 * time.Second)
	must(proxies["member-a"].Heal())
	time.Sleep(14 * time.Second)
	must(proxies["member-b"].Heal())
	harness.Eventually(env, time.Minute, "leaf-member-b Ready again", func() error { return readyErr(hc, "leaf-member-b") })
	time.Sleep(3 * time.Second)
	seen := watch()

	fmt.Println()
	say("what the host saw (every version of each leaf's Ready condition, from a watch):")
	for _, leaf := range []string{"leaf-member-a", "leaf-member-b"} {
		fmt.Printf("  %s: %s\n", leaf, strings.Join(seen[leaf], " -> "))
	}
	say("leafsync's own account:")
	cmd := exec.Command(harness.LeafsyncBinary(env), "status", "-n", "leafsync-system", "--kubeconfig", mustWrite(host))
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	_ = cmd.Run()
	say("from leafsync's metrics:")
	printMetrics(ls.MetricsAddr, "leafsync_member_flaps_suppressed_total", "leafsync_member_transitions_total{cluster=\"member-b\",from=\"Suspect\",to=\"NotReady\"}")
	fmt.Println()
	say("member-a's flap never made its leaf NotReady; member-b's outage did, and it came back after readyAfter.")
	if !hold {
		return 0
	}
	fmt.Printf("\ndemo: logs are in %s\n", filepath.Dir(host.Dir))
	fmt.Printf("demo: kubectl --kubeconfig %s get nodes\n", mustWrite(host))
	fmt.Println("demo: press Ctrl-C to tear everything down")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	fmt.Println("\ndemo: tearing down")
	return 0
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

// watchReady records each leaf's Ready condition changes until stopped.
func watchReady(hc kubernetes.Interface) (stop func() map[string][]string) {
	ctx, cancel := context.WithCancel(context.Background())
	seen := map[string][]string{}
	done := make(chan struct{})
	w, err := hc.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{LabelSelector: "leafsync.io/cluster"})
	must(err)
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			n, ok := ev.Object.(*corev1.Node)
			if !ok {
				continue
			}
			state := string(harness.NodeReady(n))
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady {
					state = fmt.Sprintf("%s(%s)", c.Status, c.Reason)
				}
			}
			for _, t := range n.Spec.Taints {
				if t.Key == "leafsync.io/unreachable" {
					state += "+cordoned"
				}
			}
			if l := seen[n.Name]; len(l) == 0 || l[len(l)-1] != state {
				seen[n.Name] = append(l, state)
			}
		}
	}()
	return func() map[string][]string { cancel(); w.Stop(); <-done; return seen }
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
