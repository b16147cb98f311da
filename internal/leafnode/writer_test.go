package leafnode

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/leafsync/leafsync/hysteresis"
)

func desired(st hysteresis.Status) Desired {
	n := memberNode("n1", true, map[string]string{"cpu": "4", "memory": "8Gi", "pods": "110"}, nil, "v1.35.0")
	return Compute(Input{Cluster: "eu-1", LeafName: "leaf", MemberNodes: members(n), Status: st,
		Config: hysteresis.DefaultConfig(), Options: Options{LeafTaint: true}})
}

// Narrow unit test of the write discipline (the e2e tests prove the rest
// against a real API server).
func TestWriterWritesOnlyChanges(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	w := &Writer{Client: client, Cluster: "eu-1", Name: "leaf", HeartbeatEvery: time.Minute, Clock: clk}

	unknown := desired(hysteresis.Status{State: hysteresis.Ready})
	unknown.Capacity, unknown.Allocatable = nil, nil
	if err := w.Sync(ctx, unknown); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Nodes().Get(ctx, "leaf", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a leaf was created for a member never seen: %v", err)
	}

	ready := desired(hysteresis.Status{State: hysteresis.Ready})
	if err := w.Sync(ctx, ready); err != nil {
		t.Fatal(err)
	}
	first := w.Writes
	clk.Step(10 * time.Second)
	if err := w.Sync(ctx, ready); err != nil {
		t.Fatal(err)
	}
	if w.Writes != first {
		t.Fatalf("an unchanged leaf was written %d more times", w.Writes-first)
	}

	// Another actor's taint survives leafsync's cordon and uncordon.
	n, _ := client.CoreV1().Nodes().Get(ctx, "leaf", metav1.GetOptions{})
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute})
	if _, err := client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, st := range []hysteresis.Status{{State: hysteresis.Suspect, Cordoned: true}, {State: hysteresis.Ready}} {
		if err := w.Sync(ctx, desired(st)); err != nil {
			t.Fatal(err)
		}
		n, _ = client.CoreV1().Nodes().Get(ctx, "leaf", metav1.GetOptions{})
		if !hasTaintKey(n, corev1.TaintNodeUnreachable) {
			t.Fatalf("leafsync removed KCM's taint: %v", n.Spec.Taints)
		}
		if hasTaintKey(n, TaintUnreachable) != st.Cordoned {
			t.Fatalf("cordon taint present=%v, want %v", hasTaintKey(n, TaintUnreachable), st.Cordoned)
		}
	}
	if got := n.Status.Allocatable[corev1.ResourceCPU]; got.Cmp(resource.MustParse("4")) != 0 {
		t.Fatalf("allocatable cpu %s", got.String())
	}

	// Declared features follow the member's nodes: written when they
	// change, removed when no longer declared.
	for _, want := range [][]string{{"InPlacePodLevelResourcesVerticalScaling"}, nil} {
		d := desired(hysteresis.Status{State: hysteresis.Ready})
		d.DeclaredFeatures = want
		if err := w.Sync(ctx, d); err != nil {
			t.Fatal(err)
		}
		n, _ = client.CoreV1().Nodes().Get(ctx, "leaf", metav1.GetOptions{})
		if !slices.Equal(n.Status.DeclaredFeatures, want) {
			t.Fatalf("leaf declares %v, want %v", n.Status.DeclaredFeatures, want)
		}
	}
}

