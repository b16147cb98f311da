//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/leafsync/leafsync/test/harness"
)

// benchSeconds is how long each phase of a benchmark runs:
// LEAFSYNC_BENCH_SECONDS (make bench sets 60), 10 by default (the smoke CI
// runs with make test).
func benchSeconds(t *testing.T) time.Duration {
	t.Helper()
	if v := os.Getenv("LEAFSYNC_BENCH_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("LEAFSYNC_BENCH_SECONDS=%q: want a positive integer", v)
		}
		return time.Duration(n) * time.Second
	}
	return 10 * time.Second
}

// hostRequests sums leafsync's client requests to the host (client-go's
// rest_client_requests_total, whose host label is the host's address).
func hostRequests(m metricSet, hostAddr string) float64 {
	var n float64
	for series, v := range m {
		if strings.HasPrefix(series, "rest_client_requests_total{") && strings.Contains(series, `host="`+hostAddr+`"`) {
			n += v
		}
	}
	return n
}

// lagQuantile estimates a quantile of leafsync_lease_renewal_lag_seconds
// over every cluster between two scrapes: the upper bound of the bucket
// that holds it.
func lagQuantile(before, after metricSet, q float64) (float64, float64) {
	buckets := map[float64]float64{}
	for series, v := range after {
		if !strings.HasPrefix(series, "leafsync_lease_renewal_lag_seconds_bucket{") {
			continue
		}
		i := strings.Index(series, `le="`)
		le, err := strconv.ParseFloat(strings.TrimSuffix(series[i+4:], `"}`), 64)
		if err != nil {
			le = math.Inf(1)
		}
		buckets[le] += v - before[series]
	}
	les := make([]float64, 0, len(buckets))
	for le := range buckets {
		les = append(les, le)
	}
	sort.Float64s(les)
	total := buckets[math.Inf(1)]
	for _, le := range les {
		if buckets[le] >= q*total {
			return le, total
		}
	}
	return math.Inf(1), total
}

// TestBenchHeartbeat reports, for three members, leafsync's host requests
// per second per leaf in steady state, and Lease renewal lag and host
// requests while every member churns pods as fast as it can (each pod event
// kicks a leaf recompute). It asserts only what is safety: no renewal
// failed and every leaf stayed Ready; the numbers are reported. make bench
// runs it for 60s per phase; make test runs a 10s smoke.
func TestBenchHeartbeat(t *testing.T) {
	phase := benchSeconds(t)
	names := []string{"member-a", "member-b", "member-c"}
	var opts []harness.MemberOptions
	for _, n := range names {
		opts = append(opts, harness.MemberOptions{Name: n, Nodes: 2})
	}
	f := newFleet(t, harness.HostOptions{}, opts...)
	ls := f.startLeafsync(t, "leafsync")
	for _, n := range names {
		f.register(t, n, nil)
	}
	recs := map[string]*nodeRecorder{}
	for _, n := range names {
		f.waitLeafReady(t, "leaf-"+n, time.Minute)
		recs[n] = recordNode(t, f.host, "leaf-"+n)
	}
	hostAddr := f.hostProxy.Addr()
	time.Sleep(5 * time.Second) // let start-up writes settle

	m0 := scrape(t, ls)
	if hostRequests(m0, hostAddr) == 0 {
		t.Fatalf("no rest_client_requests_total series for the host %s: cannot count host requests", hostAddr)
	}
	time.Sleep(phase)
	m1 := scrape(t, ls)
	steady := (hostRequests(m1, hostAddr) - hostRequests(m0, hostAddr)) / phase.Seconds() / float64(len(names))
	steadyP99, steadyN := lagQuantile(m0, m1, 0.99)

	// Flood: every member creates and deletes pods on its nodes as fast as
	// four writers can, for one phase.
	ctx, cancel := context.WithTimeout(context.Background(), phase)
	var events atomic.Int64
	var wg sync.WaitGroup
	for _, n := range names {
		mc := f.members[n].Client()
		if err := f.members[n].EnsureNamespace(context.Background(), "churn"); err != nil {
			t.Fatal(err)
		}
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ctx.Err() == nil; i++ {
					name := fmt.Sprintf("churn-%d-%d", w, i)
					pod := &corev1.Pod{
						ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "churn"},
						Spec: corev1.PodSpec{
							NodeName:                      fmt.Sprintf("%s-node-%d", n, i%2),
							TerminationGracePeriodSeconds: ptr.To[int64](0),
							Containers:                    []corev1.Container{{Name: "app", Image: "busybox"}},
						},
					}
					if _, err := mc.CoreV1().Pods("churn").Create(ctx, pod, metav1.CreateOptions{}); err == nil {
						events.Add(1)
					}
					if err := mc.CoreV1().Pods("churn").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err == nil {
						events.Add(1)
					}
				}
			}()
		}
	}
	wg.Wait()
	cancel()
	m2 := scrape(t, ls)
	flood := (hostRequests(m2, hostAddr) - hostRequests(m1, hostAddr)) / phase.Seconds() / float64(len(names))
	floodP99, floodN := lagQuantile(m1, m2, 0.99)
	var failures float64
	for _, n := range names {
		failures += m2[`leafsync_lease_renewal_failures_total{cluster="`+n+`"}`]
	}

	t.Logf("BENCH heartbeat: %d members, %s per phase", len(names), phase)
	t.Logf("BENCH steady state: %.2f host requests/s per leaf; Lease renewal lag p99 <= %gs over %.0f renewals", steady, steadyP99, steadyN)
	t.Logf("BENCH member pod churn: %.0f member pod creates+deletes/s in all; %.2f host requests/s per leaf; Lease renewal lag p99 <= %gs over %.0f renewals; %.0f renewal failures",
		float64(events.Load())/phase.Seconds(), flood, floodP99, floodN, failures)
	if failures != 0 {
		t.Errorf("%.0f Lease renewals failed", failures)
	}
	if floodN == 0 {
		t.Errorf("no Lease renewal observed during the churn")
	}
	for _, n := range names {
		for _, o := range recs[n].observations(t) {
			if o.ready != corev1.ConditionTrue {
				t.Errorf("leaf-%s Ready=%s at %s during the benchmark", n, o.ready, o.at.Format(time.StampMilli))
				break
			}
		}
	}
}
