//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leafsync/leafsync/internal/syncer/shard"
	"github.com/leafsync/leafsync/test/harness"
)

// TestShardLapseKeepsMembersWarm (#33): one of three sharded replicas sees
// its own shard Lease lapse while the others still see it renewed (a
// saturated host: the renewals land, the answers come too late). Its host
// link delays every answer past the renewal's timeout, and the test
// renews the replica's shard Lease in its name meanwhile (the renewals
// that landed). Nobody takes its members; once its link is healed it is
// held again as a new incarnation and takes each of its members back from
// the former one, term +1, with the runtime it kept: no new runtime (its
// log), no other holder in between, no leaf leaves Ready.
func TestShardLapseKeepsMembersWarm(t *testing.T) {
	const registrations = 6
	memberNames := []string{"member-a", "member-b"}
	var opts []harness.MemberOptions
	for _, m := range memberNames {
		opts = append(opts, harness.MemberOptions{Name: m, Nodes: 2})
	}
	f := newFleet(t, harness.HostOptions{Timings: shardTimings}, opts...)
	ctx := context.Background()
	for _, m := range f.members {
		if err := m.LiftNotReadyTaints(ctx); err != nil {
			t.Fatal(err)
		}
	}
	leases := recordLeases(t, f.host, leafsyncNamespace, shard.LabelRing+"="+shardRing)
	const slow = "r0"
	link := harness.NewFaultProxy(t, "host-link-"+slow, f.host.Addr())
	ls := map[string]*harness.Leafsync{slow: f.startShardReplicaVia(t, slow, link)}
	for _, r := range []string{"r1", "r2"} {
		ls[r] = f.startShardReplica(t, r)
	}
	names := []string{"r0", "r1", "r2"}
	waitLiveShards(t, leases, len(names))
	clusters, leaves := shardClusters(registrations)
	for i, c := range clusters {
		f.registerAs(t, c, memberNames[i%len(memberNames)])
	}
	nodes := map[string]*nodeRecorder{}
	for _, l := range leaves {
		nodes[l] = recordNode(t, f.host, l)
	}
	for _, l := range leaves {
		f.waitLeafReady(t, l, 3*time.Minute)
	}
	var owners map[string]string
	harness.Eventually(t, 2*time.Minute, "every member held by a live replica, each replica acting", func() (err error) {
		if owners, err = memberOwners(leases.latest(t), clusters); err != nil {
			return err
		}
		return eachActs(owners, names)
	})
	kept := byReplica(owners)[slow]
	oldInc := shardHolder(leases.latest(t), slow)
	terms := map[string]int32{}
	for _, c := range kept {
		terms[c] = *leases.latest(t)[shard.MemberLeaseName(c)].Spec.LeaseTransitions
	}
	t.Logf("%s (incarnation %s) holds %v", slow, oldInc, kept)

	// Answers later than the shard Lease's duration (15s), which bounds a
	// renewal; the renewals that land are the test's, in the replica's
	// name.
	mark := len(readLog(t, ls[slow]))
	if err := link.Latency(20*time.Second, 0); err != nil {
		t.Fatal(err)
	}
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		leasesAPI := f.host.Client().CoordinationV1().Leases(leafsyncNamespace)
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
			l, err := leasesAPI.Get(ctx, shard.ShardLeaseName(slow), metav1.GetOptions{})
			if err != nil || holderOf(l) != oldInc {
				continue
			}
			l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
			_, _ = leasesAPI.Update(ctx, l, metav1.UpdateOptions{})
		}
	}()
	const lapseLine = "shard Lease not renewed within its duration"
	harness.Eventually(t, time.Minute, slow+" sees its shard Lease lapse", func() error {
		if !strings.Contains(readLog(t, ls[slow]), lapseLine) {
			return errNotYet
		}
		return nil
	})
	time.Sleep(3 * time.Second) // lapsed a while, the others seeing it renewed
	close(stop)
	<-stopped
	if err := link.Heal(); err != nil {
		t.Fatal(err)
	}
	healedAt := time.Now()
	var newInc string
	harness.Eventually(t, time.Minute, slow+" back as a new incarnation, holding its members again", func() error {
		latest := leases.latest(t)
		newInc = shardHolder(latest, slow)
		if newInc == "" || newInc == oldInc {
			return fmt.Errorf("shard Lease of %s held by %q", slow, newInc)
		}
		for _, c := range kept {
			if h := holderOf(latest[shard.MemberLeaseName(c)]); h != newInc {
				return fmt.Errorf("%s held by %q", c, h)
			}
		}
		return nil
	})
	t.Logf("%s held again as %s, its members taken back %s after the heal", slow, newInc, time.Since(healedAt).Round(100*time.Millisecond))

	all := leases.all(t)
	for _, c := range kept {
		var hs []string
		for _, h := range holderChanges(all, c) {
			hs = append(hs, h.incarnation)
		}
		if n := len(hs); n < 2 || hs[n-2] != oldInc || hs[n-1] != newInc {
			t.Errorf("%s: holders %v, want it to go from %s straight to %s", c, hs, oldInc, newInc)
		}
		if l := leases.latest(t)[shard.MemberLeaseName(c)]; *l.Spec.LeaseTransitions != terms[c]+1 {
			t.Errorf("%s: term %d after the take back, want %d", c, *l.Spec.LeaseTransitions, terms[c]+1)
		}
	}
	// The replica's log since the latency began: each member kept and
	// taken back, none stopped or started again.
	after := readLog(t, ls[slow])[mark:]
	for _, c := range kept {
		of := func(msg string) bool {
			for _, line := range strings.Split(after, "\n") {
				if strings.Contains(line, msg) && strings.Contains(line, `"cluster":"`+c+`"`) {
					return true
				}
			}
			return false
		}
		if !of("keeping its runtime") || !of("member taken back") {
			t.Errorf("%s: not kept and taken back after the lapse (kept %v, taken back %v)", c, of("keeping its runtime"), of("member taken back"))
		}
		if of("taking it once its caches synced") || of("member runtime stopped") {
			t.Errorf("%s: its runtime was stopped or a new one started after the lapse", c)
		}
	}
	// No leaf left Ready.
	time.Sleep(5 * time.Second)
	for _, l := range leaves {
		if o, left := nodes[l].leftReady(t); left {
			t.Errorf("leaf %s Ready=%q at %s", l, o.ready, o.at.Format(time.StampMilli))
		}
	}
}

// readLog is a leafsync process's log so far.
func readLog(t *testing.T, l *harness.Leafsync) string {
	t.Helper()
	b, err := os.ReadFile(l.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