func hasTaintKey(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// A leaf that is not Ready is written once (Ready=False, with why); when
// KCM then marks it Unknown (the Lease lapsed), leafsync leaves the
// conditions to KCM instead of writing False back every monitor period.
func TestWriterDoesNotFightKCMWhenNotReady(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	w := &Writer{Client: client, Cluster: "eu-1", Name: "leaf", HeartbeatEvery: time.Minute, Clock: clk}
	if err := w.Sync(ctx, desired(hysteresis.Status{State: hysteresis.Ready})); err != nil {
		t.Fatal(err)
	}
	down := desired(hysteresis.Status{State: hysteresis.NotReady, Cordoned: true, Reason: hysteresis.ReasonNetworkFailure})
	if err := w.Sync(ctx, down); err != nil {
		t.Fatal(err)
	}
	n, _ := client.CoreV1().Nodes().Get(ctx, "leaf", metav1.GetOptions{})
	if c := testCondition(n.Status.Conditions, corev1.NodeReady); c == nil || c.Status != corev1.ConditionFalse || c.Reason != ReasonMemberUnreachable {
		t.Fatalf("Ready condition after NotReady: %+v", c)
	}
	// KCM: the Lease lapsed, every condition Unknown.
	for i := range n.Status.Conditions {
		n.Status.Conditions[i].Status = corev1.ConditionUnknown
		n.Status.Conditions[i].Reason = "NodeStatusUnknown"
		n.Status.Conditions[i].Message = "Kubelet stopped posting node status."
	}
	if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	statusWrites := func() int {
		n := 0
		for _, a := range client.Actions() {
			if a.GetVerb() != "get" && a.GetSubresource() == "status" {
				n++
			}
		}
		return n
	}
	before, beforeStatus := w.Writes, statusWrites()
	notReady := desired(hysteresis.Status{State: hysteresis.NotReady, Cordoned: true, Reason: hysteresis.ReasonNetworkFailure})
	for i := 0; i < 10; i++ {
		clk.Step(5 * time.Second)
		if err := w.Sync(ctx, notReady); err != nil {
			t.Fatal(err)
		}
	}
	if w.Writes != before {
		t.Fatalf("%d writes to a leaf KCM marked Unknown while it stayed NotReady", w.Writes-before)
	}
	// Recovering changes the cordon taint's value (one spec write), and
	// still leaves the conditions to KCM.
	if err := w.Sync(ctx, desired(hysteresis.Status{State: hysteresis.Recovering, Cordoned: true, Reason: hysteresis.ReasonRecovering})); err != nil {
		t.Fatal(err)
	}
	if w.Writes != before+1 || statusWrites() != beforeStatus {
		t.Fatalf("Recovering: %d writes, %d status writes; want 1 taint write", w.Writes-before, statusWrites()-beforeStatus)
	}
	n, _ = client.CoreV1().Nodes().Get(ctx, "leaf", metav1.GetOptions{})
	if c := testCondition(n.Status.Conditions, corev1.NodeReady); c.Status != corev1.ConditionUnknown {
		t.Fatalf("leafsync overwrote KCM's Unknown: %+v", c)
	}
	// Ready again: leafsync writes Ready=True with a fresh heartbeat.
	if err := w.Sync(ctx, desired(hysteresis.Status{State: hysteresis.Ready})); err != nil {
		t.Fatal(err)
	}
	n, _ = client.CoreV1().Nodes().Get(ctx, "leaf", metav1.GetOptions{})
	if c := testCondition(n.Status.Conditions, corev1.NodeReady); c.Status != corev1.ConditionTrue || !c.LastHeartbeatTime.Time.Equal(clk.Now()) {
		t.Fatalf("Ready condition after recovery: %+v", c)
	}
}

// leafsync writes, renews and deletes only the Node that is its leaf of
// the cluster (label leafsync.io/cluster=<cluster>): a Node of the same
// name that is not (a real worker) is never touched.
func TestWriterNeverTouchesAForeignNode(t *testing.T) {
	ctx := context.Background()
	worker := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "leaf", UID: "w1", Labels: map[string]string{"role": "worker"}},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: "dedicated", Effect: corev1.TaintEffectNoSchedule}}},
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "leaf", Namespace: corev1.NamespaceNodeLease}}
	client := fake.NewClientset(worker, lease)
	w := &Writer{Client: client, Cluster: "eu-1", Name: "leaf", HeartbeatEvery: time.Minute}
	err := w.Sync(ctx, desired(hysteresis.Status{State: hysteresis.Suspect, Cordoned: true, Reason: hysteresis.ReasonNetworkFailure}))
	if !errors.Is(err, errNotOwned) {
		t.Fatalf("Sync on a foreign Node: %v, want errNotOwned", err)
	}
	hb := &Heartbeat{Client: client, Cluster: "eu-1", Name: "leaf", Duration: 40 * time.Second, Timeout: time.Second}
	if err := hb.Renew(ctx); !errors.Is(err, errNotOwned) {
		t.Fatalf("Renew of a foreign Node's Lease: %v, want errNotOwned", err)
	}
	if err := w.Delete(ctx); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	for _, a := range client.Actions() {
		if a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			t.Errorf("leafsync %s %s/%s of a Node it does not own", a.GetVerb(), a.GetResource().Resource, a.GetSubresource())
		}
	}
	// Its own leaf it renews and deletes.
	worker.Labels[LabelCluster] = "eu-1"
	if _, err := client.CoreV1().Nodes().Update(ctx, worker, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := hb.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Nodes().Get(ctx, "leaf", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("own leaf not deleted: %v", err)
	}
}

