//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/leafsync/leafsync/internal/syncer/registration"
	"github.com/leafsync/leafsync/internal/syncer/shard"
	"github.com/leafsync/leafsync/internal/syncer/store/kubestore"
	"github.com/leafsync/leafsync/test/harness"
)

// Sharding settings of TestSharding.
const (
	shardRing          = "e2e"
	shardLeaseDuration = 15 * time.Second
	// leafLeaseDuration is testConfig's leaves.leaseDuration: the bound
	// within which a paused replica's members must be served again.
	leafLeaseDuration = 40 * time.Second
)

// shardTimings: KCM's grace period as in production (50s), above the leaf
// Lease's duration (40s), which bounds a handover after a replica is lost
// (shard leaseDuration 15s + the take). With the tests' usual 8s, any loss
// of a replica would flip its leaves, as it would with a 15s-grace KCM in
// production; what the test proves is that the handover fits in 40s.
var shardTimings = harness.Timings{NodeMonitorPeriod: time.Second, NodeMonitorGracePeriod: 50 * time.Second, NodeEvictionRate: 1}

// shardAuditPolicy is the harness's default host audit policy (pods,
// nodes, node Leases) and the writes to leafsync's state ConfigMaps, so
// that the writers of a member's records are known too.
var shardAuditPolicy = harness.AuditPolicyWith(`- level: Metadata
  verbs: ["create", "update", "patch", "delete"]
  namespaces: ["` + leafsyncNamespace + `"]
  resources:
  - group: ""
    resources: ["configmaps"]
`)

