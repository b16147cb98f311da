//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
	"github.com/leafsync/leafsync/test/harness"
)

// The member identity, the claim and the host label (docs/annotations.md),
// spelled out so that the test also builds on a leafsync without them.
const (
	annMemberIdentity     = "leafsync.io/member-identity"
	labelHost             = "leafsync.io/host"
	reasonIdentityChanged = "MemberIdentityChanged"
	reasonMemberClaimed   = "MemberClaimed"
	claimNamespace        = "leafsync-system" // in the member
)

// TestMemberIdentityPinned: a registration whose kubeconfig is repointed at
// another member is refused with a Warning Event naming both identities,
// before and after a leafsync restart, and touches nothing: over two
// minutes, no version of a host pod is Failed, no pod is deleted in
// either member, nothing is created in the other member, and the leaf is
// never NotReady. Put back, the same member pods keep running.
func TestMemberIdentityPinned(t *testing.T) {
	f := newPodSyncFleet(t, "member-a", "member-b")
	ls := f.startLeafsync(t, "leafsync")
	f.register(t, "member-a", nil)
	const leaf, secret = "leaf-member-a", "member-member-a"
	f.waitLeafReady(t, leaf, time.Minute)
	f.createWorkloads(t, []harness.LeafWorkload{leafWorkload("web", 2, leaf)}, nil)
	hostBefore := waitHostPodsReady(t, f, "app=web", 2, 90*time.Second, leaf)
	waitOneToOne(t, f, "member-a", leaf, time.Minute)
	a, b := f.members["member-a"], f.members["member-b"]
	idA, idB, hostID := clusterID(t, a.Cluster), clusterID(t, b.Cluster), clusterID(t, f.host)

	s := waitStatus(t, f, secret, "Connected", "MemberConnected", 30*time.Second)
	if got := s.Annotations[annMemberIdentity]; got != idA {
		t.Errorf("recorded identity %q, want member-a's %s", got, idA)
	}
	if h := claimHolder(t, a.Cluster, "member-a"); h != hostID {
		t.Errorf("claim in member-a held by %q, want the host %s", h, hostID)
	}
	memberBefore := listPods(t, a.Cluster, managedPodSelector)
	for _, p := range memberBefore {
		if p.Labels[labelHost] != hostID {
			t.Errorf("member pod %s has %s=%q, want %s", p.Name, labelHost, p.Labels[labelHost], hostID)
		}
	}

	hostRec := recordPods(t, f.host, "")
	aRec := recordPods(t, a.Cluster, "")
	bRec := recordPods(t, b.Cluster, "")
	leafRec := recordNode(t, f.host, leaf)
	start := time.Now()

	// The kubeconfig now reaches member-b (with credentials that work there).
	// (Subtests: a missing refusal is reported, and the observation of
	// what was touched still runs to its end.)
	patchKubeconfig(t, f, secret, b.KubeconfigVia(b.proxy.Addr()))
	t.Run("refused", func(t *testing.T) {
		waitStatus(t, f, secret, "Connected", reasonIdentityChanged, 30*time.Second)
		ev := waitEvent(t, f, secret, reasonIdentityChanged, start, 10*time.Second)
		if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Note, idA) || !strings.Contains(ev.Note, idB) || !strings.Contains(ev.Note, annMemberIdentity+"-") {
			t.Errorf("event %s: %q; want a Warning naming %s, %s and how to confirm", ev.Type, ev.Note, idA, idB)
		}
		t.Logf("refused %.1fs after the kubeconfig changed", time.Since(start).Seconds())
	})

	// leafsync restarted on the repointed Secret: no previous connection
	// to keep, still nothing touched.
	if err := ls.Terminate(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	f.startLeafsync(t, "leafsync-restarted")
	t.Run("refused after a restart", func(t *testing.T) {
		waitStatus(t, f, secret, "Refused", reasonIdentityChanged, time.Minute)
		t.Logf("refused %.1fs after the restart", time.Since(restarted).Seconds())
	})

	time.Sleep(time.Until(start.Add(2 * time.Minute)))

	// Put back: the same member pods and host pods carry on.
	patchKubeconfig(t, f, secret, a.KubeconfigVia(a.proxy.Addr()))
	t.Run("restored", func(t *testing.T) {
		waitStatus(t, f, secret, "Connected", "MemberConnected", time.Minute)
		waitOneToOne(t, f, "member-a", leaf, time.Minute)
		hostAfter := waitHostPodsReady(t, f, "app=web", 2, time.Minute, leaf)
		if err := sameUIDs(hostBefore, hostAfter); err != nil {
			t.Errorf("host pods: %v", err)
		}
		if err := sameUIDs(memberBefore, listPods(t, a.Cluster, managedPodSelector)); err != nil {
			t.Errorf("member pods: %v", err)
		}
	})

	// What was true all along, over every watched version.
	for _, e := range hostRec.events(t) {
		if e.typ == watch.Deleted || e.pod.Status.Phase == corev1.PodFailed {
			t.Errorf("host pod %s %s phase %s at %s", e.pod.Name, e.typ, e.pod.Status.Phase, e.at.Format(time.StampMilli))
		}
	}
	for _, e := range aRec.events(t) {
		if e.typ == watch.Deleted || e.pod.DeletionTimestamp != nil {
			t.Errorf("member-a pod %s deleted at %s", e.pod.Name, e.at.Format(time.StampMilli))
		}
	}
	for _, e := range bRec.events(t) {
		t.Errorf("member-b pod %s %s at %s: nothing may be created there", e.pod.Name, e.typ, e.at.Format(time.StampMilli))
	}
	for _, o := range leafRec.observations(t) {
		if o.ready != corev1.ConditionTrue {
			t.Fatalf("%s Ready=%q at %s", leaf, o.ready, o.at.Format(time.StampMilli))
		}
	}
	if h := claimHolder(t, b.Cluster, "member-a"); h != "" {
		t.Errorf("a claim was written into member-b (host %s)", h)
	}
	if got := getSecret(t, f, secret).Annotations[annMemberIdentity]; got != idA {
		t.Errorf("recorded identity is now %q, want %s", got, idA)
	}
}

