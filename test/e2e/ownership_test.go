//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/leafsync/leafsync/internal/syncer/registration"
	"github.com/leafsync/leafsync/test/harness"
)

// secretPhase is a registration Secret's status and reason annotations.
func (f *fleet) secretPhase(t *testing.T, name string) string {
	t.Helper()
	s, err := f.host.Client().CoreV1().Secrets(leafsyncNamespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s.Annotations[registration.AnnotationStatus] + "/" + s.Annotations[registration.AnnotationStatusReason]
}

// leafsyncWrites returns the audit events of leafsync's writes to a Node,
// its Lease, or pods bound to it (by pod name), from since on.
func leafsyncWrites(t *testing.T, f *fleet, node string, pods []string, since time.Time) []harness.AuditEvent {
	t.Helper()
	evs, err := f.host.AuditEvents(func(e harness.AuditEvent) bool {
		if !strings.HasPrefix(e.UserAgent, "leafsync") || e.RequestReceived.Before(since) {
			return false
		}
		o := e.ObjectRef
		switch o.Resource {
		case "nodes":
			return o.Name == node
		case "leases":
			return o.Namespace == corev1.NamespaceNodeLease && o.Name == node
		case "pods":
			for _, p := range pods {
				if o.Name == p {
					return true
				}
			}
		}
		return false
	})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// TestLeafOwnership: a leaf name is never taken from a Node leafsync does
// not own, nor from another registration.
//   - a registration naming the host's real worker as its leaf is refused:
//     the worker, its Lease and its pods get no write from leafsync, also
//     after the Secret is deleted;
//   - a registration naming another member's leaf is refused (Duplicate):
//     that leaf stays Ready in every watched version and its pod keeps
//     running in its member.
//
// (Before, leafsync tainted the worker, posted its status, renewed its
// kubelet Lease, synced its pods into the member and deleted the Node on
// deregistration; two registrations of one leaf fought over it.)
func TestLeafOwnership(t *testing.T) {
	f := newPodSyncFleet(t, "member-a", "member-b")
	hc := f.host.Client()
	ctx := context.Background()
	const worker = "host-worker-0"
	victim := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "on-worker", Namespace: appsNS},
		Spec: corev1.PodSpec{
			NodeName:                      worker,
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers:                    []corev1.Container{{Name: "app", Image: "busybox"}},
		},
	}
	if _, err := hc.CoreV1().Pods(appsNS).Create(ctx, victim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := f.node(t, worker)
	start := time.Now()
	f.startLeafsync(t, "leafsync")

	// member-b's leaf, named leaf-shared, with a pod on it.
	f.register(t, "member-b", map[string]string{registration.AnnotationLeafName: "leaf-shared"})
	f.waitLeafReady(t, "leaf-shared", time.Minute)
	f.createWorkloads(t, []harness.LeafWorkload{leafWorkload("web", 1, "leaf-shared")}, nil)
	webPods := waitHostPodsReady(t, f, "app=web", 1, time.Minute, "leaf-shared")
	memberPod, err := f.members["member-b"].Client().CoreV1().Pods(appsNS).Get(ctx, webPods[0].Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec := recordNode(t, f.host, "leaf-shared")

	t.Run("a foreign Node's name is refused", func(t *testing.T) {
		f.register(t, "member-a", map[string]string{registration.AnnotationLeafName: worker})
		harness.Eventually(t, 30*time.Second, "member-a's Secret refused", func() error {
			if got := f.secretPhase(t, "member-member-a"); got != "Refused/LeafNameTaken" {
				return fmt.Errorf("status %q", got)
			}
			return nil
		})
		time.Sleep(5 * time.Second) // room for any write that would follow
		if err := hc.CoreV1().Secrets(leafsyncNamespace).Delete(ctx, "member-member-a", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		f.waitGone(t, "member-a's Secret", func() error {
			_, err := hc.CoreV1().Secrets(leafsyncNamespace).Get(ctx, "member-member-a", metav1.GetOptions{})
			return err
		})
		time.Sleep(3 * time.Second)
		for _, e := range leafsyncWrites(t, f, worker, []string{victim.Name}, start) {
			t.Errorf("leafsync wrote %s %s/%s %s of a Node it does not own", e.Verb, e.ObjectRef.Resource, e.ObjectRef.Subresource, e.ObjectRef.Name)
		}
		after := f.node(t, worker)
		if after.UID != before.UID || after.Labels[registration.LabelCluster] != "" || len(after.Spec.Taints) != len(before.Spec.Taints) {
			t.Errorf("worker changed: uid %s→%s labels %v taints %v→%v", before.UID, after.UID, after.Labels, before.Spec.Taints, after.Spec.Taints)
		}
		p, err := hc.CoreV1().Pods(appsNS).Get(ctx, victim.Name, metav1.GetOptions{})
		if err != nil || len(p.Finalizers) != 0 || p.DeletionTimestamp != nil {
			t.Errorf("the worker's pod: %v, finalizers %v", err, p.Finalizers)
		}
		if pods, _ := f.members["member-a"].Client().CoreV1().Pods(appsNS).List(ctx, metav1.ListOptions{}); len(pods.Items) != 0 {
			t.Errorf("%d pods copied into member-a", len(pods.Items))
		}
	})

	t.Run("another member's leaf name is refused", func(t *testing.T) {
		f.register(t, "member-a", map[string]string{registration.AnnotationLeafName: "leaf-shared"})
		harness.Eventually(t, 30*time.Second, "member-a's Secret a duplicate", func() error {
			if got := f.secretPhase(t, "member-member-a"); got != "Duplicate/DuplicateLeafName" {
				return fmt.Errorf("status %q", got)
			}
			return nil
		})
		time.Sleep(10 * time.Second)
		for _, o := range rec.observations(t) {
			if o.ready != corev1.ConditionTrue || o.node.Labels[registration.LabelCluster] != "member-b" {
				t.Errorf("leaf-shared at %s: Ready=%s cluster=%q", o.at.Format(time.StampMilli), o.ready, o.node.Labels[registration.LabelCluster])
			}
		}
		mp, err := f.members["member-b"].Client().CoreV1().Pods(appsNS).Get(ctx, memberPod.Name, metav1.GetOptions{})
		if err != nil || mp.UID != memberPod.UID || mp.DeletionTimestamp != nil {
			t.Errorf("member-b's pod: %v (uid %s, was %s)", err, mp.UID, memberPod.UID)
		}
		if pods, _ := f.members["member-a"].Client().CoreV1().Pods(appsNS).List(ctx, metav1.ListOptions{}); len(pods.Items) != 0 {
			t.Errorf("%d pods duplicated into member-a", len(pods.Items))
		}
	})
}

// TestLeafRenameWithPods: renaming a member's leaf while pods are bound to
// it is refused (the member keeps its leaf, the pods keep running); once
// the pods are gone the rename applies. No pod is left Terminating on a
// leaf nobody serves, and no member pod is orphaned. (Before, the rename
// deleted the old leaf at once and stranded its pods behind leafsync's
// finalizer.)
func TestLeafRenameWithPods(t *testing.T) {
	f := newPodSyncFleet(t, "member-a")
	hc := f.host.Client()
	ctx := context.Background()
	f.startLeafsync(t, "leafsync")
	f.register(t, "member-a", nil)
	const leaf, renamed = "leaf-member-a", "leaf-renamed"
	f.waitLeafReady(t, leaf, time.Minute)
	f.createWorkloads(t, []harness.LeafWorkload{leafWorkload("web", 2, leaf)}, nil)
	pods := waitHostPodsReady(t, f, "app=web", 2, time.Minute, leaf)
	memberBefore := listPods(t, f.members["member-a"].Cluster, "app=web")
	waitStatus(t, f, "member-member-a", "Connected", "MemberConnected", 30*time.Second)

	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, registration.AnnotationLeafName, renamed)
	if _, err := hc.CoreV1().Secrets(leafsyncNamespace).Patch(ctx, "member-member-a", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// A liveness bound. The refusal's status write may wait out the
	// status spacing (5s after the MemberConnected write just before);
	// until TestLeafRenameRefusalNotDelayedByRetry's fix the re-look of
	// 30s replaced that wait, and a 30s bound here lost the race once.
	harness.Eventually(t, 45*time.Second, "the rename refused while pods are on the leaf", func() error {
		if got := f.secretPhase(t, "member-member-a"); !strings.HasSuffix(got, "/LeafRenameWithPods") {
			return fmt.Errorf("status %q", got)
		}
		return nil
	})
	if got := harness.NodeReady(f.node(t, leaf)); got != corev1.ConditionTrue {
		t.Errorf("the old leaf is Ready=%s while the rename is refused", got)
	}
	for _, p := range waitHostPodsReady(t, f, "app=web", 2, 10*time.Second, leaf) {
		if p.UID != findPod(pods, p.Name).UID {
			t.Errorf("host pod %s replaced while the rename was refused", p.Name)
		}
	}
	for _, mp := range listPods(t, f.members["member-a"].Cluster, "app=web") {
		if mp.UID != findPod(memberBefore, mp.Name).UID {
			t.Errorf("member pod %s replaced while the rename was refused", mp.Name)
		}
	}

	// The pods go: the rename applies.
	if err := hc.AppsV1().Deployments(appsNS).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 30*time.Second, "no pod left on the old leaf", func() error {
		if n := len(listPods(t, f.host, "app=web")); n != 0 {
			return fmt.Errorf("%d host pods left (Terminating: stranded?)", n)
		}
		return nil
	})
	f.waitLeafReady(t, renamed, 90*time.Second)
	f.waitGone(t, "the old leaf", func() error { _, err := hc.CoreV1().Nodes().Get(ctx, leaf, metav1.GetOptions{}); return err })
	if n := len(listPods(t, f.members["member-a"].Cluster, "app=web")); n != 0 {
		t.Errorf("%d member pods orphaned by the rename", n)
	}
}
