//go:build e2e

package flapbench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/leafsync/leafsync/test/harness"
)

// Timings: production defaults scaled down by about 3, the same for both
// contestants (docs/benchmarks/flap.md says which is which).
var (
	kcmTimings = harness.Timings{
		NodeMonitorPeriod:      2 * time.Second,  // 5s
		NodeMonitorGracePeriod: 17 * time.Second, // 50s
		NodeEvictionRate:       1,
	}
	tolerationSeconds int64 = 100 // 300
)

const leafsyncConfig = `
hysteresis:
  probeInterval: 2s
  cordonAfter: 4s
  notReadyAfter: 30s
  readyAfter: 10s
leaves:
  leaseRenewInterval: 3s
  leaseDuration: 13s
  leaseRenewTimeout: 2s
leaderElection:
  leaseDuration: 4s
  renewDeadline: 3s
  retryPeriod: 500ms
members:
  probeTimeout: 1s
podSync:
  maxDeferral: 60s
  reapAfter: 20s
  resync: 10s
verification:
  retryMin: 1s
  retryMax: 2s
  canary: false
`

const timingsText = "KCM node-monitor-period 2s, grace 17s (production 5s/50s); tolerationSeconds 100s (300s); " +
	"leafsync probe 2s, cordonAfter 4s, notReadyAfter 30s, readyAfter 10s, Lease renewed every 3s (13s); " +
	"virtual-kubelet ping every 3s with a 1s timeout (10s, none; Liqo sets 1s), Lease renewed every 3s (10s, 40s), status written every 20s (1m), member pods re-notified every 20s (informer resync, 1m)"

// Scenario is a fault applied to every contestant at once.
type Scenario struct {
	Name string
	// Fault applies the fault and returns when it is over.
	Fault func(t *testing.T, cs []*contestant)
	// Observe is how long to keep looking after the fault.
	Observe time.Duration
	// Spare: each contestant gets a spare node in the host (a kwok node,
	// cordoned until the fault begins) where its workloads may fail over.
	Spare bool
	// Promise: every partition is shorter than notReadyAfter, so leafsync
	// must lose nothing (Quiet: and no pod is deleted on purpose either).
	Promise, Quiet bool
}