// The member's own pods come and go: the leaf's resources are rewritten
// at most every AllocatableEvery, and Deferred says when; a change of the
// member's nodes or of a condition goes out at once.
func TestWriterCoalescesPodChurn(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	w := &Writer{Client: client, Cluster: "eu-1", Name: "leaf", HeartbeatEvery: time.Hour, AllocatableEvery: 10 * time.Second, Clock: clk}
	n1 := memberNode("n1", true, map[string]string{"cpu": "4", "memory": "8Gi", "pods": "110"}, nil, "v1.35.0")
	n2 := memberNode("n2", true, map[string]string{"cpu": "4", "memory": "8Gi", "pods": "110"}, nil, "v1.35.0")
	compute := func(st hysteresis.Status, nodes []*corev1.Node, podCPU ...string) Desired {
		var pods []*corev1.Pod
		for i, c := range podCPU {
			pods = append(pods, memberPod(fmt.Sprintf("p%d", i), "n1", corev1.PodRunning, false, map[string]string{"cpu": c}))
		}
		return Compute(Input{Cluster: "eu-1", LeafName: "leaf", MemberNodes: members(nodes...), MemberPods: pods, Status: st,
			Config: hysteresis.DefaultConfig(), Options: Options{LeafTaint: true}})
	}
	ready := hysteresis.Status{State: hysteresis.Ready}
	allocatable := func() string {
		n, _ := client.CoreV1().Nodes().Get(ctx, "leaf", metav1.GetOptions{})
		q := n.Status.Allocatable[corev1.ResourceCPU]
		return q.String()
	}
	if err := w.Sync(ctx, compute(ready, []*corev1.Node{n1})); err != nil {
		t.Fatal(err)
	}
	base := w.Writes
	clk.Step(2 * time.Second)
	if err := w.Sync(ctx, compute(ready, []*corev1.Node{n1}, "1")); err != nil {
		t.Fatal(err)
	}
	if w.Writes != base || w.Deferred != 8*time.Second || allocatable() != "4" {
		t.Fatalf("a member pod started 2s after a write: %d writes, deferred %s, allocatable %s; want none, 8s, 4", w.Writes-base, w.Deferred, allocatable())
	}
	clk.Step(8 * time.Second)
	if err := w.Sync(ctx, compute(ready, []*corev1.Node{n1}, "1", "500m")); err != nil {
		t.Fatal(err)
	}
	if w.Writes != base+1 || w.Deferred != 0 || allocatable() != "2500m" {
		t.Fatalf("due: %d writes, deferred %s, allocatable %s; want the latest written", w.Writes-base, w.Deferred, allocatable())
	}
	// A member node added is not held back.
	clk.Step(time.Second)
	if err := w.Sync(ctx, compute(ready, []*corev1.Node{n1, n2}, "1", "500m")); err != nil {
		t.Fatal(err)
	}
	if w.Writes != base+2 || w.Deferred != 0 || allocatable() != "6500m" {
		t.Fatalf("node added 1s after a write: %d writes, deferred %s, allocatable %s; want it written at once", w.Writes-base, w.Deferred, allocatable())
	}
	// Nor is a condition change, pods changing with it.
	clk.Step(time.Second)
	if err := w.Sync(ctx, compute(hysteresis.Status{State: hysteresis.Suspect, Since: clk.Now()}, []*corev1.Node{n1, n2}, "1")); err != nil {
		t.Fatal(err)
	}
	if w.Writes <= base+2 || w.Deferred != 0 || allocatable() != "7" {
		t.Fatalf("condition change: %d writes, deferred %s, allocatable %s; want it written at once", w.Writes-base, w.Deferred, allocatable())
	}
}

