package main

import (
	"bytes"
	"context"
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

	"github.com/leafsync/leafsync/leafnode"
	"github.com/leafsync/leafsync/syncer/podsync"
)

// drainFixture: member a's leaf with one synced pod, and a DaemonSet's pod
// that a drain leaves alone.
func drainFixture() *fake.Clientset {
	leaf := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "leaf-a", Labels: map[string]string{leafnode.LabelCluster: "a"}}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "db-0", Namespace: "apps", UID: "db-0-uid",
			Finalizers: []string{podsync.FinalizerMemberPod}, Annotations: map[string]string{podsync.AnnotationMemberUID: "m-uid"}},
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

// TestDeregisterDrains: the leaf is cordoned and its synced pod evicted
// (an eviction a PodDisruptionBudget refuses is retried) before the
// registration is deleted; the DaemonSet's pod is not evicted.
func TestDeregisterDrains(t *testing.T) {
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
	if err := deregister(context.Background(), host, "ls", []string{"a"}, 10*time.Second, false, &out); err != nil {
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
	err := deregister(context.Background(), host, "ls", []string{"a"}, 1500*time.Millisecond, false, &out)
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
// it leaves running.
func TestDeregisterOrphan(t *testing.T) {
	host := drainFixture()
	host.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "eviction" {
			t.Errorf("--orphan evicted %v", a)
		}
		return false, nil, nil
	})
	var out bytes.Buffer
	if err := deregister(context.Background(), host, "ls", []string{"a"}, time.Second, true, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"1 pod(s) of leaf leaf-a are left running in the member: apps/db-0", "run twice"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	n, _ := host.CoreV1().Nodes().Get(context.Background(), "leaf-a", metav1.GetOptions{})
	if n.Spec.Unschedulable {
		t.Error("--orphan cordoned the leaf")
	}
}
