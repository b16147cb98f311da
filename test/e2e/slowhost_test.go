//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/leafsync/leafsync/internal/leafnode"
	"github.com/leafsync/leafsync/internal/syncer/shard"
	"github.com/leafsync/leafsync/test/harness"
)

// TestSlowHostKeepsLeasesRenewed (#33): a host that answers leafsync 6s
// late, as a saturated API server did in the 600-registration benchmark,
// costs a replica neither its shard Lease nor a leaf its node Lease: the
// writes land, and a renewal waits for its answer as long as its Lease
// allows (the shard Lease: until it would lapse; a leaf's:
// leaves.leaseRenewTimeout, by default the renewal interval, as a
// kubelet's heartbeat). One sharded replica with the default
// leaseRenewTimeout, its host link delaying every answer by 6s for 45s:
// its shard Lease keeps its incarnation and never lapses, each leaf's
// Lease is renewed at least every 20s, no leaf leaves Ready. With the
// former 5s timeouts the shard Lease lapsed, and each leaf's Lease, renewed
// once unanswered, was then only refused (an update at the version before
// that renewal), its answers as late as the rest.
func TestSlowHostKeepsLeasesRenewed(t *testing.T) {
	const member, replica = "member-a", "r0"
	f := newFleet(t, harness.HostOptions{Timings: shardTimings}, harness.MemberOptions{Name: member, Nodes: 2})
	ctx := context.Background()
	if err := f.members[member].LiftNotReadyTaints(ctx); err != nil {
		t.Fatal(err)
	}
	shards := recordLeases(t, f.host, leafsyncNamespace, shard.LabelRing+"="+shardRing)
	leafLeases := recordLeases(t, f.host, corev1.NamespaceNodeLease, leafnode.LabelCluster)
	link := harness.NewFaultProxy(t, "host-link-"+replica, f.host.Addr())
	base := strings.Replace(testConfig, "  leaseRenewTimeout: 8s\n", "", 1)
	if base == testConfig {
		t.Fatal("testConfig no longer sets leaves.leaseRenewTimeout to 8s: this test must leave it at its default")
	}
	ls := f.startShardReplicaWith(t, replica, link, base)
	waitLiveShards(t, shards, 1)
	clusters, leaves := shardClusters(2)
	for _, c := range clusters {
		f.registerAs(t, c, member)
	}
	nodes := map[string]*nodeRecorder{}
	for _, l := range leaves {
		nodes[l] = recordNode(t, f.host, l)
	}
	for _, l := range leaves {
		f.waitLeafReady(t, l, 3*time.Minute)
	}
	harness.Eventually(t, time.Minute, "each leaf's Lease renewed", func() error {
		renewals := map[string]int{}
		for _, v := range leafLeases.all(t) {
			renewals[v.lease.Name]++
		}
		for _, l := range leaves {
			if renewals[l] < 2 {
				return fmt.Errorf("%s: %d versions of its Lease seen", l, renewals[l])
			}
		}
		return nil
	})
	inc := shardHolder(shards.latest(t), replica)
	mark := len(readLog(t, ls))

	const slowFor, latency = 45 * time.Second, 6 * time.Second
	if err := link.Latency(latency, 0); err != nil {
		t.Fatal(err)
	}
	from := time.Now()
	time.Sleep(slowFor)
	if err := link.Heal(); err != nil {
		t.Fatal(err)
	}
	to := time.Now()
	time.Sleep(5 * time.Second)

	if h := shardHolder(shards.latest(t), replica); h != inc {
		t.Errorf("%s's shard Lease held by %q after the slow spell, by %q before: it was lost", replica, h, inc)
	}
	if strings.Contains(readLog(t, ls)[mark:], "shard Lease not renewed within its duration") {
		t.Errorf("%s saw its shard Lease lapse while the host answered %s late", replica, latency)
	}
	// The writes land as they are sent, the answers come 6s later: a
	// renewal that waits for its answer lands one every 6s or so.
	const maxGap = 20 * time.Second
	for _, l := range leaves {
		var seen []time.Time
		for _, v := range leafLeases.all(t) {
			if v.lease.Name == l && v.at.After(from) && v.at.Before(to) {
				seen = append(seen, v.at)
			}
		}
		longest, last := time.Duration(0), from
		for _, at := range append(seen, to) {
			longest, last = max(longest, at.Sub(last)), at
		}
		t.Logf("%s: %d renewals seen in the %s slow spell, longest gap %s", l, len(seen), slowFor, longest.Round(100*time.Millisecond))
		if longest > maxGap {
			t.Errorf("%s: its Lease went %s without a renewal while the host answered %s late (want at most %s)", l, longest.Round(100*time.Millisecond), latency, maxGap)
		}
	}
	for _, l := range leaves {
		if o, left := nodes[l].leftReady(t); left {
			t.Errorf("leaf %s Ready=%q at %s", l, o.ready, o.at.Format(time.StampMilli))
		}
	}
}
