//go:build e2e

package scalebench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/leafsync/leafsync/internal/syncer/config"
	"github.com/leafsync/leafsync/internal/syncer/shard"
	"github.com/leafsync/leafsync/test/harness"
)

// shardRing is the ring of the sharded replicas (the chart's release name).
const shardRing = "scalebench"

// replicaCount is $REPLICAS: how many leafsync processes share the members
// (default 1, unsharded, as before).
func replicaCount(t *testing.T) int {
	s := os.Getenv("REPLICAS")
	if s == "" {
		return 1
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		t.Fatalf("REPLICAS: %q is not a positive number", s)
	}
	return n
}

// replicaSetup is what the report's Setup says about the replicas.
func replicaSetup(n int) string {
	if n == 1 {
		return "one leafsync replica"
	}
	return fmt.Sprintf("%d leafsync replicas sharing the members (sharding on, ring %s, store kube, --leader-elect as the chart passes it, which sharded replicas ignore)", n, shardRing)
}

// replicas are the leafsync processes a run measures.
type replicas []*harness.Leafsync

// startReplicas starts one leafsync with its default configuration, or,
// for n > 1, n replicas r0…r<n-1> with sharding on.
// With pprof, each serves its profiles at the address returned for it.
func startReplicas(t *testing.T, host *harness.Cluster, n int, pprof bool) (replicas, []string) {
	var addrs []string
	args := func() []string {
		a := []string{"--namespace=" + leafsyncNS, "--log-level=info"}
		if pprof {
			addrs = append(addrs, pprofAddr(t))
			a = append(a, "--pprof-bind-address="+addrs[len(addrs)-1])
		}
		return a
	}
	if n == 1 {
		return replicas{harness.StartLeafsync(t, "leafsync", host.Kubeconfig(), args()...)}, addrs
	}
	var rs replicas
	for i := range n {
		name := fmt.Sprintf("r%d", i)
		cfg := filepath.Join(harness.LogDir(t), "leafsync-config-"+name+".yaml")
		text := fmt.Sprintf("store:\n  backend: kube\nsharding:\n  enabled: true\n  replica: %s\n  ring: %s\n", name, shardRing)
		if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		rs = append(rs, harness.StartLeafsync(t, "leafsync-"+name, host.Kubeconfig(), append(args(), "--config="+cfg, "--leader-elect")...))
	}
	return rs, addrs
}

// name is a replica's shard name (r0…), "" unsharded.
func (rs replicas) name(i int) string {
	if len(rs) == 1 {
		return ""
	}
	return fmt.Sprintf("r%d", i)
}

// exited is an error if any replica exited.
func (rs replicas) exited() error {
	for _, l := range rs {
		if exited, _ := l.Exited(); exited {
			return fmt.Errorf("leafsync %s exited (see %s)", l.Name, l.LogPath())
		}
	}
	return nil
}

// scrape reads each replica's /metrics.
func (rs replicas) scrape(t *testing.T) []metricsSnapshot {
	var out []metricsSnapshot
	for _, l := range rs {
		resp, err := http.Get("http://" + l.MetricsAddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fams)
	}
	return out
}

// mergeMetrics puts the series of several scrapes together, so that sum
// and buckets add over the replicas.
func mergeMetrics(snaps []metricsSnapshot) metricsSnapshot {
	if len(snaps) == 1 {
		return snaps[0]
	}
	out := metricsSnapshot{}
	for _, s := range snaps {
		for name, f := range s {
			m, ok := out[name]
			if !ok {
				m = &dto.MetricFamily{Name: f.Name, Help: f.Help, Type: f.Type}
				out[name] = m
			}
			m.Metric = append(m.Metric, f.Metric...)
		}
	}
	return out
}

// usage is each replica's use of the machine over a window: mean RSS and
// Go heap in use (MiB, sampled every 5s) and CPU (cores).
type usage struct{ rss, heap, cpu []float64 }

func (rs replicas) measure(t *testing.T, d time.Duration) usage {
	u := usage{rss: make([]float64, len(rs)), heap: make([]float64, len(rs)), cpu: make([]float64, len(rs))}
	cpu0 := rs.cpuSeconds(t)
	start := time.Now()
	var n int
	for end := start.Add(d); time.Now().Before(end); n++ {
		for i, m := range rs.scrape(t) {
			u.rss[i] += rssMiB(t, rs[i].Pid())
			u.heap[i] += m.sum("go_memstats_heap_inuse_bytes") / (1 << 20)
		}
		time.Sleep(min(5*time.Second, time.Until(end)))
	}
	took := time.Since(start).Seconds()
	for i, c := range rs.cpuSeconds(t) {
		u.rss[i] /= float64(n)
		u.heap[i] /= float64(n)
		u.cpu[i] = (c - cpu0[i]) / took
	}
	return u
}

