//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/leafsync/leafsync/test/harness"
)

// TestDeregisterDrains: `leafsync deregister` of a member running a
// Deployment (web, 2) and a StatefulSet (db, 1) drains its leaf first:
// when the command returns, no pod of it is left in the member, both
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
	hostKC, err := f.host.WriteKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	deregister := func(args ...string) string {
		t.Helper()
		args = append([]string{"deregister", "--kubeconfig", hostKC, "-n", leafsyncNamespace, "--timeout", "90s"}, args...)
		out, err := exec.Command(harness.LeafsyncBinary(t), args...).CombinedOutput()
		t.Logf("leafsync %s:\n%s", strings.Join(args, " "), out)
		if err != nil {
			t.Fatalf("leafsync deregister: %v", err)
		}
		return string(out)
	}

	start := time.Now()
	deregister("--cluster", "member-a")
	took := time.Since(start)
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
	out := deregister("--cluster", "member-b", "--orphan")
	if want := fmt.Sprintf("%d pod(s) of leaf %s are left running in the member", len(before), leafB); !strings.Contains(out, want) || !strings.Contains(out, "apps/db-0") {
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
	type ev struct {
		podEvent
		member string
	}
	var evs []ev
	for m, r := range recs {
		for _, e := range r.events(t) {
			evs = append(evs, ev{e, m})
		}
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].at.Before(evs[j].at) })
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