// A write refused for a stale version (409) is followed by one fresh read
// and one more try, only if the writer still may write; in steady state a
// write reads nothing (the informer cache and the version last written).
func TestWriterRetriesAConflictOnlyIfStillAllowed(t *testing.T) {
	ctx := context.Background()
	for _, allowed := range []bool{true, false} {
		t.Run(fmt.Sprintf("allowed=%v", allowed), func(t *testing.T) {
			client := fake.NewClientset()
			// The fake keeps no resourceVersion: the leaf gets one at
			// creation, and keeps the one each write carries.
			client.PrependReactor("create", "nodes", func(a k8stesting.Action) (bool, apiruntime.Object, error) {
				a.(k8stesting.CreateAction).GetObject().(*corev1.Node).ResourceVersion = "1"
				return false, nil, nil
			})
			clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			lister, refresh := cachedNodes(t, client)
			asked := 0
			w := &Writer{Client: client, Cluster: "eu-1", Name: "leaf", HeartbeatEvery: time.Minute, Clock: clk, Nodes: lister,
				Allowed: func() bool { asked++; return allowed }}
			if err := w.Sync(ctx, desired(hysteresis.Status{State: hysteresis.Ready})); err != nil {
				t.Fatal(err)
			}
			refresh()
			gets := countVerb(client, "get")
			clk.Step(time.Minute) // the condition heartbeat is due: a status write
			if err := w.Sync(ctx, desired(hysteresis.Status{State: hysteresis.Ready})); err != nil {
				t.Fatal(err)
			}
			if n := countVerb(client, "get") - gets; n != 0 {
				t.Fatalf("a steady-state write read the leaf %d times", n)
			}
			conflicts := 1
			client.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, apiruntime.Object, error) {
				if conflicts > 0 {
					conflicts--
					return true, nil, apierrors.NewConflict(corev1.Resource("nodes"), "leaf", errors.New("stale"))
				}
				return false, nil, nil
			})
			refresh()
			patches, gets := countVerb(client, "patch"), countVerb(client, "get")
			clk.Step(time.Minute)
			if err := w.Sync(ctx, desired(hysteresis.Status{State: hysteresis.Ready})); err != nil {
				t.Fatal(err)
			}
			wantPatches := 1
			if allowed {
				wantPatches = 2
			}
			if n := countVerb(client, "patch") - patches; n != wantPatches {
				t.Fatalf("%d status writes after a conflict, want %d", n, wantPatches)
			}
			if n := countVerb(client, "get") - gets; n != 1 {
				t.Fatalf("%d reads after a conflict, want 1", n)
			}
			if asked != 1 {
				t.Fatalf("asked %d times whether it may still write, want once (after the conflict)", asked)
			}
		})
	}
}

// cachedNodes is an informer cache of the leaf, refreshed by hand from the
// fake's tracker (which records no action).
func cachedNodes(t *testing.T, client *fake.Clientset) (lister corelisters.NodeLister, refresh func()) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	return corelisters.NewNodeLister(idx), func() {
		obj, err := client.Tracker().Get(corev1.SchemeGroupVersion.WithResource("nodes"), "", "leaf")
		if err != nil {
			t.Fatal(err)
		}
		if err := idx.Update(obj); err != nil {
			t.Fatal(err)
		}
	}
}

// countVerb counts the fake's requests of a verb on nodes (or resource).
func countVerb(client *fake.Clientset, verb string, resource ...string) int {
	res := "nodes"
	if len(resource) > 0 {
		res = resource[0]
	}
	n := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == res {
			n++
		}
	}
	return n
}