func (rs replicas) cpuSeconds(t *testing.T) []float64 {
	var out []float64
	for _, l := range rs {
		out = append(out, cpuSeconds(t, l.Pid()))
	}
	return out
}

func total(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s
}

// memberHolders maps each of the first n registrations to the replica
// whose incarnation holds its member Lease ("" if none).
func memberHolders(ctx context.Context, host *harness.Cluster, n int) (map[string]string, error) {
	sel := labels.Set{shard.LabelRing: shardRing, shard.LabelLeaseKind: "member"}.String()
	list, err := host.Client().CoordinationV1().Leases(leafsyncNS).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, err
	}
	held := map[string]string{}
	for _, l := range list.Items {
		if h := l.Spec.HolderIdentity; h != nil && *h != "" {
			held[l.Annotations[shard.AnnotationCluster]] = shard.ReplicaOf(*h)
		}
	}
	out := map[string]string{}
	for i := range n {
		out[regName(i)] = held[regName(i)]
	}
	return out, nil
}

// splitMembers waits until every registration's member Lease is held by
// the replica the assignment gives it (shard.Assign over the live
// replicas, the default load bound: what every replica computes), and
// returns how many each replica holds.
func (b *bench) splitMembers(ctx context.Context, n int, deadline time.Time) (map[string]int, error) {
	var regs, names []string
	for i := range n {
		regs = append(regs, regName(i))
	}
	for i := range b.ls {
		names = append(names, b.ls.name(i))
	}
	want := shard.Assign(regs, names, config.Default().Sharding.LoadBound)
	for {
		holders, err := memberHolders(ctx, b.host, n)
		if err != nil {
			return nil, err
		}
		count := map[string]int{}
		var wrong []string
		for c, r := range holders {
			count[r]++
			if r != want[c] {
				wrong = append(wrong, fmt.Sprintf("%s held by %q, assigned to %s", c, r, want[c]))
			}
		}
		if len(wrong) == 0 {
			return count, nil
		}
		if time.Now().After(deadline) {
			sort.Strings(wrong)
			return nil, fmt.Errorf("%d of %d members not held by their assigned replica (%s…); held: %v", len(wrong), n, wrong[0], count)
		}
		time.Sleep(time.Second)
	}
}

// leafsyncEvents are the requests of leafsync's replicas to the host
// received in [from, to), from its audit log.
func leafsyncEvents(host *harness.Cluster, from, to time.Time) ([]harness.AuditEvent, error) {
	return host.AuditEvents(func(e harness.AuditEvent) bool {
		return strings.HasPrefix(e.UserAgent, "leafsync") && !e.RequestReceived.Before(from) && e.RequestReceived.Before(to)
	})
}

// replicaWrites counts each replica's writes to the host in [from, to),
// by the replica named in its user agent.
func replicaWrites(host *harness.Cluster, from, to time.Time) (map[string]int, error) {
	evs, err := leafsyncEvents(host, from, to)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, e := range evs {
		switch e.Verb {
		case "create", "update", "patch", "delete":
			out[replicaOfUserAgent(e.UserAgent)]++
		}
	}
	return out, nil
}

// replicaSteps is each replica's share of the steady window [from, to) of
// a step of n registrations (nil for one replica): the members it holds at
// the window's end (which must still be split), its usage, and its
// scrapes at the window's start and end. The churn figures come later.
func (b *bench) replicaSteps(ctx context.Context, n int, steady usage, m0, m1 []metricsSnapshot, from, to time.Time) ([]ReplicaStep, error) {
	if len(b.ls) == 1 {
		return nil, nil
	}
	count, err := b.splitMembers(ctx, n, to)
	if err != nil {
		return nil, err
	}
	writes, err := replicaWrites(b.host, from, to)
	if err != nil {
		return nil, err
	}
	window := to.Sub(from).Seconds()
	var out []ReplicaStep
	for i := range b.ls {
		name := b.ls.name(i)
		out = append(out, ReplicaStep{
			Replica: name, Members: count[name], Acting: int(m1[i].sum("leafsync_shard_members")),
			SteadyRSSMiB: steady.rss[i], SteadyHeapMiB: steady.heap[i], SteadyCPU: steady.cpu[i],
			HostWritesPerSec: float64(writes[name]) / window,
			LeaseLagP99:      histogramQuantile(0.99, m0[i].buckets("leafsync_lease_renewal_lag_seconds"), m1[i].buckets("leafsync_lease_renewal_lag_seconds")),
			Goroutines:       int(m1[i].sum("go_goroutines")),
		})
	}
	return out, nil
}