// TestTwoHostsOneMember: a second host whose leafsync registers the same
// member under the same cluster name is refused (its Secret says which
// host holds the claim), and never deletes, adopts or relabels the first
// host's pods: checked over every watched version of the member's pods.
func TestTwoHostsOneMember(t *testing.T) {
	ctx := context.Background()
	f := newPodSyncFleet(t, "member-a")
	f.startLeafsync(t, "leafsync")
	f.register(t, "member-a", nil)
	const leaf = "leaf-member-a"
	f.waitLeafReady(t, leaf, time.Minute)
	f.createWorkloads(t, []harness.LeafWorkload{leafWorkload("web", 2, leaf)}, nil)
	waitHostPodsReady(t, f, "app=web", 2, 90*time.Second, leaf)
	waitOneToOne(t, f, "member-a", leaf, time.Minute)
	a := f.members["member-a"]
	hostID := clusterID(t, f.host)
	before := map[types.UID]string{}
	for _, p := range listPods(t, a.Cluster, managedPodSelector) {
		before[p.UID] = p.Labels[podmeta.LabelHostUID]
	}
	aRec := recordPods(t, a.Cluster, "")

	t.Run("second host", func(t *testing.T) {
		host2 := harness.StartHost(t, harness.HostOptions{})
		for _, ns := range []string{leafsyncNamespace, appsNS} {
			if err := host2.EnsureNamespace(ctx, ns); err != nil {
				t.Fatal(err)
			}
		}
		harness.StartLeafsync(t, "leafsync-host2", host2.Kubeconfig(), "--namespace="+leafsyncNamespace, "--config="+f.config)
		// Forward: an old leafsync would delete what it takes for orphans at once.
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "member-a", Namespace: leafsyncNamespace,
				Labels:      map[string]string{"leafsync.io/cluster": "member-a"},
				Annotations: map[string]string{"leafsync.io/stale-eviction-policy": "Forward"}},
			Data: map[string][]byte{"kubeconfig": a.KubeconfigVia(a.proxy.Addr())},
		}
		if _, err := host2.Client().CoreV1().Secrets(leafsyncNamespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, time.Minute, "second host's registration refused", func() error {
			s, err := host2.Client().CoreV1().Secrets(leafsyncNamespace).Get(ctx, "member-a", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if s.Annotations[annStatus] != "Refused" || s.Annotations[annStatusReason] != reasonMemberClaimed || !strings.Contains(s.Annotations[annStatusMessage], hostID) {
				return fmt.Errorf("status %s/%s: %s", s.Annotations[annStatus], s.Annotations[annStatusReason], s.Annotations[annStatusMessage])
			}
			return nil
		})
		// Several of the second host's pod-sync resyncs (5s).
		time.Sleep(30 * time.Second)
	})

	for _, e := range aRec.events(t) {
		p := e.pod
		switch {
		case e.typ == watch.Deleted || p.DeletionTimestamp != nil:
			t.Errorf("member pod %s deleted at %s", p.Name, e.at.Format(time.StampMilli))
		case before[p.UID] == "":
			t.Errorf("member pod %s (%s) created at %s", p.Name, p.UID, e.at.Format(time.StampMilli))
		case p.Labels[podmeta.LabelHostUID] != before[p.UID] || p.Labels[labelHost] != hostID:
			t.Errorf("member pod %s relabelled at %s: %s=%s %s=%s", p.Name, e.at.Format(time.StampMilli),
				podmeta.LabelHostUID, p.Labels[podmeta.LabelHostUID], labelHost, p.Labels[labelHost])
		}
	}
	if h := claimHolder(t, a.Cluster, "member-a"); h != hostID {
		t.Errorf("claim now held by %q, want %s", h, hostID)
	}
	waitOneToOne(t, f, "member-a", leaf, 10*time.Second)
}

// clusterID is a cluster's identity: the UID of its kube-system namespace.
func clusterID(t *testing.T, c *harness.Cluster) string {
	t.Helper()
	ns, err := c.Client().CoreV1().Namespaces().Get(context.Background(), "kube-system", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return string(ns.UID)
}

// claimHolder is the host identity in a member's claim for cluster ("" if
// there is none).
func claimHolder(t *testing.T, c *harness.Cluster, cluster string) string {
	t.Helper()
	cm, err := c.Client().CoreV1().ConfigMaps(claimNamespace).Get(context.Background(), "leafsync-claim-"+cluster, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ""
	} else if err != nil {
		t.Fatal(err)
	}
	return cm.Data["host"]
}

// sameUIDs reports a difference between two sets of pods (by name, UID).
func sameUIDs(before, after []corev1.Pod) error {
	want := map[string]types.UID{}
	for _, p := range before {
		want[p.Name] = p.UID
	}
	got := map[string]types.UID{}
	for _, p := range after {
		if active(&p) {
			got[p.Name] = p.UID
		}
	}
	if fmt.Sprint(want) != fmt.Sprint(got) {
		return fmt.Errorf("before %v, after %v", want, got)
	}
	return nil
}
