//go:build e2e

package scalebench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/leafsync/leafsync/internal/syncer/metrics"
	"github.com/leafsync/leafsync/test/harness"
)

// params shape a run; SCALEBENCH=smoke is the small one CI runs.
type params struct {
	members, nodes, pods int
	steps                []int
	window               time.Duration // steady and churn windows
	churnRate            float64       // member pod creates+deletes per second, per member
	updates              int           // timed member node removals per step
}

func paramsFromEnv(t *testing.T) params {
	if os.Getenv("SCALEBENCH") == "smoke" {
		return params{members: 1, nodes: 10, pods: 100, steps: []int{2, 4}, window: 10 * time.Second, churnRate: 4, updates: 2}
	}
	p := params{members: 2, nodes: 200, pods: 2000, steps: []int{50, 100, 200}, window: 60 * time.Second, churnRate: 10, updates: 4}
	if s := os.Getenv("SCALEBENCH_STEPS"); s != "" {
		p.steps = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(f)
			if err != nil || n <= 0 {
				t.Fatalf("SCALEBENCH_STEPS: %q is not a positive number", f)
			}
			p.steps = append(p.steps, n)
		}
	}
	return p
}

// production timings on the host and in the members: kwok renews each
// node's Lease every 12.5s instead of every 2s, which matters with
// hundreds of nodes on two cores.
var production = harness.Timings{NodeMonitorPeriod: 5 * time.Second, NodeMonitorGracePeriod: 50 * time.Second, NodeEvictionRate: 0.1}