// TestSharding runs three active leafsync replicas (sharding on, one ring)
// over twelve registrations of three kwok member clusters and a Deployment
// on the leaves (docs/scaling.md, #33):
//   - every leaf Ready, every member Lease held by a live replica's
//     incarnation, each replica acting on at least one member;
//   - the audit logs: each leaf's Lease, Node and pods, the member's state
//     ConfigMaps and its member pods are written by one replica at a time; the writer changes only where the member
//     Lease's holder changed, and at most once per such change;
//   - one replica SIGSTOPped for 60s, in the middle of a failure streak of
//     one of its members (records to write): its members are held by the others
//     within the leaf Lease's duration (40s), no leaf leaves Ready, no
//     member pod is deleted; once resumed, it writes nothing (host or
//     member) for a member it lost until it takes that member again, it
//     comes back as a new incarnation and takes members again by
//     rebalance (make before break: still no leaf leaves Ready);
//   - another replica SIGTERMed: it drains, the others take each of its
//     members before it exits, and it exits cleanly; neither the
//     rebalance nor the drain leaves a leaf Lease unrenewed for 8s.
func TestSharding(t *testing.T) {
	const replicas, registrations = 3, 12
	memberNames := []string{"member-a", "member-b", "member-c"}
	var opts []harness.MemberOptions
	for _, m := range memberNames {
		opts = append(opts, harness.MemberOptions{Name: m, Nodes: 2, Audit: true})
	}
	f := newFleet(t, harness.HostOptions{Timings: shardTimings, AuditPolicy: shardAuditPolicy}, opts...)
	ctx := context.Background()
	for _, m := range f.members {
		if err := m.LiftNotReadyTaints(ctx); err != nil {
			t.Fatal(err)
		}
		if err := m.StartScheduler(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.host.EnsureNamespace(ctx, appsNS); err != nil {
		t.Fatal(err)
	}
	leases := recordLeases(t, f.host, leafsyncNamespace, shard.LabelRing+"="+shardRing)

	ls := map[string]*harness.Leafsync{}
	var names []string
	for i := range replicas {
		r := fmt.Sprintf("r%d", i)
		names = append(names, r)
		ls[r] = f.startShardReplica(t, r)
	}
	waitLiveShards(t, leases, replicas)

	clusters, leaves := shardClusters(registrations)
	nodes := map[string]*nodeRecorder{}
	for _, l := range leaves {
		nodes[l] = recordNode(t, f.host, l)
	}
	memberOf := map[string]string{}
	for i, c := range clusters {
		memberOf[c] = memberNames[i%len(memberNames)]
		f.registerAs(t, c, memberOf[c])
	}
	start := time.Now()
	for _, l := range leaves {
		f.waitLeafReady(t, l, 3*time.Minute)
	}
	t.Logf("%d leaves Ready %s after registration", len(leaves), time.Since(start).Round(time.Second))

	// (1) One writer per member, each replica acting on some.
	var owners map[string]string
	harness.Eventually(t, 2*time.Minute, "every member held by a live replica, each replica acting", func() (err error) {
		owners, err = memberOwners(leases.latest(t), clusters)
		if err != nil {
			return err
		}
		return eachActs(owners, names)
	})
	harness.Eventually(t, time.Minute, "leafsync_shard_members adds up to the registrations", func() error {
		return shardMetricsAgree(t, ls, leases, clusters)
	})
	t.Logf("owners: %v", byReplica(owners))

	// A Deployment with two pods on every leaf, every member pod watched.
	podLeaf, memberPods := f.webOnEveryLeaf(t, leaves, memberNames)
	podsSince := time.Now()

	// (3) Pause the replica that holds most members for 60s.
	paused := busiest(owners)
	lost := byReplica(owners)[paused]
	oldIncarnation := shardHolder(leases.latest(t), paused)
	// It has records to write when it resumes: a failure streak in
	// progress on one of its members (its member API server cut until
	// just after the pause), whose checkpoints the fence must refuse.
	flapped := lost[0]
	records := func() string {
		cm, err := f.host.Client().CoreV1().ConfigMaps(leafsyncNamespace).Get(ctx, kubestore.DefaultPrefix+flapped, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		return cm.ResourceVersion
	}
	before := records()
	proxy := f.members[memberOf[flapped]].proxy
	proxy.Cut()
	harness.Eventually(t, 30*time.Second, "the failure streak of "+flapped+" in its records", func() error {
		if records() == before {
			return errNotYet
		}
		return nil
	})
	t.Logf("pausing %s (incarnation %s), which holds %v, %s failing", paused, oldIncarnation, lost, flapped)
	if err := ls[paused].Pause(); err != nil {
		t.Fatal(err)
	}
	pausedAt := time.Now()
	time.Sleep(2 * time.Second)
	if err := proxy.Heal(); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 2*time.Minute, "the paused replica's members held by the others", func() error {
		o, err := memberOwners(leases.latest(t), clusters)
		if err != nil {
			return err
		}
		for _, c := range lost {
			if o[c] == paused {
				return fmt.Errorf("%s still held by %s", c, paused)
			}
		}
		return nil
	})
	lossAt := map[string]time.Time{}
	for _, c := range lost {
		h := holderChanges(leases.all(t), c)
		for _, ch := range h {
			if ch.at.After(pausedAt) && shard.ReplicaOf(ch.incarnation) != paused {
				lossAt[c] = ch.at
				break
			}
		}
		took := lossAt[c].Sub(pausedAt)
		t.Logf("%s held by %s %s after the pause", c, shard.ReplicaOf(holderAt(h, lossAt[c])), took.Round(100*time.Millisecond))
		if took > leafLeaseDuration {
			t.Errorf("%s taken %s after its replica was paused, beyond the leaf Lease's %s", c, took.Round(100*time.Millisecond), leafLeaseDuration)
		}
	}
	time.Sleep(time.Until(pausedAt.Add(60 * time.Second)))
	if err := ls[paused].Resume(); err != nil {
		t.Fatal(err)
	}
	resumedAt := time.Now()
	t.Logf("resumed %s after %s", paused, resumedAt.Sub(pausedAt).Round(time.Second))
	harness.Eventually(t, time.Minute, "the resumed replica holds its shard Lease as a new incarnation", func() error {
		if h := shardHolder(leases.latest(t), paused); h == "" || h == oldIncarnation {
			return fmt.Errorf("shard Lease of %s held by %q", paused, h)
		}
		return nil
	})
	t.Logf("%s is back as %s", paused, shardHolder(leases.latest(t), paused))
	harness.Eventually(t, 2*time.Minute, "the resumed replica acts on members again (rebalance)", func() (err error) {
		if owners, err = memberOwners(leases.latest(t), clusters); err != nil {
			return err
		}
		return eachActs(owners, names)
	})
	harness.Eventually(t, 2*time.Minute, "the rebalance done: each replica acts on what it is assigned", func() error {
		return rebalanced(t, ls, replicas)
	})
	owners, err := memberOwners(leases.latest(t), clusters)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("owners after the rebalance (%s after the resume): %v", time.Since(resumedAt).Round(time.Second), byReplica(owners))
	harness.Eventually(t, time.Minute, "leafsync_shard_members adds up to the registrations after the rebalance", func() error {
		return shardMetricsAgree(t, ls, leases, clusters)
	})
	// (4) leafsync status names each member's owner.
	harness.Eventually(t, time.Minute, "leafsync status shows the member Leases' holders", func() error {
		return statusOwners(t, f, leases, clusters)
	})

	// The paused replica's members were failovers, the resumed one's
	// takes rebalances (leafsync_shard_handovers_total by reason).
	handovers := map[string]float64{}
	for r, l := range ls {
		m := scrape(t, l)
		for _, reason := range []string{"new", "rebalance", "failover"} {
			v := metricValue(m, "leafsync_shard_handovers_total", "reason", reason)
			handovers[reason] += v
			t.Logf("%s: %v %s handovers", r, v, reason)
		}
	}
	if handovers["failover"] < float64(len(lost)) {
		t.Errorf("%v failover handovers counted, %d members taken from the paused replica", handovers["failover"], len(lost))
	}
	if handovers["rebalance"] == 0 {
		t.Error("no rebalance handover counted, although the resumed replica took members from live ones")
	}

	// (5) SIGTERM another replica: it drains, and the others take each of
	// its members before it exits (make before break; the leaf Lease
	// gaps are checked below with those after the resume).
	drained := busiest(withoutReplica(owners, paused))
	handed := byReplica(owners)[drained]
	drainAt := time.Now()
	if err := ls[drained].Terminate(time.Minute); err != nil {
		t.Errorf("%s did not stop cleanly on SIGTERM: %v", drained, err)
	}
	exitAt := time.Now()
	t.Logf("%s drained %v and stopped %s after SIGTERM", drained, handed, exitAt.Sub(drainAt).Round(100*time.Millisecond))
	delete(ls, drained)
	harness.Eventually(t, 10*time.Second, "the drained replica's members held by the others", func() error {
		o, err := memberOwners(leases.latest(t), clusters)
		if err != nil {
			return err
		}
		owners = o
		return nil
	})
	for _, c := range handed {
		h := holderChanges(leases.all(t), c)
		if back := retakenAt(h, owners[c], drainAt); back.After(exitAt) {
			t.Errorf("%s taken by %s at %s, after %s exited at %s: break before make", c, owners[c], back.Format(time.StampMilli), drained, exitAt.Format(time.StampMilli))
		}
	}

	// Let the last writes reach the audit logs, and KCM look at every leaf.
	time.Sleep(10 * time.Second)
	end := time.Now()

	// No leaf ever left Ready once it was Ready.
	for _, l := range leaves {
		if o, left := nodes[l].leftReady(t); left {
			t.Errorf("leaf %s Ready=%q at %s (paused %s, resumed %s)", l, o.ready, o.at.Format(time.StampMilli),
				pausedAt.Format(time.StampMilli), resumedAt.Format(time.StampMilli))
		}
	}
	// No member pod deleted, nor any host pod.
	noMemberPodDeleted(t, memberPods)
	for _, e := range hostPodDeletes(t, f, podsSince) {
		t.Errorf("host pod %s deleted by %s (%s) at %s", e.ObjectRef.Name, e.User.Username, e.UserAgent, e.RequestReceived.Format(time.StampMilli))
	}

	// (2) and the fence, over every write in the audit logs.
	writes := replicaWrites(t, f, memberNames, podLeaf, start, end)
	all := leases.all(t)
	for _, c := range clusters {
		h := holderChanges(all, c)
		ws := writes[c]
		if len(ws) == 0 {
			t.Errorf("no write of leafsync's for %s in the audit logs", c)
			continue
		}
		if err := writersFollowHolders(ws, h); err != nil {
			t.Errorf("%s: %v", c, err)
		}
		if c == flapped {
			// The records moved with the member: its new writer wrote them.
			n := 0
			for _, w := range ws {
				if strings.HasPrefix(w.what, "state ") && w.replica != paused && w.at.After(lossAt[c]) && w.code < 300 {
					n++
				}
			}
			if n == 0 {
				t.Errorf("no write of %s's records by its new writer after the failover", c)
			}
		}
		if at, ok := lossAt[c]; ok {
			back := retakenAt(h, paused, at)
			for _, w := range ws {
				// A write the API server refused (409: a version fenced
				// it) is not a write.
				if w.replica == paused && w.at.After(at) && w.at.Before(back) && w.code < 300 {
					t.Errorf("fence: %s, paused and no longer %s's writer since %s, wrote %s at %s (code %d); resumed %s, took it again %s",
						paused, c, at.Format(time.StampMilli), w.what, w.at.Format(time.StampMilli), w.code,
						resumedAt.Format(time.StampMilli), back.Format(time.StampMilli))
				}
			}
		}
		gap, after := longestGap(ws, "lease", time.Time{}, end), longestGap(ws, "lease", resumedAt, end)
		t.Logf("%s: writers %v, longest gap between leaf Lease renewals %s, %s after the resume", c, writerRuns(ws),
			gap.Round(100*time.Millisecond), after.Round(100*time.Millisecond))
		if gap > leafLeaseDuration {
			t.Errorf("leaf Lease of %s not renewed for %s", c, gap.Round(100*time.Millisecond))
		}
		// Make before break: the rebalance after the resume and the drain
		// leave no gap that KCM with the tests' usual 8s grace would see.
		if after > harness.DefaultTestTimings.NodeMonitorGracePeriod {
			t.Errorf("leaf Lease of %s not renewed for %s after the resume (rebalance, drain)", c, after.Round(100*time.Millisecond))
		}
	}
}

// startShardReplica runs one replica of ring shardRing with its own
// config file (the replica's name is in it), --leader-elect as the chart
// passes it (sharded replicas ignore it: they elect no leader) and the
// kube store.
func (f *fleet) startShardReplica(t *testing.T, replica string) *harness.Leafsync {
	t.Helper()
	return f.startShardReplicaVia(t, replica, f.hostProxy)
}

// startShardReplicaVia is startShardReplica through link to the host.
func (f *fleet) startShardReplicaVia(t *testing.T, replica string, link *harness.FaultProxy) *harness.Leafsync {
	t.Helper()
	return f.startShardReplicaWith(t, replica, link, testConfig)
}

// startShardReplicaWith is startShardReplicaVia with base in place of
// testConfig.
func (f *fleet) startShardReplicaWith(t *testing.T, replica string, link *harness.FaultProxy, base string) *harness.Leafsync {
	t.Helper()
	cfg := filepath.Join(harness.LogDir(t), "leafsync-config-"+replica+".yaml")
	text := base + fmt.Sprintf(`store:
  backend: kube
sharding:
  enabled: true
  replica: %s
  ring: %s
  leaseDuration: %s
  renewInterval: 2s
`, replica, shardRing, shardLeaseDuration)
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return harness.StartLeafsync(t, "leafsync-"+replica, f.host.KubeconfigVia(link.Addr()),
		"--namespace="+leafsyncNamespace, "--config="+cfg, "--leader-elect")
}

// registerAs registers member cluster (a started member) under another
// cluster name: several registrations of one member API server, each its
// own leaf, as bench-scale does. The namespace of the test workloads is
// listed as allowed: the registration that creates it there first makes
// it, for the others, a namespace leafsync did not create.
func (f *fleet) registerAs(t *testing.T, cluster, member string) {
	t.Helper()
	m := f.members[member]
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: "member-" + cluster, Namespace: leafsyncNamespace,
			Labels:      map[string]string{"leafsync.io/cluster": cluster},
			Annotations: map[string]string{registration.AnnotationMemberNamespaces: appsNS},
		},
		Data: map[string][]byte{"kubeconfig": m.KubeconfigVia(m.proxy.Addr())},
	}
	if _, err := f.host.Client().CoreV1().Secrets(leafsyncNamespace).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// webOnEveryLeaf creates a Deployment "web" with two pods on every leaf
// (spread by hostname) and waits until they run and each has its member
// pod. It returns the leaf of each host pod, by name, and a recorder of
// the leafsync pods of each member, by member.
func (f *fleet) webOnEveryLeaf(t *testing.T, leaves, members []string) (map[string]string, map[string]*podRecorder) {
	t.Helper()
	web := leafWorkload("web", int32(2*len(leaves)), leaves...).Deployment()
	web.Spec.Template.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: web.Spec.Selector,
	}}
	if _, err := f.host.Client().AppsV1().Deployments(appsNS).Create(context.Background(), web, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	hostPods := waitHostPodsReady(t, f, "app=web", 2*len(leaves), 3*time.Minute, leaves...)
	podLeaf := map[string]string{}
	perLeaf := map[string]int{}
	for _, p := range hostPods {
		podLeaf[p.Name] = p.Spec.NodeName
		perLeaf[p.Spec.NodeName]++
	}
	t.Logf("web pods per leaf: %v", perLeaf)
	memberPods := map[string]*podRecorder{}
	for _, m := range members {
		memberPods[m] = recordPods(t, f.members[m].Cluster, managedPodSelector)
	}
	harness.Eventually(t, time.Minute, "a member pod for each host pod", func() error {
		n := 0
		for _, m := range members {
			n += len(listPods(t, f.members[m].Cluster, managedPodSelector))
		}
		if n != len(hostPods) {
			return fmt.Errorf("%d member pods, %d host pods", n, len(hostPods))
		}
		return nil
	})
	return podLeaf, memberPods
}

