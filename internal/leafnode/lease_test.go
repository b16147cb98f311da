package leafnode

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

// The Lease is renewed every Interval while the engine says so, and not
// while it says no; the schedule runs on the injected clock.
func TestHeartbeatRenewsOnlyWhenTheEngineSaysSo(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	leaf := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "leaf", UID: "l1", Labels: map[string]string{LabelCluster: "eu-1"}}}
	client := fake.NewClientset(leaf)
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	renewed := make(chan time.Time, 10)
	hb := &Heartbeat{Client: client, Cluster: "eu-1", Name: "leaf", Interval: 10 * time.Second, Duration: 40 * time.Second,
		Timeout: time.Second, Clock: clk, Log: logr.Discard(),
		OnRenew: func(_ time.Duration, err error) {
			if err != nil {
				t.Error(err)
			}
			renewed <- clk.Now()
		}}
	hb.SetRenewing(true)
	done := make(chan struct{})
	go func() { defer close(done); hb.Run(ctx) }()
	waiting := func() {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !clk.HasWaiters() {
			if time.Now().After(deadline) {
				t.Fatal("Run never waited for its next renewal")
			}
			runtime.Gosched()
		}
	}
	start := clk.Now()
	for i, want := range []time.Duration{0, 10 * time.Second, 30 * time.Second} {
		select {
		case at := <-renewed:
			if !at.Equal(start.Add(want)) {
				t.Fatalf("renewal %d at +%s, want +%s", i, at.Sub(start), want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("renewal %d never happened", i)
		}
		waiting()
		if i == 1 { // the engine says no for one interval
			hb.SetRenewing(false)
			clk.Step(10 * time.Second)
			waiting()
			hb.SetRenewing(true)
		}
		if i < 2 {
			clk.Step(10 * time.Second)
		}
	}
	l, err := client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "leaf", metav1.GetOptions{})
	if err != nil || !l.Spec.RenewTime.Time.Equal(start.Add(30*time.Second)) {
		t.Fatalf("lease %+v, %v; want renewed at the fake clock's time", l, err)
	}
	cancel()
	<-done
}

// A leaf Lease made by a leafsync from before the node fence has no label;
// its next renewal adds leafsync.io/cluster, which the fence then requires.
func TestRenewLabelsAnOldLease(t *testing.T) {
	ctx := context.Background()
	leaf := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "leaf", UID: "l1", Labels: map[string]string{LabelCluster: "eu-1"}}}
	old := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "leaf", Namespace: corev1.NamespaceNodeLease, UID: "lease-1"}}
	client := fake.NewClientset(leaf, old)
	hb := &Heartbeat{Client: client, Cluster: "eu-1", Name: "leaf", Duration: 40 * time.Second, Timeout: time.Second,
		Clock: clocktesting.NewFakeClock(time.Now()), Log: logr.Discard()}
	if err := hb.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "leaf", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Labels[LabelCluster] != "eu-1" || l.Spec.RenewTime == nil {
		t.Fatalf("lease after renewal: labels %v, renewTime %v; want leafsync.io/cluster=eu-1 and a renewal", l.Labels, l.Spec.RenewTime)
	}
}

