package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/leafsync/leafsync/internal/leafnode"
	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
)

// drainFixture: member a's leaf with one synced pod, and a DaemonSet's pod
// that a drain leaves alone.
func drainFixture() *fake.Clientset {
	leaf := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "leaf-a", Labels: map[string]string{leafnode.LabelCluster: "a"}}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "db-0", Namespace: "apps", UID: "db-0-uid",
			Finalizers: []string{podmeta.FinalizerMemberPod}, Annotations: map[string]string{podmeta.AnnotationMemberUID: "m-uid"}},
		Spec: corev1.PodSpec{NodeName: "leaf-a"},
	}
	ds := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "agent-x", Namespace: "apps",
			OwnerReferences: []metav1.OwnerReference{{Kind: "DaemonSet", Name: "agent", Controller: ptrTrue()}}},
		Spec: corev1.PodSpec{NodeName: "leaf-a"},
	}
	// The fake clientset ignores field selectors: keep what the leaf's
	// field selector would.
	host := fake.NewClientset(registrationFor("a"), leaf, pod, ds)
	return host
}

func ptrTrue() *bool { t := true; return &t }

// TestDrainEvictsThenDeregisters: the leaf is cordoned and its synced pod evicted
// (an eviction a PodDisruptionBudget refuses is retried) before the
// registration is deleted; the DaemonSet's pod is not evicted.
func TestDrainEvictsThenDeregisters(t *testing.T) {
	host := drainFixture()
	var evictions []string
	refused := false
	host.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		name := a.(k8stesting.CreateAction).GetObject().(metav1.Object).GetName()
		evictions = append(evictions, name)
		if !refused {
			refused = true
			return true, nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
		}
		// leafsync deletes the member copy, then finishes the host pod.
		if err := host.Tracker().Delete(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, "apps", name); err != nil {
			return true, nil, err
		}
		return true, nil, nil
	})
	var out bytes.Buffer
	if err := deregister(context.Background(), host, noMemberPods, "ls", []string{"a"}, 10*time.Second, false, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if strings.Join(evictions, ",") != "db-0,db-0" {
		t.Errorf("evictions %v, want db-0 refused once then granted (and never the DaemonSet's pod)", evictions)
	}
	n, err := host.CoreV1().Nodes().Get(context.Background(), "leaf-a", metav1.GetOptions{})
	if err != nil || !n.Spec.Unschedulable {
		t.Errorf("leaf not cordoned: %v %v", n, err)
	}
	if names := secretNames(t, host); len(names) != 0 {
		t.Errorf("registration not deleted after the drain: %v", names)
	}
	for _, want := range []string{"leaf-a cordoned", "evicting pod apps/db-0 on leaf-a", "1 pod(s) evicted"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestDeregisterDrainTimeout: a pod that cannot leave (its member copy is
// never confirmed gone) keeps the registration, and the error names it.
func TestDeregisterDrainTimeout(t *testing.T) {
	host := drainFixture()
	host.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return a.GetSubresource() == "eviction", nil, nil // granted, but the pod stays (Terminating)
	})
	var out bytes.Buffer
	err := deregister(context.Background(), host, noMemberPods, "ls", []string{"a"}, 200*time.Millisecond, false, &out)
	if err == nil {
		t.Fatal("deregister returned while a pod is still on the leaf")
	}
	for _, want := range []string{"apps/db-0", "Nothing was deregistered", "--orphan"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if names := secretNames(t, host); len(names) != 1 {
		t.Errorf("registration deleted although the drain did not finish: %v", names)
	}
}

// TestDeregisterOrphan: --orphan evicts nothing and lists the member pods
// it leaves running: as the member says, or, when it cannot be read, as
// the leaf's pods say.
func TestDeregisterOrphan(t *testing.T) {
	for _, c := range []struct {
		memberPods memberPodsFunc
		want       string
	}{
		{func(context.Context, *corev1.Secret) ([]string, error) {
			return []string{"apps/db-0", "apps/web-1"}, nil
		},
			"2 pod(s) leafsync made in member a are left running: apps/db-0, apps/web-1."},
		{func(context.Context, *corev1.Secret) ([]string, error) { return nil, errors.New("connection refused") },
			"member a cannot be read (connection refused): whatever leafsync made there is left running (its leaf has 1 pod(s) with a member copy: apps/db-0)"},
		{noMemberPods, "member a holds no pod leafsync made; nothing is left behind"},
	} {
		host := drainFixture()
		host.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
			if a.GetSubresource() == "eviction" {
				t.Errorf("--orphan evicted %v", a)
			}
			return false, nil, nil
		})
		var out bytes.Buffer
		if err := deregister(context.Background(), host, c.memberPods, "ls", []string{"a"}, time.Second, true, &out); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), c.want) {
			t.Errorf("output lacks %q:\n%s", c.want, out.String())
		}
		n, _ := host.CoreV1().Nodes().Get(context.Background(), "leaf-a", metav1.GetOptions{})
		if n.Spec.Unschedulable {
			t.Error("--orphan cordoned the leaf")
		}
	}
}

// noMemberPods is a member with nothing of leafsync's left in it.
func noMemberPods(context.Context, *corev1.Secret) ([]string, error) { return nil, nil }

// TestDeregisterWaitsForMemberCopies: the leaf is empty, but the member
// still holds a copy (a delete leafsync owes a member that was down):
// the registration stays until a live read finds the member empty, and a
// member that never empties is named in the error.
func TestDeregisterWaitsForMemberCopies(t *testing.T) {
	host := fake.NewClientset(registrationFor("a"))
	reads := 0
	emptiesAfter := func(n int) memberPodsFunc {
		return func(_ context.Context, reg *corev1.Secret) ([]string, error) {
			reads++
			if reads <= n {
				return []string{"apps/db-0"}, nil
			}
			return nil, nil
		}
	}
	var out bytes.Buffer
	err := deregister(context.Background(), host, emptiesAfter(1000), "ls", []string{"a"}, 200*time.Millisecond, false, &out)
	if err == nil || !strings.Contains(err.Error(), "member a (1 pod(s) of leafsync's still in it: apps/db-0)") {
		t.Fatalf("deregister with a copy left in the member: %v", err)
	}
	if names := secretNames(t, host); len(names) != 1 {
		t.Fatalf("registration deleted while a member copy is left: %v", names)
	}
	reads = 0
	if err := deregister(context.Background(), host, emptiesAfter(2), "ls", []string{"a"}, 10*time.Second, false, &out); err != nil {
		t.Fatal(err)
	}
	if reads != 3 || len(secretNames(t, host)) != 0 {
		t.Errorf("after %d reads of the member, registrations %v; want deleted after the third read", reads, secretNames(t, host))
	}
}

// TestDeregisterUnusableRegistration: a registration leafsync refuses (no
// kubeconfig) ran nothing in a member; deregister does not wait to read
// one, and says so.
func TestDeregisterUnusableRegistration(t *testing.T) {
	kubeSystem := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: metav1.NamespaceSystem, UID: "host-id"}}
	host := fake.NewClientset(registrationFor("a"), kubeSystem)
	var out bytes.Buffer
	if err := deregister(context.Background(), host, livePodsInMember(host), "ls", []string{"a"}, 5*time.Second, false, &out); err != nil {
		t.Fatal(err)
	}
	if want := "member a: its registration is not usable"; !strings.Contains(out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, out.String())
	}
	if names := secretNames(t, host); len(names) != 0 {
		t.Errorf("registrations left: %v", names)
	}
}