// noMemberPodDeleted: no version of a member pod the recorders saw was a
// deletion or carried a deletion timestamp.
func noMemberPodDeleted(t *testing.T, memberPods map[string]*podRecorder) {
	t.Helper()
	for m, r := range memberPods {
		for _, e := range r.events(t) {
			if e.typ == watch.Deleted || e.pod.DeletionTimestamp != nil {
				t.Errorf("member pod %s/%s in %s deleted (%s at %s)", e.pod.Namespace, e.pod.Name, m, e.typ, e.at.Format(time.StampMilli))
			}
		}
	}
}

// leaseVersion is one version of a Lease seen on a watch.
type leaseVersion struct {
	at    time.Time
	lease *coordinationv1.Lease
}

// leaseRecorder keeps every version of the Leases matching a selector, so
// that the holder history of a member is known version by version.
type leaseRecorder struct {
	mu     sync.Mutex
	seen   []leaseVersion
	errs   []error
	cancel context.CancelFunc
	done   chan struct{}
}

func recordLeases(t *testing.T, c *harness.Cluster, namespace, selector string) *leaseRecorder {
	t.Helper()
	cfg := c.RESTConfig()
	cfg.Timeout = 0
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	r := &leaseRecorder{cancel: cancel, done: make(chan struct{})}
	list, err := cs.CoordinationV1().Leases(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		r.add(&list.Items[i])
	}
	go func() {
		defer close(r.done)
		watchFrom(ctx, list.ResourceVersion, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return cs.CoordinationV1().Leases(namespace).Watch(ctx, o)
		}, func(ev watch.Event) {
			if l, ok := ev.Object.(*coordinationv1.Lease); ok && ev.Type != watch.Deleted {
				r.add(l)
			}
		}, func(err error) {
			r.mu.Lock()
			r.errs = append(r.errs, err)
			r.mu.Unlock()
		})
	}()
	t.Cleanup(func() { r.cancel(); <-r.done })
	return r
}