// A failed renewal is retried with jittered, doubling delays (50ms to
// 500ms before jitter, each up to three times as long), and given up, with
// the error reported, once the next try would fall after the next renewal.
func TestRenewRetriesUntilTheNextRenewal(t *testing.T) {
	for _, failures := range []int{3, 1000} {
		t.Run(fmt.Sprint(failures, " failures"), func(t *testing.T) {
			leaf := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "leaf", UID: "l1", Labels: map[string]string{LabelCluster: "eu-1"}}}
			client := fake.NewClientset(leaf)
			clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			var tries []time.Time
			client.PrependReactor("get", "leases", func(k8stesting.Action) (bool, apiruntime.Object, error) {
				tries = append(tries, clk.Now())
				if len(tries) <= failures {
					return true, nil, apierrors.NewServiceUnavailable("host is slow")
				}
				return false, nil, nil
			})
			var reports []error
			hb := &Heartbeat{Client: client, Cluster: "eu-1", Name: "leaf", Interval: 3 * time.Second, Duration: 40 * time.Second,
				Timeout: time.Second, Clock: clk, Log: logr.Discard(),
				OnRenew: func(_ time.Duration, err error) { reports = append(reports, err) }}
			due := clk.Now()
			next := due.Add(hb.Interval)
			done := make(chan struct{})
			go func() { defer close(done); hb.renewUntil(context.Background(), due, next) }()
			for stepping := true; stepping; {
				select {
				case <-done:
					stepping = false
				case <-time.After(10 * time.Second):
					t.Fatal("renewUntil never returned")
				default:
					if clk.HasWaiters() {
						clk.Step(time.Millisecond)
					}
					runtime.Gosched()
				}
			}
			t.Logf("%d tries, the last at +%s", len(tries), tries[len(tries)-1].Sub(due))
			base := 50 * time.Millisecond
			for i := 1; i < len(tries); i++ {
				gap := tries[i].Sub(tries[i-1])
				if gap < base || gap > 3*base+time.Millisecond {
					t.Errorf("retry %d after %s, want within [%s, %s]", i, gap, base, 3*base)
				}
				base = min(2*base, 500*time.Millisecond)
			}
			if last := tries[len(tries)-1]; !last.Before(next) {
				t.Errorf("last try at +%s, at or after the next renewal (+%s)", last.Sub(due), hb.Interval)
			}
			if len(reports) != 1 {
				t.Fatalf("OnRenew called %d times, want once", len(reports))
			}
			if failures < len(tries) {
				if reports[0] != nil || len(tries) != failures+1 {
					t.Errorf("after %d failures: %d tries, report %v; want a renewal at the next try", failures, len(tries), reports[0])
				}
				return
			}
			if !apierrors.IsServiceUnavailable(reports[0]) {
				t.Errorf("report %v, want the last error", reports[0])
			}
			if len(tries) < 5 || next.Sub(tries[len(tries)-1]) > 1500*time.Millisecond {
				t.Errorf("gave up after %d tries, the last at +%s: too early for a next renewal at +%s", len(tries), tries[len(tries)-1].Sub(due), hb.Interval)
			}
		})
	}
}

// A renewal refused for a stale version (409: the leaf's new writer renewed
// since) is followed by one fresh read and one more try, only if Owned
// still says yes; in steady state a renewal is one Update, no read.
func TestRenewRetriesAConflictOnlyIfStillOwned(t *testing.T) {
	ctx := context.Background()
	for _, owned := range []bool{true, false} {
		t.Run(fmt.Sprintf("owned=%v", owned), func(t *testing.T) {
			leaf := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "leaf", UID: "l1", Labels: map[string]string{LabelCluster: "eu-1"}}}
			client := fake.NewClientset(leaf)
			// The fake keeps no resourceVersion: the Lease gets one at
			// creation, and keeps the one each renewal carries.
			client.PrependReactor("create", "leases", func(a k8stesting.Action) (bool, apiruntime.Object, error) {
				a.(k8stesting.CreateAction).GetObject().(*coordinationv1.Lease).ResourceVersion = "1"
				return false, nil, nil
			})
			asked, lost := 0, false // lost: the check before the pause said yes, every later one says owned
			hb := &Heartbeat{Client: client, Cluster: "eu-1", Name: "leaf", Duration: 40 * time.Second, Timeout: time.Second,
				Owned: func() bool { asked++; return !lost || owned || asked == 1 }}
			if err := hb.Renew(ctx); err != nil {
				t.Fatal(err)
			}
			count := func(verb string) int { return countVerb(client, verb, "leases") }
			gets := count("get")
			if err := hb.Renew(ctx); err != nil {
				t.Fatal(err)
			}
			if n := count("get") - gets; n != 0 {
				t.Fatalf("a steady-state renewal read the Lease %d times", n)
			}
			conflicts := 1
			client.PrependReactor("update", "leases", func(k8stesting.Action) (bool, apiruntime.Object, error) {
				if conflicts > 0 {
					conflicts--
					return true, nil, apierrors.NewConflict(coordinationv1.Resource("leases"), "leaf", fmt.Errorf("stale"))
				}
				return false, nil, nil
			})
			asked, lost = 0, true
			gets, updates := count("get"), count("update")
			err := hb.Renew(ctx)
			if owned != (err == nil) {
				t.Fatalf("renewal after a conflict: %v (still owned: %v)", err, owned)
			}
			wantUpdates := 1
			if owned {
				wantUpdates = 2
			}
			if n := count("update") - updates; n != wantUpdates {
				t.Fatalf("%d renewals sent after a conflict, want %d", n, wantUpdates)
			}
			if n := count("get") - gets; n != 1 {
				t.Fatalf("%d reads after a conflict, want 1", n)
			}
			if asked != 2 {
				t.Fatalf("Owned asked %d times, want twice (before, and after the fresh read)", asked)
			}
		})
	}
}
