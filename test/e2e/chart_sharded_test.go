//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leafsync/leafsync/internal/syncer/shard"
	"github.com/leafsync/leafsync/test/harness"
)

// TestHelmShardedRollingUpgrade is the rolling upgrade of sharded
// replicas, for real (#33): the chart with replicaCount 3 (sharding on,
// the release as ring) runs leafsync's image on the host's real kubelet
// node; six registrations of two kwok members, a Deployment with pods on
// every leaf. Then `helm upgrade` changes a pod annotation, which rolls
// the Deployment one new replica at a time (maxSurge 1, maxUnavailable
// 0), each old one draining its members to the others on SIGTERM. From
// the leaves' first Ready to after the rollout:
//   - no leaf leaves Ready (every version of every leaf Node watched,
//     KCM's grace period 8s);
//   - no member pod and no host pod is deleted;
//   - every member Lease ends held by a new pod's incarnation, and no new
//     pod took a member by failover (every take was make before break);
//   - each leaf's Lease is written by one replica at a time, following
//     the member Lease's holders (host audit log), and the gap between
//     the old writer's last renewal and the new one's first is below the
//     leaf Lease's duration;
//   - the host's API Priority and Fairness dispatched leafsync's requests
//     on its shard and member Leases at priority level leader-election,
//     and on the leaves' Leases at node-high (the chart's FlowSchemas):
//     at least as many as the versions of the former written, and the
//     writes of the latter in the host audit log.
//
// Reported: the rollout's duration, the handovers, the longest gap.
func TestHelmShardedRollingUpgrade(t *testing.T) {
	const (
		ns            = leafsyncNamespace
		release       = "leafsync"
		replicas      = 3
		registrations = 6
		podSelector   = "app.kubernetes.io/name=leafsync"
	)
	memberNames := []string{"member-a", "member-b"}
	image := imageArchive(t)
	repo, tag := imageRepoTag(t, image)

	network := harness.StartNodeNetwork(t)
	// The host's API server reaches the node's kubelet (the replicas' logs).
	host := harness.StartHost(t, harness.HostOptions{Address: network.Gateway, KubeletClientCert: true})
	f := &fleet{host: host, members: map[string]*memberFixture{}}
	ctx := context.Background()
	for _, m := range memberNames {
		c := harness.StartMember(t, harness.MemberOptions{Name: m, Nodes: 1, Address: network.Gateway, Audit: true})
		if err := c.LiftNotReadyTaints(ctx); err != nil {
			t.Fatal(err)
		}
		if err := c.StartScheduler(); err != nil {
			t.Fatal(err)
		}
		f.members[m] = &memberFixture{Cluster: c, proxy: harness.NewFaultProxy(t, m, c.Addr())}
	}
	node := harness.StartNode(t, host, harness.NodeOptions{Network: network, Images: []string{image}})
	hc := host.Client()
	for _, n := range []string{ns, appsNS} {
		if err := host.EnsureNamespace(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	hostKC, err := host.WriteKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	harness.FollowPodLogs(t, host, ns, podSelector)
	leases := recordLeases(t, host, ns, shard.LabelRing+"="+release)

	// TestHelmInstall's values (the image, the real node, the e2e
	// thresholds), with the chart's default for sharding: more than one
	// replica shares the members.
	text := fmt.Sprintf(installValues, repo, tag, node.Name)
	const unsharded = "sharding: {enabled: false}"
	if !strings.Contains(text, unsharded) {
		t.Fatalf("installValues no longer turn sharding off with %q: this test's values need updating:\n%s", unsharded, text)
	}
	text = strings.Replace(text, unsharded, "sharding: {}", 1) + fmt.Sprintf("replicaCount: %d\n", replicas)
	values := filepath.Join(harness.LogDir(t), "values.yaml")
	if err := os.WriteFile(values, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	t.Log(helm(t, "--kubeconfig", hostKC, "install", release, chartDir, "-n", ns, "-f", values, "--wait", "--timeout", "3m"))
	t.Logf("helm install --wait: %d pods Ready %s after it started", replicas, time.Since(start).Round(100*time.Millisecond))
	before := leafsyncPods(t, hc, ns, replicas)
	for _, p := range before {
		if p.Spec.NodeName != node.Name {
			t.Fatalf("pod %s runs on %q, not on the real node", p.Name, p.Spec.NodeName)
		}
	}
	harness.Eventually(t, time.Minute, "a live shard Lease of each pod", func() error {
		live := liveShards(leases.latest(t))
		for _, p := range before {
			if h := shardHolder(leases.latest(t), p.Name); !live[h] {
				return fmt.Errorf("shard Lease of %s held by %q; live: %v", p.Name, h, live)
			}
		}
		return nil
	})

	var clusters, leaves []string
	registered := time.Now()
	for i := range registrations {
		c := fmt.Sprintf("shard-%02d", i)
		clusters = append(clusters, c)
		leaves = append(leaves, "leaf-"+c)
		f.registerAs(t, c, memberNames[i%len(memberNames)])
	}
	for _, l := range leaves {
		f.waitLeafReady(t, l, 3*time.Minute)
	}
	t.Logf("%d leaves Ready %s after registration", len(leaves), time.Since(registered).Round(time.Second))
	var owners map[string]string
	harness.Eventually(t, 2*time.Minute, "every member Lease held by a live incarnation of a pod", func() (err error) {
		owners, err = memberOwners(leases.latest(t), clusters)
		if err != nil {
			return err
		}
		return ownedBy(owners, before)
	})
	t.Logf("owners before the upgrade: %v", byReplica(owners))
	nodes := map[string]*nodeRecorder{}
	for _, l := range leaves {
		nodes[l] = recordNode(t, host, l)
	}
	watchedFrom := time.Now()

	// Two pods on every leaf, and every member pod watched.
	podLeaf, memberPods := f.webOnEveryLeaf(t, leaves, memberNames)

	// The rolling upgrade: a changed pod annotation rolls every pod.
	upgradeAt := time.Now()
	t.Log(helm(t, "--kubeconfig", hostKC, "upgrade", release, chartDir, "-n", ns, "--reuse-values",
		"--set-string", "podAnnotations.rollout=2", "--wait", "--timeout", "5m"))
	var after []corev1.Pod
	harness.Eventually(t, 3*time.Minute, "the old pods gone, 3 new ones Ready", func() error {
		list, err := hc.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: podSelector})
		if err != nil {
			return err
		}
		after = after[:0]
		for _, p := range list.Items {
			if slices.ContainsFunc(before, func(b corev1.Pod) bool { return b.UID == p.UID }) {
				return fmt.Errorf("pod %s from before the upgrade is still there", p.Name)
			}
			if p.DeletionTimestamp == nil && podReady(&p) {
				after = append(after, p)
			}
		}
		if len(after) != replicas {
			return fmt.Errorf("%d of %d pods Ready", len(after), len(list.Items))
		}
		return nil
	})
	rolled := time.Since(upgradeAt)
	t.Logf("helm upgrade: %d pods replaced in %s", replicas, rolled.Round(100*time.Millisecond))
	harness.Eventually(t, 2*time.Minute, "every member Lease held by a new pod", func() (err error) {
		owners, err = memberOwners(leases.latest(t), clusters)
		if err != nil {
			return err
		}
		return ownedBy(owners, after)
	})
	t.Logf("owners after the upgrade (%s after it started): %v", time.Since(upgradeAt).Round(time.Second), byReplica(owners))
	takes := map[string]float64{}
	for _, p := range after {
		// The chart's metrics port, on the pod's IP (the node's bridge is
		// on this machine).
		m := scrape(t, &harness.Leafsync{Name: p.Name, MetricsAddr: net.JoinHostPort(p.Status.PodIP, "8080")})
		for _, reason := range []string{"new", "rebalance", "failover"} {
			takes[reason] += metricValue(m, "leafsync_shard_handovers_total", "reason", reason)
		}
	}
	t.Logf("takes by the new pods (leafsync_shard_handovers_total): %v", takes)
	if takes["failover"] > 0 || takes["new"] > 0 {
		t.Errorf("the new pods took %v members by failover and %v as new: a member was without a live writer during the rollout", takes["failover"], takes["new"])
	}
	// Leave KCM two grace periods to notice a gap, if there was one, and
	// the last writes to reach the audit logs.
	time.Sleep(2 * harness.DefaultTestTimings.NodeMonitorGracePeriod)
	end := time.Now()

	for _, l := range leaves {
		obs := nodes[l].observations(t)
		for _, o := range obs {
			if o.ready != corev1.ConditionTrue {
				t.Errorf("%s Ready=%q at %s (upgrade from %s)", l, o.ready, o.at.Format(time.StampMilli), upgradeAt.Format(time.StampMilli))
			}
		}
	}
	noMemberPodDeleted(t, memberPods)
	for _, e := range hostPodDeletes(t, f, watchedFrom) {
		t.Errorf("host pod %s deleted by %s (%s) at %s", e.ObjectRef.Name, e.User.Username, e.UserAgent, e.RequestReceived.Format(time.StampMilli))
	}

	// The handovers, from the member Leases and the leaf Leases' writes.
	writes := replicaWrites(t, f, memberNames, podLeaf, watchedFrom, end)
	all := leases.all(t)
	var handovers int
	var maxGap time.Duration
	for _, c := range clusters {
		h := holderChanges(all, c)
		ws := writes[c]
		if err := writersFollowHolders(ws, h); err != nil {
			t.Errorf("%s: %v", c, err)
		}
		hops := 0
		for _, ch := range h {
			if ch.at.After(upgradeAt) {
				hops++
			}
		}
		handovers += hops
		gaps, longest := renewalGaps(ws, end)
		for _, g := range gaps {
			if g > leafLeaseDuration {
				t.Errorf("%s: %s between the old writer's last leaf Lease renewal and the new one's first, beyond the leaf Lease's %s", c, g.Round(100*time.Millisecond), leafLeaseDuration)
			}
			maxGap = max(maxGap, g)
		}
		maxGap = max(maxGap, longest)
		if longest > leafLeaseDuration {
			t.Errorf("leaf Lease of %s not renewed for %s", c, longest.Round(100*time.Millisecond))
		}
		t.Logf("%s: %d handovers during the upgrade, writers %v, renewal gaps at the handovers %v, longest %s",
			c, hops, writerRuns(ws), roundAll(gaps), longest.Round(100*time.Millisecond))
	}
	t.Logf("rolling upgrade of %d replicas: rolled in %s, %d handovers of %d members, longest gap between leaf Lease renewals %s",
		replicas, rolled.Round(100*time.Millisecond), handovers, len(clusters), maxGap.Round(100*time.Millisecond))

	// The Leases' priority in the host, from real traffic: a write the
	// chart's FlowSchemas missed (a verb, a namespace) would run as any
	// ServiceAccount's, workload-low, and leave the count short.
	sa := "system:serviceaccount:" + ns + ":" + release
	leafWrites, err := host.AuditEvents(func(e harness.AuditEvent) bool {
		return e.User.Username == sa && e.ObjectRef.Resource == "leases" && e.ObjectRef.Namespace == corev1.NamespaceNodeLease &&
			e.Verb != "delete" && e.ResponseStatus.Code != http.StatusTooManyRequests // refused by APF: never dispatched
	})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := hc.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	apf, err := parseMetrics(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		schema, level string
		atLeast       int
	}{
		{release + "-leader-election", "leader-election", len(leases.all(t))},
		{release + "-leaf-heartbeats", "node-high", len(leafWrites)},
	} {
		got := metricValue(apf, "apiserver_flowcontrol_dispatched_requests_total", "flow_schema", c.schema, "priority_level", c.level)
		t.Logf("host APF dispatched %v requests of FlowSchema %s at %s (at least %d written)", got, c.schema, c.level, c.atLeast)
		if got < float64(c.atLeast) || got == 0 {
			t.Errorf("host APF dispatched %v requests of FlowSchema %s at priority level %s, fewer than the %d Lease writes it covers", got, c.schema, c.level, c.atLeast)
		}
	}
}

// imageRepoTag splits an image archive's name into the chart's
// image.repository and image.tag.
func imageRepoTag(t *testing.T, archive string) (repo, tag string) {
	t.Helper()
	ref, err := harness.ImageRef(archive)
	if err != nil {
		t.Fatal(err)
	}
	slash := strings.LastIndex(ref, "/")
	name, tag, _ := strings.Cut(ref[slash+1:], ":")
	return ref[:slash+1] + name, tag
}

// ownedBy: every member is held by one of pods.
func ownedBy(owners map[string]string, pods []corev1.Pod) error {
	names := map[string]bool{}
	for _, p := range pods {
		names[p.Name] = true
	}
	for c, r := range owners {
		if !names[r] {
			return fmt.Errorf("%s held by %s, none of the pods %v", c, r, slices.Sorted(maps.Keys(names)))
		}
	}
	return nil
}

// renewalGaps reads a member's successful leaf Lease renewals: at each
// change of writer, the time between the old writer's last renewal and the
// new one's first; and the longest time without a renewal, up to time to.
func renewalGaps(ws []memberWrite, to time.Time) (handovers []time.Duration, longest time.Duration) {
	var last *memberWrite
	for i := range ws {
		w := &ws[i]
		if w.what != "lease" || w.code >= 300 {
			continue
		}
		if last != nil {
			gap := w.at.Sub(last.at)
			if last.replica != w.replica {
				handovers = append(handovers, gap)
			}
			longest = max(longest, gap)
		}
		last = w
	}
	if last != nil {
		longest = max(longest, to.Sub(last.at))
	}
	return handovers, longest
}

// roundAll rounds each duration to 100ms, for the log.
func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(100 * time.Millisecond)
	}
	return out
}