func (r *leaseRecorder) add(l *coordinationv1.Lease) {
	r.mu.Lock()
	r.seen = append(r.seen, leaseVersion{at: time.Now(), lease: l.DeepCopy()})
	r.mu.Unlock()
}

// all returns every version seen so far, in order.
func (r *leaseRecorder) all(t *testing.T) []leaseVersion {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errs) > 0 {
		t.Fatalf("lease watch broke: %v", r.errs)
	}
	return append([]leaseVersion(nil), r.seen...)
}

// latest returns the last version of each Lease, by name.
func (r *leaseRecorder) latest(t *testing.T) map[string]*coordinationv1.Lease {
	t.Helper()
	out := map[string]*coordinationv1.Lease{}
	for _, v := range r.all(t) {
		out[v.lease.Name] = v.lease
	}
	return out
}

func holderOf(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// shardHolder is the incarnation holding replica's shard Lease ("" none).
func shardHolder(latest map[string]*coordinationv1.Lease, replica string) string {
	if l, ok := latest[shard.ShardLeaseName(replica)]; ok {
		return holderOf(l)
	}
	return ""
}

// liveShards are the incarnations holding a shard Lease, not draining.
func liveShards(latest map[string]*coordinationv1.Lease) map[string]bool {
	out := map[string]bool{}
	for _, l := range latest {
		if l.Labels[shard.LabelLeaseKind] == "replica" && holderOf(l) != "" && l.Annotations[shard.AnnotationDraining] != "true" {
			out[holderOf(l)] = true
		}
	}
	return out
}

// memberOwners returns the replica holding each cluster's member Lease;
// an error when one is not held, or held by an incarnation that holds no
// shard Lease now.
func memberOwners(latest map[string]*coordinationv1.Lease, clusters []string) (map[string]string, error) {
	live := liveShards(latest)
	out := map[string]string{}
	for _, c := range clusters {
		l, ok := latest[shard.MemberLeaseName(c)]
		if !ok {
			return nil, fmt.Errorf("no member Lease %s", shard.MemberLeaseName(c))
		}
		if l.Annotations[shard.AnnotationCluster] != c || l.Labels[shard.LabelLeaseKind] != "member" {
			return nil, fmt.Errorf("member Lease %s: labels %v annotations %v", l.Name, l.Labels, l.Annotations)
		}
		h := holderOf(l)
		if h == "" || !live[h] {
			return nil, fmt.Errorf("member Lease of %s held by %q, live incarnations %v", c, h, live)
		}
		out[c] = shard.ReplicaOf(h)
	}
	return out, nil
}

// byReplica inverts owners: the sorted clusters of each replica.
func byReplica(owners map[string]string) map[string][]string {
	out := map[string][]string{}
	for c, r := range owners {
		out[r] = append(out[r], c)
	}
	for _, cs := range out {
		sort.Strings(cs)
	}
	return out
}

// eachActs: every replica holds at least one member.
func eachActs(owners map[string]string, replicas []string) error {
	by := byReplica(owners)
	for _, r := range replicas {
		if len(by[r]) == 0 {
			return fmt.Errorf("replica %s holds no member: %v", r, by)
		}
	}
	return nil
}

// withoutReplica is owners without the members of replica r.
func withoutReplica(owners map[string]string, r string) map[string]string {
	out := map[string]string{}
	for c, o := range owners {
		if o != r {
			out[c] = o
		}
	}
	return out
}

// busiest is the replica holding most members (the first by name on a tie).
func busiest(owners map[string]string) string {
	by := byReplica(owners)
	var best string
	for r, cs := range by {
		if best == "" || len(cs) > len(by[best]) || (len(cs) == len(by[best]) && r < best) {
			best = r
		}
	}
	return best
}

// shardMetricsAgree: each replica's leafsync_shard_members is the number
// of member Leases it holds, and they add up to the registrations.
func shardMetricsAgree(t *testing.T, ls map[string]*harness.Leafsync, leases *leaseRecorder, clusters []string) error {
	owners, err := memberOwners(leases.latest(t), clusters)
	if err != nil {
		return err
	}
	by := byReplica(owners)
	sum := 0
	for r, l := range ls {
		v, ok := scrape(t, l).get("leafsync_shard_members", "replica", r)
		if !ok {
			return fmt.Errorf("%s exports no leafsync_shard_members{replica=%q}", r, r)
		}
		if int(v) != len(by[r]) {
			return fmt.Errorf("%s: leafsync_shard_members %v, member Leases held %d", r, v, len(by[r]))
		}
		sum += int(v)
	}
	if sum != len(clusters) {
		return fmt.Errorf("leafsync_shard_members adds up to %d, want %d", sum, len(clusters))
	}
	return nil
}

// rebalanced: every replica sees all of them live and acts on exactly
// the members it is assigned (leafsync_shard_assigned_members).
func rebalanced(t *testing.T, ls map[string]*harness.Leafsync, replicas int) error {
	for r, l := range ls {
		m := scrape(t, l)
		live := metricValue(m, "leafsync_shard_live_replicas")
		acting, assigned := metricValue(m, "leafsync_shard_members", "replica", r), metricValue(m, "leafsync_shard_assigned_members", "replica", r)
		if int(live) != replicas || acting != assigned {
			return fmt.Errorf("%s: %v live replicas, acting on %v members, assigned %v", r, live, acting, assigned)
		}
	}
	return nil
}

// holderChange is a member Lease version whose holder differs from the
// version before.
type holderChange struct {
	at          time.Time // the take's acquireTime (the taker's clock: this machine's)
	incarnation string
}

// holderChanges is the holder history of cluster's member Lease.
func holderChanges(all []leaseVersion, cluster string) []holderChange {
	var out []holderChange
	for _, v := range all {
		if v.lease.Name != shard.MemberLeaseName(cluster) {
			continue
		}
		h := holderOf(v.lease)
		if len(out) > 0 && out[len(out)-1].incarnation == h {
			continue
		}
		at := v.at
		if a := v.lease.Spec.AcquireTime; a != nil && a.Time.Before(at) {
			at = a.Time
		}
		out = append(out, holderChange{at: at, incarnation: h})
	}
	return out
}

// holderAt is the incarnation holding the member at time at.
func holderAt(h []holderChange, at time.Time) string {
	cur := ""
	for _, ch := range h {
		if ch.at.After(at) {
			break
		}
		cur = ch.incarnation
	}
	return cur
}

// retakenAt is when replica held the member again after since (far in
// the future if it did not).
func retakenAt(h []holderChange, replica string, since time.Time) time.Time {
	for _, ch := range h {
		if ch.at.After(since) && shard.ReplicaOf(ch.incarnation) == replica {
			return ch.at
		}
	}
	return time.Now().Add(24 * time.Hour)
}

// memberWrite is one write of a leafsync replica for a member, from an
// audit log.
type memberWrite struct {
	at      time.Time
	replica string
	what    string // "lease", "node", "host pod <name>", "state <ConfigMap>", "member pod <name>"
	code    int
}

var (
	replicaInAgent = regexp.MustCompile(`\(replica ([^)]+)\)`)
	clusterInAgent = regexp.MustCompile(`\(cluster ([^)]+)\)`)
)

// replicaWrites returns, by cluster, leafsync's writes between from and
// to: to the leaf's Lease, its Node (and status), the host pods on it
// (podLeaf: host pod name → leaf), its state ConfigMaps (when the host's
// audit policy records them) and the member's pods. A leafsync write
// whose user agent names no replica fails the test: the writers could
// not be told apart.
func replicaWrites(t *testing.T, f *fleet, members []string, podLeaf map[string]string, from, to time.Time) map[string][]memberWrite {
	t.Helper()
	out := map[string][]memberWrite{}
	inWindow := func(e harness.AuditEvent) bool {
		return strings.HasPrefix(e.UserAgent, "leafsync/") && !e.RequestReceived.Before(from) && !e.RequestReceived.After(to)
	}
	unnamed := map[string]bool{}
	defer func() {
		for ua := range unnamed {
			t.Errorf("writes of leafsync's name no replica or no cluster: user agent %q", ua)
		}
	}()
	replica := func(e harness.AuditEvent) string {
		m := replicaInAgent.FindStringSubmatch(e.UserAgent)
		if m == nil {
			unnamed[e.UserAgent] = true
			return ""
		}
		return m[1]
	}
	hostEvents, err := f.host.AuditEvents(inWindow)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range hostEvents {
		var leaf, what string
		switch {
		case e.ObjectRef.Resource == "leases" && e.ObjectRef.Namespace == corev1.NamespaceNodeLease:
			leaf, what = e.ObjectRef.Name, "lease"
		case e.ObjectRef.Resource == "nodes":
			leaf, what = e.ObjectRef.Name, "node"
		case e.ObjectRef.Resource == "pods" && podLeaf[e.ObjectRef.Name] != "":
			leaf, what = podLeaf[e.ObjectRef.Name], "host pod "+e.ObjectRef.Name
		case e.ObjectRef.Resource == "configmaps" && strings.HasPrefix(e.ObjectRef.Name, kubestore.DefaultPrefix):
			// leafsync-state-<cluster>[.ledger-<i>]: the member's records.
			c, _, _ := strings.Cut(strings.TrimPrefix(e.ObjectRef.Name, kubestore.DefaultPrefix), ".")
			leaf, what = "leaf-"+c, "state "+e.ObjectRef.Name
		default:
			continue
		}
		c, ok := strings.CutPrefix(leaf, "leaf-")
		if !ok {
			continue
		}
		out[c] = append(out[c], memberWrite{at: e.RequestReceived, replica: replica(e), what: what, code: e.ResponseStatus.Code})
	}
	for _, m := range members {
		evs, err := f.members[m].AuditEvents(func(e harness.AuditEvent) bool {
			return inWindow(e) && e.ObjectRef.Resource == "pods"
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			cm := clusterInAgent.FindStringSubmatch(e.UserAgent)
			if cm == nil {
				unnamed[e.UserAgent] = true
				continue
			}
			out[cm[1]] = append(out[cm[1]], memberWrite{at: e.RequestReceived, replica: replica(e), what: "member pod " + e.ObjectRef.Name, code: e.ResponseStatus.Code})
		}
	}
	for _, ws := range out {
		sort.SliceStable(ws, func(i, j int) bool { return ws[i].at.Before(ws[j].at) })
	}
	return out
}

// writerRuns is the sequence of replicas writing, consecutive writes of
// one replica counted once.
func writerRuns(ws []memberWrite) []string {
	var runs []string
	for _, w := range ws {
		if w.code >= 300 {
			continue // refused by the API server (409: fenced by version): not a write
		}
		if len(runs) == 0 || runs[len(runs)-1] != w.replica {
			runs = append(runs, w.replica)
		}
	}
	return runs
}

// writersFollowHolders: the writers of a member, in order, are a
// subsequence of its holders: the writer changes only where the member
// Lease's holder changed, and at most once per change — no two replicas
// writing one member in any window.
func writersFollowHolders(ws []memberWrite, h []holderChange) error {
	var holders []string
	for _, ch := range h {
		if r := shard.ReplicaOf(ch.incarnation); ch.incarnation != "" && (len(holders) == 0 || holders[len(holders)-1] != r) {
			holders = append(holders, r)
		}
	}
	runs := writerRuns(ws)
	i := 0
	for _, r := range runs {
		for i < len(holders) && holders[i] != r {
			i++
		}
		if i == len(holders) {
			return fmt.Errorf("writers %v do not follow the member Lease's holders %v (%s)", runs, holders, describeRuns(ws))
		}
	}
	return nil
}

// describeRuns says when each run of writes of one replica began and
// ended, for a failure message.
func describeRuns(ws []memberWrite) string {
	var parts []string
	for i := 0; i < len(ws); {
		j := i
		for j+1 < len(ws) && ws[j+1].replica == ws[i].replica {
			j++
		}
		parts = append(parts, fmt.Sprintf("%s %s–%s (%d writes)", ws[i].replica, ws[i].at.Format(time.StampMilli), ws[j].at.Format(time.StampMilli), j-i+1))
		i = j + 1
	}
	return strings.Join(parts, ", ")
}

// longestGap is the longest time without a successful write of kind what,
// from time from (zero: from the first such write) to time to.
func longestGap(ws []memberWrite, what string, from, to time.Time) time.Duration {
	last := from
	var gap time.Duration
	for _, w := range ws {
		if w.what != what || w.code >= 300 || w.at.Before(from) {
			continue
		}
		if !last.IsZero() && w.at.Sub(last) > gap {
			gap = w.at.Sub(last)
		}
		last = w.at
	}
	if !last.IsZero() && to.Sub(last) > gap {
		gap = to.Sub(last)
	}
	return gap
}

// statusOwners: `leafsync status -o json` shows, for each cluster, the
// replica holding its member Lease.
func statusOwners(t *testing.T, f *fleet, leases *leaseRecorder, clusters []string) error {
	kc := filepath.Join(harness.LogDir(t), "host.kubeconfig")
	if err := os.WriteFile(kc, f.host.Kubeconfig(), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(harness.LeafsyncBinary(t), "status", "--kubeconfig", kc, "-n", leafsyncNamespace, "-o", "json").Output()
	if err != nil {
		return fmt.Errorf("leafsync status: %v: %s", err, out)
	}
	var rows []struct{ Cluster, Owner string }
	if err := json.Unmarshal(out, &rows); err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	owners, err := memberOwners(leases.latest(t), clusters)
	if err != nil {
		return err
	}
	if len(rows) != len(clusters) {
		return fmt.Errorf("%d rows, want %d: %s", len(rows), len(clusters), out)
	}
	for _, r := range rows {
		if r.Owner == "" || r.Owner != owners[r.Cluster] {
			return fmt.Errorf("status shows %s owned by %q, its member Lease is held by %q", r.Cluster, r.Owner, owners[r.Cluster])
		}
	}
	return nil
}

// TestWritersFollowHolders: the check of TestSharding's audit analysis
// fails where two replicas interleave, or one writes that never held.
func TestWritersFollowHolders(t *testing.T) {
	at := func(s int) time.Time { return time.Unix(int64(s), 0) }
	writes := func(replicas ...string) []memberWrite {
		var ws []memberWrite
		for i, r := range replicas {
			ws = append(ws, memberWrite{at: at(i), replica: r, what: "lease", code: 200})
		}
		return ws
	}
	holders := []holderChange{{at(0), "r0-0000aaaa"}, {at(5), ""}, {at(6), "r1-0000bbbb"}, {at(9), "r0-0000cccc"}}
	for _, c := range []struct {
		writers []string
		ok      bool
	}{
		{[]string{"r0", "r0", "r1", "r1", "r0"}, true},
		{[]string{"r1"}, true},
		{[]string{"r0", "r1", "r0", "r1"}, false}, // interleaved across one handover
		{[]string{"r0", "r2"}, false},             // r2 never held the member
		{nil, true},
	} {
		if err := writersFollowHolders(writes(c.writers...), holders); (err == nil) != c.ok {
			t.Errorf("writers %v: err %v, want ok=%v", c.writers, err, c.ok)
		}
	}
	// A write the API server refused (a former writer's, fenced by the
	// version: 409) is not a write; the same write accepted is.
	refused := writes("r0", "r1", "r0", "r1")
	refused[2].code = 409
	if err := writersFollowHolders(refused, holders); err != nil {
		t.Errorf("a refused write counted as a write: %v", err)
	}
	refused[2].code = 200
	if err := writersFollowHolders(refused, holders); err == nil {
		t.Error("an accepted write of a former writer after the handover passed")
	}
	if g := longestGap(writes("r0", "r0", "r1"), "lease", time.Time{}, at(10)); g != 8*time.Second {
		t.Errorf("longest gap %s, want 8s", g)
	}
	if g := longestGap(writes("r0", "r0", "r1", "r1"), "lease", at(1).Add(-500*time.Millisecond), at(4)); g != time.Second {
		t.Errorf("longest gap from 0.5s %s, want 1s", g)
	}
}

// waitLiveShards waits until n shard Leases are held.
func waitLiveShards(t *testing.T, leases *leaseRecorder, n int) {
	t.Helper()
	harness.Eventually(t, time.Minute, fmt.Sprintf("%d live shard Leases", n), func() error {
		if live := liveShards(leases.latest(t)); len(live) != n {
			return fmt.Errorf("shard Leases held: %v", live)
		}
		return nil
	})
}

// shardClusters names n registrations (shard-00…) and their leaves.
func shardClusters(n int) (clusters, leaves []string) {
	for i := range n {
		c := fmt.Sprintf("shard-%02d", i)
		clusters = append(clusters, c)
		leaves = append(leaves, "leaf-"+c)
	}
	return clusters, leaves
}
