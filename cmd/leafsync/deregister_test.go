package main

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/leafsync/leafsync/internal/syncer/registration"
	"github.com/leafsync/leafsync/internal/syncer/shard"
)

func registrationFor(cluster string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Name: "member-" + cluster, Namespace: "ls", UID: types.UID("uid-" + cluster),
		Labels: map[string]string{registration.LabelCluster: cluster},
	}}
}

// TestDeregister: only the named members' Secrets are deleted, other
// Secrets never; a name without a registration is an error that deletes
// nothing.
func TestDeregister(t *testing.T) {
	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "unrelated", Namespace: "ls"}}
	host := fake.NewClientset(registrationFor("a"), registrationFor("b"), other)
	ctx := context.Background()
	var out bytes.Buffer

	err := deregister(ctx, host, noMemberPods, "ls", []string{"a", "nope"}, time.Second, false, &out)
	if err == nil || !strings.Contains(err.Error(), `no registration of member "nope"`) {
		t.Fatalf("deregister of an unknown member: %v", err)
	}
	if names := secretNames(t, host); len(names) != 3 {
		t.Fatalf("a refused deregister deleted something: %v left", names)
	}

	if err := deregister(ctx, host, noMemberPods, "ls", []string{"a"}, time.Second, false, &out); err != nil {
		t.Fatal(err)
	}
	if names := secretNames(t, host); strings.Join(names, ",") != "member-b,unrelated" {
		t.Fatalf("after deregister a: %v", names)
	}
	if err := deregister(ctx, host, noMemberPods, "ls", nil, time.Second, false, &out); err != nil {
		t.Fatal(err)
	}
	if names := secretNames(t, host); strings.Join(names, ",") != "unrelated" {
		t.Fatalf("after deregister --all: %v", names)
	}
}

func secretNames(t *testing.T, host *fake.Clientset) []string {
	t.Helper()
	list, err := host.CoreV1().Secrets("ls").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range list.Items {
		names = append(names, s.Name)
	}
	return names
}

// TestDeregisterWithoutLeafsync: when nothing releases the Secrets (no
// leafsync runs to remove its finalizer), deregister fails after the
// timeout naming the Secret, its status and what to check.
func TestDeregisterWithoutLeafsync(t *testing.T) {
	s := registrationFor("a")
	s.Annotations = map[string]string{registration.AnnotationStatus: "Ready"}
	host := fake.NewClientset(s)
	// The finalizer holds the Secret: a delete only marks it.
	host.PrependReactor("delete", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, nil
	})
	var out bytes.Buffer
	err := deregister(context.Background(), host, noMemberPods, "ls", nil, 200*time.Millisecond, false, &out)
	if err == nil {
		t.Fatal("deregister returned while the Secret is still there")
	}
	for _, want := range []string{"member-a (status: Ready)", "is it running?", "kubectl leafsync status -n ls"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}

// TestUninstallWithoutLeafsync: with members registered and no leafsync
// pod ready, uninstall fails at once, says what to do, and deletes
// nothing.
func TestUninstallWithoutLeafsync(t *testing.T) {
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "leafsync", Namespace: "ls"}}
	host := fake.NewClientset(dep, registrationFor("a"))
	var out bytes.Buffer
	err := uninstall(context.Background(), host, noMemberPods, "ls", "leafsync", "", time.Minute, false, &out)
	if err == nil || !strings.Contains(err.Error(), "no ready replica") || !strings.Contains(err.Error(), "nothing was deleted") || !strings.Contains(err.Error(), "--no-hooks") {
		t.Fatalf("uninstall without a running leafsync: %v", err)
	}
	if names := secretNames(t, host); len(names) != 1 {
		t.Errorf("registrations after the refused uninstall: %v", names)
	}
}

// TestMain paces deregister's polls of the fake API server at 10ms
// instead of production's second: the tests wait on rounds, not on time.
func TestMain(m *testing.M) {
	drainPoll, cleanupPoll = 10*time.Millisecond, 10*time.Millisecond
	os.Exit(m.Run())
}

// TestDeleteRingLeases: uninstall deletes the shard and member Leases of
// its own ring only; another installation's in the namespace stay, and
// without a ring nothing is deleted.
func TestDeleteRingLeases(t *testing.T) {
	lease := func(name, ring string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ls", Labels: map[string]string{shard.LabelRing: ring}}}
	}
	host := fake.NewClientset(lease("leafsync-shard-a-0", "a"), lease("leafsync-member-m1", "a"), lease("leafsync-shard-b-0", "b"),
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "leafsync-leader", Namespace: "ls"}})
	names := func() []string {
		l, err := host.CoordinationV1().Leases("ls").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, x := range l.Items {
			out = append(out, x.Name)
		}
		slices.Sort(out)
		return out
	}
	if n, err := deleteRingLeases(context.Background(), host, "ls", ""); err != nil || n != 0 || len(names()) != 4 {
		t.Fatalf("no ring: deleted %d (%v), left %v", n, err, names())
	}
	n, err := deleteRingLeases(context.Background(), host, "ls", "a")
	if err != nil || n != 2 {
		t.Fatalf("ring a: deleted %d, %v", n, err)
	}
	if got, want := names(), []string{"leafsync-leader", "leafsync-shard-b-0"}; !slices.Equal(got, want) {
		t.Fatalf("left %v, want %v", got, want)
	}
}