func partition(d time.Duration) func(*testing.T, []*contestant) {
	return func(t *testing.T, cs []*contestant) {
		for _, c := range cs {
			c.memberLink.Cut()
		}
		time.Sleep(d)
		for _, c := range cs {
			if err := c.memberLink.Heal(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func repeated(n int, cut, gap time.Duration) func(*testing.T, []*contestant) {
	return func(t *testing.T, cs []*contestant) {
		for i := 0; i < n; i++ {
			partition(cut)(t, cs)
			if i < n-1 {
				time.Sleep(gap)
			}
		}
	}
}

func hostLatency(d, during time.Duration) func(*testing.T, []*contestant) {
	return func(t *testing.T, cs []*contestant) {
		for _, l := range hostLinks(cs) {
			if err := l.Latency(d, 0); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(during)
		for _, l := range hostLinks(cs) {
			if err := l.Heal(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// permanentOutage cuts each contestant's link to its member for good and
// opens the spare nodes: what counts is how soon the workloads run there.
func permanentOutage(t *testing.T, cs []*contestant) {
	for _, c := range cs {
		if err := setUnschedulable(c.host, c.spare, false); err != nil {
			t.Fatal(err)
		}
		c.memberLink.Cut()
	}
}

func setUnschedulable(hc kubernetes.Interface, node string, on bool) error {
	patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, on)
	_, err := hc.CoreV1().Nodes().Patch(context.Background(), node, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// memberRefusesCreates: the member's own admission answers every pod
// create with 500 for a while; meanwhile one pod of each Deployment is
// deleted by a user, so its replacement has to be created downstream.
func memberRefusesCreates(during time.Duration) func(*testing.T, []*contestant) {
	return func(t *testing.T, cs []*contestant) {
		ctx := context.Background()
		for _, c := range cs {
			if err := c.member.FailPodCreates(ctx, c.ns); err != nil {
				t.Fatal(err)
			}
			pods, err := c.host.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
			if err != nil || len(pods.Items) == 0 {
				t.Fatalf("%s: web pods: %v", c.name, err)
			}
			if err := c.host.CoreV1().Pods(c.ns).Delete(ctx, pods.Items[0].Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(during)
		for _, c := range cs {
			if err := c.member.HealPodCreates(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Scenarios in the order they run. The smoke (FLAPBENCH_SCENARIOS=smoke)
// is a 5s partition with a short look after.
var scenarios = []Scenario{
	{Name: "partition-5s", Fault: partition(5 * time.Second), Observe: 30 * time.Second, Promise: true, Quiet: true},
	{Name: "partition-15s", Fault: partition(15 * time.Second), Observe: 40 * time.Second, Promise: true, Quiet: true},
	{Name: "partition-29s", Fault: partition(29 * time.Second), Observe: 60 * time.Second, Promise: true, Quiet: true},
	{Name: "ten-10s-partitions", Fault: repeated(10, 10*time.Second, 10*time.Second), Observe: 60 * time.Second, Promise: true, Quiet: true},
	{Name: "outage-150s", Fault: partition(150 * time.Second), Observe: 120 * time.Second},
	{Name: "permanent-outage", Fault: permanentOutage, Observe: 210 * time.Second, Spare: true},
	{Name: "host-latency-3s-60s", Fault: hostLatency(3*time.Second, 60*time.Second), Observe: 40 * time.Second, Promise: true, Quiet: true},
	{Name: "member-500-on-creates-60s", Fault: memberRefusesCreates(60 * time.Second), Observe: 40 * time.Second, Promise: true},
}

func selected(t *testing.T) []Scenario {
	want := os.Getenv("FLAPBENCH_SCENARIOS")
	if want == "smoke" {
		return []Scenario{{Name: "smoke-partition-5s", Fault: partition(5 * time.Second), Observe: 15 * time.Second, Promise: true, Quiet: true}}
	}
	if want == "" {
		return scenarios
	}
	var out []Scenario
	for _, name := range strings.Split(want, ",") {
		found := false
		for _, s := range scenarios {
			if s.Name == name {
				out, found = append(out, s), true
			}
		}
		if !found {
			t.Fatalf("FLAPBENCH_SCENARIOS: no scenario %q", name)
		}
	}
	return out
}

// repetitions is FLAPBENCH_REPEAT, the runs of each scenario (default 1).
func repetitions(t *testing.T) int {
	v := os.Getenv("FLAPBENCH_REPEAT")
	if v == "" {
		return 1
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("FLAPBENCH_REPEAT=%q: want a positive number", v)
	}
	return n
}

// TestFlapBench runs every selected scenario, each on fresh clusters, and
// writes the report to $FLAPBENCH_OUT (default _output/flapbench).
func TestFlapBench(t *testing.T) {
	out := os.Getenv("FLAPBENCH_OUT")
	if out == "" {
		root, err := harness.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		out = filepath.Join(root, "_output", "flapbench")
	}
	start := time.Now()
	l := selectContestants(t)
	rep := &Report{
		Date:    start.UTC().Format("2006-01-02"),
		Command: "make bench-flap",
		Machine: harness.Machine(),
		Timings: timingsText,
		Notes:   l.notes,
	}
	reps := repetitions(t)
	for _, sc := range selected(t) {
		for i := 1; i <= reps; i++ {
			name := sc.Name
			if reps > 1 {
				name = fmt.Sprintf("%s-%d", sc.Name, i)
			}
			t.Run(name, func(t *testing.T) {
				rs := runScenario(t, sc, l)
				for j := range rs {
					rs[j].Repetition = i
				}
				rep.Results = append(rep.Results, rs...)
				if sc.Promise {
					checkPromise(t, sc, rs)
				}
			})
		}
	}
	rep.Duration = time.Since(start).Round(time.Second).String()
	if err := rep.Write(out); err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(filepath.Join(out, "report.md"))
	t.Logf("report in %s:\n%s", out, md)
}

// checkPromise: a fault leafsync is built to absorb costs its workloads
// nothing. Anything lost is a bug, not a number to publish.
func checkPromise(t *testing.T, sc Scenario, rs []Result) {
	for _, r := range rs {
		if r.Contestant != "leafsync" {
			continue
		}
		if r.NotReadyTransitions+r.NoExecuteTaints+r.HostEvictions > 0 {
			t.Errorf("leafsync, %s: leaf NotReady %d times, %d NoExecute taints, %d evictions; want none",
				sc.Name, r.NotReadyTransitions, r.NoExecuteTaints, r.HostEvictions)
		}
		if sc.Quiet && (r.MemberPodsDeleted > 0 || r.PodSecondsNotReady > 0 || r.OrphansAtEnd > 0) {
			t.Errorf("leafsync, %s: %d member pods deleted, %.1f pod-seconds NotReady, %d orphans; want none",
				sc.Name, r.MemberPodsDeleted, r.PodSecondsNotReady, r.OrphansAtEnd)
		}
	}
}

// contestant is one leaf implementation with its own member and links.
type contestant struct {
	name       string
	leaf       string
	spare      string // a host node the workloads may fail over to ("": none)
	ns         string
	host       kubernetes.Interface
	member     *harness.Cluster
	memberLink *harness.FaultProxy // contestant → member
	hostLink   *harness.FaultProxy // contestant → host
	rec        *recorder
}

func runScenario(t *testing.T, sc Scenario, l lineup) []Result {
	ctx := context.Background()
	host := harness.StartHost(t, harness.HostOptions{Timings: kcmTimings})
	hc := host.Client()
	cs := startContestants(t, host, l)
	if sc.Spare {
		for _, c := range cs {
			names, err := host.AddNodes(ctx, "spare-"+c.name, 1, harness.NodeSpec{})
			if err != nil {
				t.Fatal(err)
			}
			c.spare = names[0]
			if err := setUnschedulable(hc, c.spare, true); err != nil {
				t.Fatal(err)
			}
		}
	}

	for _, c := range cs {
		waitLeafReady(t, hc, c.leaf)
		ownZone(t, c)
		for _, w := range workloads(c) {
			if w.sts {
				sts := w.StatefulSet()
				tolerateKosmos(&sts.Spec.Template.Spec)
				if _, err := hc.AppsV1().StatefulSets(c.ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				continue
			}
			d := w.Deployment()
			tolerateKosmos(&d.Spec.Template.Spec)
			if _, err := hc.AppsV1().Deployments(c.ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range cs {
		c.rec = newRecorder(t, c)
		harness.Eventually(t, 2*time.Minute, c.name+": every pod Ready in the host and running in the member", func() error {
			s := c.rec.sample(0)
			if s.HostReady < desired || s.MemberRunning < desired {
				return fmt.Errorf("%d host pods Ready, %d member pods running, want %d", s.HostReady, s.MemberRunning, desired)
			}
			return nil
		})
	}
	// A few seconds of the quiet before.
	begin := time.Now().Add(5 * time.Second)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func(c *contestant) { defer wg.Done(); c.rec.sampleUntil(begin, stop) }(c)
	}
	time.Sleep(time.Until(begin))
	for _, c := range cs {
		c.rec.begin(begin)
	}
	sc.Fault(t, cs)
	faultEnd := time.Since(begin)
	time.Sleep(sc.Observe)
	close(stop)
	wg.Wait()
	for _, c := range cs {
		checkOwnZone(t, c)
	}

	var results []Result
	for _, c := range cs {
		r := c.rec.result(t, sc.Name, faultEnd)
		results = append(results, r)
		t.Logf("%s: NotReady %d, taints %d, evictions %d, member deletes %d, starts %d, pod-s NotReady %.0f, capacity-s lost %.0f, orphans %d, recovered after %.0fs",
			c.name, r.NotReadyTransitions, r.NoExecuteTaints, r.HostEvictions, r.MemberPodsDeleted, r.MemberPodsStarted,
			r.PodSecondsNotReady, r.CapacitySecondsLost, r.OrphansAtEnd, r.RecoveredAfter)
	}
	return results
}

// desired is the pods each contestant's workloads want: a Deployment and a
// StatefulSet of two each.
const desired = 4

type workload struct {
	harness.LeafWorkload
	sts bool
}

func workloads(c *contestant) []workload {
	nodes := []string{c.leaf}
	if c.spare != "" {
		nodes = append(nodes, c.spare)
	}
	mk := func(name string, sts bool) workload {
		return workload{harness.LeafWorkload{
			Namespace: c.ns, Name: name, Replicas: 2, Leaves: nodes,
			TolerationSeconds: tolerationSeconds, TerminationGracePeriodSeconds: ptr.To[int64](5),
		}, sts}
	}
	return []workload{mk("web", false), mk("db", true)}
}

func startLeafsync(t *testing.T, host *harness.Cluster, c *contestant) {
	ctx := context.Background()
	const ns = "leafsync-system"
	if err := host.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(harness.LogDir(t), "leafsync-config.yaml")
	if err := os.WriteFile(cfg, []byte(leafsyncConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	harness.StartLeafsync(t, "leafsync", host.KubeconfigVia(c.hostLink.Addr()), "--namespace="+ns, "--config="+cfg)
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "member-leafsync", Namespace: ns, Labels: map[string]string{"leafsync.io/cluster": "member-leafsync"}},
		Data:       map[string][]byte{"kubeconfig": c.member.KubeconfigVia(c.memberLink.Addr())},
	}
	if _, err := host.Client().CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func startVirtualKubelet(t *testing.T, host *harness.Cluster, c *contestant) {
	dir := harness.LogDir(t)
	hostKC, memberKC := filepath.Join(dir, "vk-host.kubeconfig"), filepath.Join(dir, "vk-member.kubeconfig")
	if err := os.WriteFile(hostKC, host.KubeconfigVia(c.hostLink.Addr()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(memberKC, c.member.KubeconfigVia(c.memberLink.Addr()), 0o600); err != nil {
		t.Fatal(err)
	}
	harness.StartBinary(t, "vk-baseline", harness.Bin(t, "vk-baseline"),
		"--kubeconfig="+hostKC, "--member-kubeconfig="+memberKC, "--node-name="+c.leaf,
		"--lease-duration=13s", "--lease-renew-interval=3s", "--ping-interval=3s", "--ping-timeout=1s", "--status-update-interval=20s", "--informer-resync=20s",
		"--label=kubernetes.io/hostname="+c.leaf+",type=virtual-kubelet,leafsync.io/contestant=virtual-kubelet")
}

func waitLeafReady(t *testing.T, hc kubernetes.Interface, leaf string) {
	harness.Eventually(t, 2*time.Minute, "leaf "+leaf+" Ready", func() error {
		n, err := hc.CoreV1().Nodes().Get(context.Background(), leaf, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s := harness.NodeReady(n); s != corev1.ConditionTrue {
			return fmt.Errorf("Ready=%q", s)
		}
		return nil
	})
}

// recorder follows one contestant through informers on the host (its leaf
// and pods) and the member (its pods), counting what happens to them and
// sampling their state twice a second.
type recorder struct {
	c                           *contestant
	nodes, hostPods, memberPods cache.Store
	cancel                      context.CancelFunc

	mu        sync.Mutex
	started   time.Time // zero until the fault begins
	lastReady corev1.ConditionStatus
	notReady  int
	taints    map[string]bool
	// markedForEviction: host pods seen with the taint manager's
	// DisruptionTarget condition; hostDeleted: host pods deleted.
	markedForEviction, hostDeleted map[types.UID]bool
	memberDeleted                  map[types.UID]bool
	memberBefore                   map[types.UID]bool
	memberStarted                  map[types.UID]bool
	samples                        []Sample
}

func newRecorder(t *testing.T, c *contestant) *recorder {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r := &recorder{c: c, cancel: cancel, lastReady: corev1.ConditionTrue,
		taints: map[string]bool{}, markedForEviction: map[types.UID]bool{}, hostDeleted: map[types.UID]bool{}, memberDeleted: map[types.UID]bool{},
		memberBefore: map[types.UID]bool{}, memberStarted: map[types.UID]bool{}}
	hostF := informers.NewSharedInformerFactoryWithOptions(c.host, 0, informers.WithNamespace(c.ns))
	nodeF := informers.NewSharedInformerFactoryWithOptions(c.host, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = "metadata.name=" + c.leaf
	}))
	memberF := informers.NewSharedInformerFactoryWithOptions(c.member.Client(), 0, informers.WithNamespace(c.ns))
	nodeInf, hostInf, memberInf := nodeF.Core().V1().Nodes().Informer(), hostF.Core().V1().Pods().Informer(), memberF.Core().V1().Pods().Informer()
	_, _ = nodeInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { r.node(o.(*corev1.Node)) },
		UpdateFunc: func(_, o any) { r.node(o.(*corev1.Node)) },
	})
	_, _ = hostInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, o any) { r.hostPod(o.(*corev1.Pod), false) },
		DeleteFunc: func(o any) {
			if p, ok := o.(*corev1.Pod); ok {
				r.hostPod(p, true)
			} else if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				if p, ok := d.Obj.(*corev1.Pod); ok {
					r.hostPod(p, true)
				}
			}
		},
	})
	_, _ = memberInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { r.memberPod(o.(*corev1.Pod), false) },
		UpdateFunc: func(_, o any) { r.memberPod(o.(*corev1.Pod), false) },
		DeleteFunc: func(o any) {
			if p, ok := o.(*corev1.Pod); ok {
				r.memberPod(p, true)
			} else if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				if p, ok := d.Obj.(*corev1.Pod); ok {
					r.memberPod(p, true)
				}
			}
		},
	})
	for _, f := range []informers.SharedInformerFactory{hostF, nodeF, memberF} {
		f.Start(ctx.Done())
		f.WaitForCacheSync(ctx.Done())
	}
	r.nodes, r.hostPods, r.memberPods = nodeInf.GetStore(), hostInf.GetStore(), memberInf.GetStore()
	return r
}

func (r *recorder) counting() bool { return !r.started.IsZero() }

func (r *recorder) node(n *corev1.Node) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ready := harness.NodeReady(n)
	if r.counting() && r.lastReady == corev1.ConditionTrue && ready != corev1.ConditionTrue {
		r.notReady++
	}
	r.lastReady = ready
	for _, tn := range n.Spec.Taints {
		if tn.Effect == corev1.TaintEffectNoExecute && (tn.Key == corev1.TaintNodeUnreachable || tn.Key == corev1.TaintNodeNotReady) && r.counting() {
			r.taints[tn.Key+"@"+fmt.Sprint(tn.TimeAdded)] = true
		}
	}
}

func (r *recorder) hostPod(p *corev1.Pod, deleted bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.counting() {
		return
	}
	// The condition and the delete can arrive in either order, and a
	// provider's status update can overwrite the condition (virtual-kubelet
	// does), so each is remembered on its own.
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == "DeletionByTaintManager" {
			r.markedForEviction[p.UID] = true
		}
	}
	if p.DeletionTimestamp != nil || deleted {
		r.hostDeleted[p.UID] = true
	}
}

func (r *recorder) memberPod(p *corev1.Pod, deleted bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.counting() {
		r.memberBefore[p.UID] = true
		return
	}
	if !r.memberBefore[p.UID] {
		r.memberStarted[p.UID] = true
	}
	if deleted || p.DeletionTimestamp != nil {
		r.memberDeleted[p.UID] = true
	}
}

func (r *recorder) begin(at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started = at
	for _, o := range r.memberPods.List() {
		r.memberBefore[o.(*corev1.Pod).UID] = true
	}
}

// sample reads the informers' stores.
func (r *recorder) sample(at time.Duration) Sample {
	s := Sample{At: at}
	if o, ok, _ := r.nodes.GetByKey(r.c.leaf); ok {
		s.LeafReady = string(harness.NodeReady(o.(*corev1.Node)))
	}
	for _, o := range r.hostPods.List() {
		p := o.(*corev1.Pod)
		if p.DeletionTimestamp == nil && podReady(p) {
			s.HostReady++
			if r.c.spare != "" && p.Spec.NodeName != r.c.leaf {
				if s.Elsewhere == nil {
					s.Elsewhere = map[string]int{}
				}
				s.Elsewhere[p.Labels["app"]]++
			}
		}
	}
	for _, o := range r.memberPods.List() {
		p := o.(*corev1.Pod)
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			s.MemberRunning++
		}
	}
	return s
}

func (r *recorder) sampleUntil(begin time.Time, stop <-chan struct{}) {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		s := r.sample(time.Since(begin))
		r.mu.Lock()
		r.samples = append(r.samples, s)
		r.mu.Unlock()
		select {
		case <-stop:
			return
		case <-tick.C:
		}
	}
}

func (r *recorder) result(t *testing.T, scenario string, faultEnd time.Duration) Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := Result{
		Scenario: scenario, Contestant: r.c.name, Desired: desired, FaultEnd: faultEnd,
		NotReadyTransitions: r.notReady, NoExecuteTaints: len(r.taints), HostEvictions: r.evictions(),
		MemberPodsDeleted: len(r.memberDeleted), MemberPodsStarted: len(r.memberStarted),
		Samples: append([]Sample(nil), r.samples...),
	}
	if r.c.spare != "" {
		res.Failover = map[string]int{}
		for _, w := range workloads(r.c) {
			res.Failover[w.Name] = int(w.Replicas)
		}
	}
	// Orphans: member pods no live host pod stands for (Kosmos names a
	// member pod as its host pod and records no UID).
	live := map[string]bool{}
	for _, o := range r.hostPods.List() {
		p := o.(*corev1.Pod)
		if p.DeletionTimestamp == nil {
			live[string(p.UID)], live["name:"+p.Name] = true, true
		}
	}
	for _, o := range r.memberPods.List() {
		p := o.(*corev1.Pod)
		uid := p.Labels["leafsync.io/host-uid"]
		if uid == "" {
			uid = p.Annotations["vk-baseline/host-uid"]
		}
		if uid == "" {
			uid = "name:" + p.Name
		}
		if p.DeletionTimestamp == nil && !live[uid] {
			res.OrphansAtEnd++
		}
	}
	res.Integrate()
	return res
}

// evictions: host pods marked for eviction and deleted.
func (r *recorder) evictions() int {
	n := 0
	for uid := range r.markedForEviction {
		if r.hostDeleted[uid] {
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
