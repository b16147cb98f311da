//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/leafsync/leafsync/test/harness"
)

// TestDeregisterDrains: `leafsync deregister` of a member running a
// Deployment (web, 2) and a StatefulSet (db, 1) drains its leaf first,
// through evictions: while web's PodDisruptionBudget allows no
// disruption, db-0 leaves and web stays; once it allows, web leaves too.
// When the command returns, no pod of it is left in the member, both
// workloads run on the other leaf, and over every watched version of both
// members' pods no pod name (db-0 above all) ever had a copy in two
// members at once. Then `--orphan` deregisters the other member without a
// drain: its pods stay running in it, and the command names them. On
// 04d21e7 deregister returned at once and left all three member pods
// running (and had no --orphan).
func TestDeregisterDrains(t *testing.T) {
	f := newPodSyncFleet(t, "member-a", "member-b")
	a, b := f.members["member-a"], f.members["member-b"]
	const leafA, leafB = "leaf-member-a", "leaf-member-b"
	f.startLeafsync(t, "leafsync")
	f.register(t, "member-a", nil)
	f.waitLeafReady(t, leafA, time.Minute)
	f.createWorkloads(t, []harness.LeafWorkload{leafWorkload("web", 2, leafA, leafB)}, []harness.LeafWorkload{leafWorkload("db", 1, leafA, leafB)})
	waitHostPodsReady(t, f, "app=web", 2, 90*time.Second, leafA)
	waitHostPodsReady(t, f, "app=db", 1, 90*time.Second, leafA)
	f.register(t, "member-b", nil)
	f.waitLeafReady(t, leafB, time.Minute)
	waitOneToOne(t, f, "member-a", leafA, 10*time.Second)
	recs := map[string]*podRecorder{
		"member-a": recordPods(t, a.Cluster, managedPodSelector),
		"member-b": recordPods(t, b.Cluster, managedPodSelector),
	}
	deregister := func(args ...string) string {
		t.Helper()
		out, err := runDeregister(t, f, append([]string{"--timeout", "90s"}, args...)...)
		if err != nil {
			t.Fatalf("leafsync deregister: %v", err)
		}
		return out
	}

	// web's PodDisruptionBudget allows no disruption at first (the host
	// runs no disruption controller: the test writes its status), so the
	// drain evicts db-0 and waits for web until the budget allows it.
	ctx := context.Background()
	pdbs := f.host.Client().PolicyV1().PodDisruptionBudgets(appsNS)
	pdb, err := pdbs.Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	setAllowed := func(n int32) {
		t.Helper()
		cur, err := pdbs.Get(ctx, pdb.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: cur.Generation, DisruptionsAllowed: n,
			CurrentHealthy: 2, DesiredHealthy: 2 - n, ExpectedPods: 2}
		if _, err := pdbs.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setAllowed(0)

	dbCopy := findPod(listPods(t, a.Cluster, "app=db"), "db-0")
	if dbCopy.UID == "" {
		t.Fatal("no db-0 in member-a")
	}
	start := time.Now()
	done := make(chan string, 1)
	go func() {
		out, err := runDeregister(t, f, "--timeout", "90s", "--cluster", "member-a")
		if err != nil {
			out += "\nfailed: " + err.Error()
		}
		done <- out
	}()
	waitGone(t, a.Client(), "db-0", dbCopy.UID)
	time.Sleep(3 * time.Second) // the drain retries web's evictions meanwhile
	for _, p := range listPods(t, f.host, "app=web") {
		if p.DeletionTimestamp != nil || p.Spec.NodeName != leafA {
			t.Errorf("web pod %s (on %s, deletion %v) evicted while its budget allowed no disruption", p.Name, p.Spec.NodeName, p.DeletionTimestamp)
		}
	}
	blocked := time.Since(start)
	setAllowed(2)
	out := <-done
	took := time.Since(start)
	if strings.Contains(out, "failed:") {
		t.Fatalf("leafsync deregister: %s", out)
	}
	t.Logf("web's evictions held by its budget for %s (db-0 drained meanwhile), then allowed", blocked.Round(time.Millisecond))
	if left := listPods(t, a.Cluster, managedPodSelector); len(left) > 0 {
		var names []string
		for _, p := range left {
			names = append(names, p.Name)
		}
		t.Errorf("deregister returned with %d pod(s) left in member-a: %v", len(left), names)
	}
	waitHostPodsReady(t, f, "app=web", 2, 60*time.Second, leafB)
	waitHostPodsReady(t, f, "app=db", 1, 60*time.Second, leafB)
	waitOneToOne(t, f, "member-b", leafB, 10*time.Second)
	f.waitGone(t, "leaf "+leafA, func() error {
		_, err := f.host.Client().CoreV1().Nodes().Get(context.Background(), leafA, metav1.GetOptions{})
		return err
	})
	maxCopies, when := mostCopiesOfOneName(t, recs)
	t.Logf("deregister --cluster member-a took %s; most copies of one pod name across members at once: %d %s",
		took.Round(time.Millisecond), maxCopies, when)
	if maxCopies > 1 {
		t.Errorf("a pod had copies in two members at once: %s", when)
	}

	// --orphan: nothing drained, the member's pods named and left running.
	before := listPods(t, b.Cluster, managedPodSelector)
	out = deregister("--cluster", "member-b", "--orphan")
	if want := fmt.Sprintf("%d pod(s) leafsync made in member member-b are left running", len(before)); !strings.Contains(out, want) || !strings.Contains(out, "apps/db-0") {
		t.Errorf("--orphan output lacks %q and apps/db-0", want)
	}
	after := listPods(t, b.Cluster, managedPodSelector)
	for _, p := range before {
		if !containsPod(after, p.UID) {
			t.Errorf("--orphan: member pod %s (uid %s) is gone", p.Name, p.UID)
		}
	}
	if len(before) != 3 {
		t.Errorf("member-b ran %d pods before --orphan, want 3", len(before))
	}
}

// TestDeregisterMemberDown: a member that does not answer cannot have its
// copies deleted, so deregister releases nothing. member-a runs db (1) and
// is cut off until its leaf is NotReady; the host pod is then evicted and
// finished (its member delete recorded as owed), so the leaf empties
// while db-0 still runs in member-a. deregister reads the member, cannot,
// fails naming it, and the registration — with the owed delete — stays.
// Healed, leafsync carries out the delete, and deregister then succeeds
// with nothing left in the member. On 04d21e7 the first deregister
// released the member at once and db-0 ran on in it for good.
func TestDeregisterMemberDown(t *testing.T) {
	f := newPodSyncFleet(t, "member-a")
	a := f.members["member-a"]
	const leafA = "leaf-member-a"
	f.startLeafsync(t, "leafsync")
	f.register(t, "member-a", nil)
	f.waitLeafReady(t, leafA, time.Minute)
	f.createWorkloads(t, nil, []harness.LeafWorkload{leafWorkload("db", 1, leafA)})
	waitHostPodsReady(t, f, "app=db", 1, 90*time.Second, leafA)
	waitOneToOne(t, f, "member-a", leafA, 10*time.Second)

	a.proxy.Cut()
	f.waitLeafNotReady(t, leafA, time.Minute)
	out, err := runDeregister(t, f, "--cluster", "member-a", "--timeout", "20s")
	if err == nil {
		t.Fatalf("deregister of a member that does not answer succeeded")
	}
	if !strings.Contains(out, "member member-a (") || !strings.Contains(out, "Nothing was deregistered") {
		t.Errorf("deregister's error does not name the member it could not read")
	}
	if _, err := f.host.Client().CoreV1().Secrets(leafsyncNamespace).Get(context.Background(), "member-member-a", metav1.GetOptions{}); err != nil {
		t.Fatalf("the registration is gone although db-0 may still run in member-a: %v", err)
	}
	if err := a.proxy.Heal(); err != nil {
		t.Fatal(err)
	}
	if _, err := runDeregister(t, f, "--cluster", "member-a", "--timeout", "60s"); err != nil {
		t.Fatalf("deregister after the heal: %v", err)
	}
	if left := listPods(t, a.Cluster, managedPodSelector); len(left) > 0 {
		t.Errorf("deregister returned with %d pod(s) left in member-a", len(left))
	}
}

// runDeregister runs `leafsync deregister` against the fleet's host.
func runDeregister(t *testing.T, f *fleet, args ...string) (string, error) {
	t.Helper()
	hostKC, err := f.host.WriteKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	args = append([]string{"deregister", "--kubeconfig", hostKC, "-n", leafsyncNamespace}, args...)
	start := time.Now()
	out, err := exec.Command(harness.LeafsyncBinary(t), args...).CombinedOutput()
	t.Logf("leafsync %s (%s, %v):\n%s", strings.Join(args, " "), time.Since(start).Round(time.Millisecond), err, out)
	return string(out), err
}

func containsPod(pods []corev1.Pod, uid types.UID) bool {
	for _, p := range pods {
		if p.UID == uid {
			return true
		}
	}
	return false
}

// mostCopiesOfOneName replays the recorded versions of the members' pods
// in the order they were received and returns the largest number of
// members that held a copy (any pod not yet deleted) of one pod name at
// the same moment, and when that was first seen.
func mostCopiesOfOneName(t *testing.T, recs map[string]*podRecorder) (int, string) {
	t.Helper()
	evs := mergedEvents(t, recs)
	holders := map[string]map[string]types.UID{} // name -> member -> copy
	most, when := 0, ""
	for _, e := range evs {
		name := e.pod.Namespace + "/" + e.pod.Name
		if holders[name] == nil {
			holders[name] = map[string]types.UID{}
		}
		if e.typ == watch.Deleted {
			if holders[name][e.member] == e.pod.UID {
				delete(holders[name], e.member)
			}
			continue
		}
		holders[name][e.member] = e.pod.UID
		if n := len(holders[name]); n > most {
			most, when = n, fmt.Sprintf("(%s in %d members at %s)", name, n, e.at.Format(time.StampMilli))
		}
	}
	return most, when
}