// auditAll records every request, so that leafsync's can be counted by
// verb and resource. Metadata level, with the ResponseComplete stage,
// holds both the time a request was received and the time its response
// completed (splitUpdates reads them).
const auditAll = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
`

const leafsyncNS = "leafsync-system"

func TestScaleBench(t *testing.T) {
	p := paramsFromEnv(t)
	out := os.Getenv("SCALEBENCH_OUT")
	if out == "" {
		root, err := harness.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		out = filepath.Join(root, "_output", "scalebench")
	}
	start := time.Now()
	rep := &Report{
		Date: start.UTC().Format("2006-01-02"), Command: "make bench-scale", Machine: harness.Machine(),
		Setup: fmt.Sprintf("%d member API servers of %d kwok nodes and %d pods each, registered round-robin (verification without the canary, which kwok cannot complete); %s with its default configuration; KCM node-monitor grace 50s; windows of %s; churn %.0f pod creates+deletes/s per member",
			p.members, p.nodes, p.pods, replicaSetup(replicaCount(t)), p.window, p.churnRate),
		Replicas: replicaCount(t),
	}
	defer func() {
		rep.Duration = time.Since(start).Round(time.Second).String()
		if err := rep.Write(out); err != nil {
			t.Error(err)
		}
		md, _ := os.ReadFile(filepath.Join(out, "report.md"))
		t.Logf("report in %s:\n%s", out, md)
		// After the report, so that it shows them: a leaf of a healthy
		// member that lost Ready is the fault leafsync exists to prevent.
		for _, s := range rep.Steps {
			if text := s.readyLossText(); text != "" {
				t.Errorf("at %d registrations, %s", s.Registrations, text)
			}
		}
	}()

	ctx := context.Background()
	host := harness.StartHost(t, harness.HostOptions{Timings: production, AuditPolicy: auditAll})
	var members []*harness.Cluster
	for i := range p.members {
		members = append(members, harness.StartMember(t, harness.MemberOptions{
			Name: fmt.Sprintf("member-%d", i), Nodes: p.nodes, Pods: p.pods, Timings: production,
			Pod: harness.PodSpec{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}},
		}))
	}
	if err := host.EnsureNamespace(ctx, leafsyncNS); err != nil {
		t.Fatal(err)
	}
	profile := profiles(t)
	ls, pprofAddrs := startReplicas(t, host, replicaCount(t), profile != "")
	w := newLeafWatch(t, host)
	b := &bench{t: t, p: p, host: host, members: members, ls: ls, w: w, profile: profile, pprofAddrs: pprofAddrs, out: out}

	for _, n := range p.steps {
		step, err := b.step(ctx, n)
		if err != nil {
			rep.Stopped = fmt.Sprintf("at %d registrations: %v", n, err)
			if text := step.readyLossText(); text != "" {
				rep.Stopped += "; " + text
			}
			t.Errorf("%s", rep.Stopped)
			return
		}
		rep.Steps = append(rep.Steps, step)
		t.Logf("%d registrations: %+v", n, step)
	}
}

type bench struct {
	t       *testing.T
	p       params
	host    *harness.Cluster
	members []*harness.Cluster
	ls      replicas
	w       *leafWatch
	// profile: which profile to take during leaf updates (see profiles),
	// of the replicas' pprofAddrs, into out.
	profile    string
	pprofAddrs []string
	out        string
	regs       int // registrations so far
	extra      int // extra member nodes made so far
}

func regName(i int) string  { return fmt.Sprintf("reg-%03d", i) }
func leafName(i int) string { return "leaf-" + regName(i) }

// step grows the registrations to n and measures.
func (b *bench) step(ctx context.Context, n int) (s Step, err error) {
	s = Step{Registrations: n, ChurnRate: b.p.churnRate * float64(b.p.members)}
	lostBefore, stepStart := b.w.lossCount(), b.ls.scrape(b.t)
	defer func() { s.recordLosses(b.w.lossesSince(lostBefore)) }()
	created := map[string]time.Time{}
	for i := b.regs; i < n; i++ {
		at, err := b.register(ctx, i)
		if err != nil {
			return s, err
		}
		created[leafName(i)] = at
	}
	b.regs = n
	var took []float64
	deadline := time.Now().Add(10 * time.Minute)
	for leaf, at := range created {
		ready, err := b.w.waitReady(leaf, deadline)
		if err != nil {
			return s, errors.Join(err, b.ls.exited())
		}
		took = append(took, ready.Sub(at).Seconds())
	}
	s.RegisterP50, s.RegisterP99 = Percentile(took, 50), Percentile(took, 99)
	if err := b.ls.exited(); err != nil {
		return s, err
	}
	if len(b.ls) > 1 {
		if _, err := b.splitMembers(ctx, n, time.Now().Add(5*time.Minute)); err != nil {
			return s, err
		}
	}
	time.Sleep(b.p.window / 2) // settle

	// Steady state.
	ms0, t0 := b.ls.scrape(b.t), time.Now()
	steady := b.ls.measure(b.t, b.p.window)
	ms1, t1 := b.ls.scrape(b.t), time.Now()
	m0, m1 := mergeMetrics(ms0), mergeMetrics(ms1)
	window := t1.Sub(t0).Seconds()
	s.SteadyRSSMiB, s.SteadyHeapMiB, s.SteadyCPU = total(steady.rss), total(steady.heap), total(steady.cpu)
	s.ProbesPerSec = (m1.sum("leafsync_probe_results_total") - m0.sum("leafsync_probe_results_total")) / window
	s.LeaseLagP99 = histogramQuantile(0.99, m0.buckets("leafsync_lease_renewal_lag_seconds"), m1.buckets("leafsync_lease_renewal_lag_seconds"))
	s.Goroutines = int(m1.sum("go_goroutines"))
	reqs, err := leafsyncRequests(b.host, t0, t1)
	if err != nil {
		return s, err
	}
	if len(reqs) == 0 {
		return s, fmt.Errorf("no request of leafsync's in the host's audit log between %s and %s: is its user agent still leafsync/…?", t0.Format(time.TimeOnly), t1.Format(time.TimeOnly))
	}
	s.HostRequests = map[string]float64{}
	for k, c := range reqs {
		s.HostRequests[k] = float64(c) / window
	}
	s.HostWritesPerLeaf = writesIn(reqs) / window / float64(n)
	if s.Replicas, err = b.replicaSteps(ctx, n, steady, ms0, ms1, t0, t1); err != nil {
		return s, err
	}

	// Churn.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, m := range b.members {
		wg.Add(1)
		go func() { defer wg.Done(); churn(b.t, m, fmt.Sprintf("churn-%d-%d", n, i), b.p.churnRate, stop) }()
	}
	t0 = time.Now()
	churnUse := b.ls.measure(b.t, b.p.window)
	t1 = time.Now()
	s.ChurnRSSMiB, s.ChurnCPU = total(churnUse.rss), total(churnUse.cpu)
	for i := range s.Replicas {
		s.Replicas[i].ChurnRSSMiB, s.Replicas[i].ChurnCPU = churnUse.rss[i], churnUse.cpu[i]
	}
	close(stop)
	wg.Wait()
	if reqs, err = leafsyncRequests(b.host, t0, t1); err != nil {
		return s, err
	}
	s.HostWritesPerLeafChurn = writesIn(reqs) / t1.Sub(t0).Seconds() / float64(n)

	var updates []leafUpdate
	err = profileDuring(b.t, b.profile, b.pprofAddrs, b.out, fmt.Sprintf("leafupdate-%d", n), func() (err error) {
		updates, err = b.leafUpdates(ctx)
		return err
	})
	if err != nil {
		return s, err
	}
	var lat []float64
	for _, u := range updates {
		lat = append(lat, u.seen.Sub(u.deleted).Seconds())
	}
	if want := b.p.updates * (n / len(b.members)); len(lat) < want {
		return s, fmt.Errorf("%d leaf updates measured, want at least %d", len(lat), want)
	}
	s.LeafUpdates = len(lat)
	s.LeafUpdateP50, s.LeafUpdateP99 = Percentile(lat, 50), Percentile(lat, 99)

	// One more registration on its own, as members usually arrive.
	at, err := b.register(ctx, b.regs)
	if err != nil {
		return s, err
	}
	ready, err := b.w.waitReady(leafName(b.regs), time.Now().Add(5*time.Minute))
	if err != nil {
		return s, err
	}
	s.RegisterAlone = ready.Sub(at).Seconds()
	b.regs++

	// The leaf updates' writes are looked up only now: the bench's watch
	// can see a write before the host has logged its completion.
	if err := b.splitLeafUpdates(updates, &s); err != nil {
		return s, err
	}
	stepEnd := b.ls.scrape(b.t)
	for i := range b.ls {
		failed := stepEnd[i].sum(leaseFailures) - stepStart[i].sum(leaseFailures)
		s.LeaseRenewalFailures += failed
		if i < len(s.Replicas) {
			s.Replicas[i].LeaseRenewalFailures = failed
		}
	}
	return s, nil
}

// leaseFailures counts failed rounds of leaf Lease renewal; named from
// leafsync's own spec, so that a rename cannot leave the bench summing a
// metric that no longer exists (its sum would be 0: no failures).
var leaseFailures = metrics.LeaseRenewalFailures.Name

// splitLeafUpdates puts in s where the updates' time went, from the host's
// audit log.
func (b *bench) splitLeafUpdates(updates []leafUpdate, s *Step) error {
	if len(updates) == 0 {
		return nil
	}
	// Updates are in the order the nodes were deleted.
	from, to := updates[0].deleted, updates[0].seen
	for _, u := range updates {
		if u.seen.After(to) {
			to = u.seen
		}
	}
	evs, err := leafsyncEvents(b.host, from, to.Add(time.Nanosecond))
	if err != nil {
		return err
	}
	sp := splitUpdates(updates, evs)
	if sp.missing == len(updates) {
		return fmt.Errorf("no status patch of a leaf by leafsync in the host's audit log for any of %d leaf updates", len(updates))
	}
	sp.record(s)
	return nil
}

// register creates registration i's Secret and returns when.
func (b *bench) register(ctx context.Context, i int) (time.Time, error) {
	m := b.members[i%len(b.members)]
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: regName(i), Namespace: leafsyncNS, Labels: map[string]string{"leafsync.io/cluster": regName(i)},
			// kwok completes no canary pod: with it, each registration
			// would retry a canary that times out, a cost no real member
			// pays after its first pass (docs/verification.md).
			Annotations: map[string]string{"leafsync.io/verify-canary": "false"}},
		Data: map[string][]byte{"kubeconfig": m.Kubeconfig()},
	}
	at := time.Now()
	_, err := b.host.Client().CoreV1().Secrets(leafsyncNS).Create(ctx, sec, metav1.CreateOptions{})
	return at, err
}

// leafUpdates removes member nodes one at a time and measures how long
// each leaf of that member takes to show the node gone. The node offers a
// resource of its own (markerResource), so that "the leaf shows the node"
// is not confused with a capacity change of another cause: comparing the
// leaf's cpu/memory/pods before and after took a deferred write of the
// churn's pods, landing while the bench waited for the added node, for the
// node itself; the node was then deleted before that leaf had counted it,
// and its leaf, right all along, looked as if it missed the removal.
func (b *bench) leafUpdates(ctx context.Context) ([]leafUpdate, error) {
	var out []leafUpdate
	for k := range b.p.updates {
		mi := (b.extra + k) % len(b.members)
		m := b.members[mi]
		name := fmt.Sprintf("extra-%d", b.extra+k)
		var leaves []string
		for i := mi; i < b.regs; i += len(b.members) {
			leaves = append(leaves, leafName(i))
		}
		spec := harness.NodeSpec{Allocatable: harness.DefaultAllocatable()}
		spec.Allocatable[markerResource] = resource.MustParse("1")
		if _, err := m.AddNodes(ctx, name, 1, spec); err != nil {
			return nil, err
		}
		// Not timed: the node becomes Ready when kwok gets to it.
		if err := b.w.waitMarked(leaves, true, time.Now().Add(5*time.Minute)); err != nil {
			return nil, fmt.Errorf("leaves did not show added node %s-0: %w", name, err)
		}
		// The timed change comes after a quiet spell: a member node change
		// within leafsync's 500 ms of the leaf's last node-driven sync is
		// folded into the next one by design (leaves.minGap: a burst of
		// node changes is one write), so a delete right after the add
		// showed waited out that gap (0.45 s of the smoke's 0.5 s).
		time.Sleep(quietBeforeChange)
		at := time.Now()
		if err := m.Client().CoreV1().Nodes().Delete(ctx, name+"-0", metav1.DeleteOptions{}); err != nil {
			return nil, err
		}
		if err := b.w.waitMarked(leaves, false, time.Now().Add(5*time.Minute)); err != nil {
			b.diagnose(ctx, leaves, mi, name+"-0")
			return nil, fmt.Errorf("leaves did not show removed node %s-0: %w", name, err)
		}
		for _, l := range leaves {
			out = append(out, leafUpdate{leaf: l, deleted: at, seen: b.w.markedAt(l)})
		}
	}
	b.extra += b.p.updates
	return out, nil
}

// churn creates a pod and deletes an older one in m at rate per second
// (creates and deletes together) until stop.
func churn(t *testing.T, m *harness.Cluster, prefix string, rate float64, stop <-chan struct{}) {
	ctx := context.Background()
	nodes, err := m.Client().CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) == 0 {
		t.Errorf("churn: nodes: %v", err)
		return
	}
	tick := time.NewTicker(time.Duration(float64(time.Second) * 2 / rate))
	defer tick.Stop()
	var made []string
	for i := 0; ; i++ {
		select {
		case <-stop:
			for _, name := range made {
				_ = m.Client().CoreV1().Pods("workload").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
			}
			return
		case <-tick.C:
		}
		name := fmt.Sprintf("%s-%d", prefix, i)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "workload"},
			Spec: corev1.PodSpec{NodeName: nodes.Items[i%len(nodes.Items)].Name, TerminationGracePeriodSeconds: ptr.To[int64](0),
				Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}}}}},
		}
		if _, err := m.Client().CoreV1().Pods("workload").Create(ctx, pod, metav1.CreateOptions{}); err == nil {
			made = append(made, name)
		}
		if len(made) > 20 {
			_ = m.Client().CoreV1().Pods("workload").Delete(ctx, made[0], metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
			made = made[1:]
		}
	}
}

// rssMiB is VmRSS of a process.
func rssMiB(t *testing.T, pid int) float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	t.Fatalf("no VmRSS for %d", pid)
	return 0
}

// cpuSeconds is the user+system CPU time of a process (clock ticks of
// 1/100 s, Linux's USER_HZ).
func cpuSeconds(t *testing.T, pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The command name, in parentheses, may hold spaces: fields after it.
	f := strings.Fields(string(data)[strings.LastIndexByte(string(data), ')')+2:])
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100
}

// metricsSnapshot is one scrape of leafsync's /metrics.
type metricsSnapshot map[string]*dto.MetricFamily

// sum adds every series of a counter, gauge or untyped metric.
func (m metricsSnapshot) sum(name string) float64 {
	f, ok := m[name]
	if !ok {
		return 0
	}
	total := 0.0
	for _, s := range f.Metric {
		switch {
		case s.Counter != nil:
			total += s.Counter.GetValue()
		case s.Gauge != nil:
			total += s.Gauge.GetValue()
		case s.Untyped != nil:
			total += s.Untyped.GetValue()
		}
	}
	return total
}

// buckets adds every series of a histogram: upper bound → cumulative count.
func (m metricsSnapshot) buckets(name string) map[float64]float64 {
	out := map[float64]float64{}
	if f, ok := m[name]; ok {
		for _, s := range f.Metric {
			for _, b := range s.GetHistogram().GetBucket() {
				out[b.GetUpperBound()] += float64(b.GetCumulativeCount())
			}
		}
	}
	return out
}

// histogramQuantile is the upper bound of the first bucket holding the
// q-quantile of the observations made between two scrapes.
func histogramQuantile(q float64, before, after map[float64]float64) float64 {
	var bounds []float64
	for ub := range after {
		bounds = append(bounds, ub)
	}
	if len(bounds) == 0 {
		return 0
	}
	sort.Float64s(bounds)
	total := after[bounds[len(bounds)-1]] - before[bounds[len(bounds)-1]]
	if total <= 0 {
		return 0
	}
	for _, ub := range bounds {
		if after[ub]-before[ub] >= q*total {
			return ub
		}
	}
	return bounds[len(bounds)-1]
}

// leafsyncRequests counts leafsync's requests to the host received in
// [from, to), by "verb resource[/subresource]", from the audit log.
func leafsyncRequests(host *harness.Cluster, from, to time.Time) (map[string]int, error) {
	evs, err := leafsyncEvents(host, from, to)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, e := range evs {
		r := e.ObjectRef.Resource
		if e.ObjectRef.Subresource != "" {
			r += "/" + e.ObjectRef.Subresource
		}
		out[e.Verb+" "+r]++
	}
	return out, nil
}

// writesIn counts the writes among requests by "verb resource".
func writesIn(reqs map[string]int) float64 {
	n := 0
	for k, c := range reqs {
		switch strings.SplitN(k, " ", 2)[0] {
		case "create", "update", "patch", "delete":
			n += c
		}
	}
	return float64(n)
}

// quietBeforeChange: see leafUpdates; longer than leafsync's minGap
// between a leaf's node-driven syncs (internal/syncer/leaves).
const quietBeforeChange = time.Second

// markerResource is offered by the member nodes leafUpdates adds and
// removes, and by no other node: a leaf offers it exactly while it counts
// such a node.
const markerResource corev1.ResourceName = "scalebench.leafsync.io/extra-node"

// leafWatch follows the host's Nodes: when each leaf was first Ready,
// when one lost Ready, and whether and since when each offers
// markerResource.
type leafWatch struct {
	mu     sync.Mutex
	ready  readyTracker
	marked map[string]bool
	since  map[string]time.Time // when marked last changed
}

func newLeafWatch(t *testing.T, host *harness.Cluster) *leafWatch {
	w := &leafWatch{ready: newReadyTracker(), marked: map[string]bool{}, since: map[string]time.Time{}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := informers.NewSharedInformerFactory(host.Client(), 0)
	inf := f.Core().V1().Nodes().Informer()
	on := func(o any) {
		n, ok := o.(*corev1.Node)
		if !ok || !strings.HasPrefix(n.Name, "leaf-") {
			return
		}
		now := time.Now()
		w.mu.Lock()
		defer w.mu.Unlock()
		w.ready.observe(n, now)
		q, has := n.Status.Capacity[markerResource]
		marked := has && !q.IsZero()
		if old, ok := w.marked[n.Name]; !ok || old != marked {
			w.marked[n.Name], w.since[n.Name] = marked, now
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: on, UpdateFunc: func(_, o any) { on(o) }})
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	return w
}

func (w *leafWatch) waitReady(leaf string, deadline time.Time) (time.Time, error) {
	for {
		w.mu.Lock()
		at, ok := w.ready.first[leaf]
		w.mu.Unlock()
		if ok {
			return at, nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("leaf %s not Ready by %s", leaf, deadline.Format(time.TimeOnly))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// lossCount is how many Ready losses the watch has seen so far.
func (w *leafWatch) lossCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.ready.losses)
}

// lossesSince are the Ready losses seen after the first i.
func (w *leafWatch) lossesSince(i int) []ReadyLoss {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]ReadyLoss(nil), w.ready.losses[i:]...)
}

func (w *leafWatch) markedAt(leaf string) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.since[leaf]
}

// unlike lists the leaves whose marked state is not want.
func (w *leafWatch) unlike(leaves []string, want bool) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, l := range leaves {
		if w.marked[l] != want {
			out = append(out, l)
		}
	}
	return out
}

// waitMarked waits until every leaf offers markerResource (want) or none
// does (!want).
func (w *leafWatch) waitMarked(leaves []string, want bool, deadline time.Time) error {
	for {
		off := w.unlike(leaves, want)
		if len(off) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d leaves not showing it (%s…)", len(off), off[0])
		}
		time.Sleep(50 * time.Millisecond)
	}
}
