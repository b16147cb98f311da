//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
	"github.com/leafsync/leafsync/test/harness"
)

// TestDeposedLeaderCannotDeleteAnAdoptedPod: two replicas. The leader (A)
// defers a stale eviction of a StatefulSet pod (the member pod is kept
// until a replacement comes) and is then frozen (SIGSTOP: a long GC pause,
// a frozen VM), and while frozen it is partitioned: its host link is cut
// and its member connections are dropped. The standby (B) takes over, the
// StatefulSet recreates the pod, and B adopts the member pod that still
// runs: same member UID, new host UID. A is resumed after its deferral has
// expired. Its caches are stale (it sees no replacement, and the member
// pod as the evicted pod's) and, until its leader-election renewal fails,
// it believes it leads: it decides to delete the member pod. That delete
// must not reach the member: A cannot confirm it is still the store's
// writer, and the member pod now stands for another host pod. (Before,
// member deletes were fenced by the member UID alone, which adoption
// keeps, and A deleted the adopted pod.)
func TestDeposedLeaderCannotDeleteAnAdoptedPod(t *testing.T) {
	f := newPodSyncFleet(t, "member-a")
	member := f.members["member-a"]
	hc := f.host.Client()
	ctx := context.Background()
	const leaf = "leaf-member-a"

	// A reaches the host through a link of its own, so that it alone can be
	// partitioned.
	linkA := harness.NewFaultProxy(t, "host-link-a", f.host.Addr())
	first := harness.StartLeafsync(t, "leafsync-a", f.host.KubeconfigVia(linkA.Addr()),
		"--namespace="+leafsyncNamespace, "--config="+f.config, "--leader-elect")
	var firstID string
	harness.Eventually(t, 30*time.Second, "first replica leads", func() (err error) {
		firstID, err = f.leader(ctx)
		return err
	})
	f.startLeafsync(t, "leafsync-b", "--leader-elect")
	f.register(t, "member-a", nil)
	f.waitLeafReady(t, leaf, time.Minute)
	f.createWorkloads(t, nil, []harness.LeafWorkload{leafWorkload("db", 1, leaf)})
	old := waitHostPodsReady(t, f, "app=db", 1, 90*time.Second, leaf)[0]
	waitOneToOne(t, f, "member-a", leaf, 10*time.Second)
	memberPod, err := member.Client().CoreV1().Pods(appsNS).Get(ctx, "db-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec := recordPods(t, member.Cluster, "app=db")

	// Hold the StatefulSet's replacement back, and evict db-0 as the taint
	// manager does, while the leaf is Ready: a stale eviction.
	if err := f.host.PauseControllers(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.host.ResumeControllers() })
	old.Status.Conditions = append(old.Status.Conditions, corev1.PodCondition{
		Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: podmeta.CauseTaintManager,
		Message: "e2e: marked as the taint manager marks the pods it evicts", LastTransitionTime: metav1.Now(),
	})
	if _, err := hc.CoreV1().Pods(appsNS).UpdateStatus(ctx, &old, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := hc.CoreV1().Pods(appsNS).Delete(ctx, "db-0", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &old.UID}}); err != nil {
		t.Fatal(err)
	}
	evictedAt := time.Now()
	waitGone(t, hc, "db-0", old.UID)
	if _, ok := hostEvents(t, f, "StaleEvictionDeferred")["db-0"]; !ok {
		t.Fatalf("the leader did not defer the stale eviction of db-0")
	}

	// Freeze A with the deferral in its memory, and partition it: its host
	// link cut, its member connections dropped (the member's proxy drops
	// every connection and takes new ones at once; B reconnects).
	if err := first.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = first.Resume() })
	linkA.Cut()
	member.proxy.Cut()
	if err := member.proxy.Heal(); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 20*time.Second, "the standby leads", func() error {
		id, err := f.leader(ctx)
		if err != nil {
			return err
		}
		if id == firstID {
			return fmt.Errorf("still led by the frozen replica")
		}
		return nil
	})

	// The replacement comes; the new leader adopts the running member pod.
	if err := f.host.ResumeControllers(); err != nil {
		t.Fatal(err)
	}
	replacement := waitHostPodsReady(t, f, "app=db", 1, 60*time.Second, leaf)[0]
	if replacement.UID == old.UID {
		t.Fatalf("db-0 was not replaced")
	}
	harness.Eventually(t, 20*time.Second, "member pod adopted for the replacement", func() error {
		mp, err := member.Client().CoreV1().Pods(appsNS).Get(ctx, "db-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if mp.UID != memberPod.UID || mp.Labels[podmeta.LabelHostUID] != string(replacement.UID) {
			return fmt.Errorf("member pod uid %s host-uid %s; want uid %s host-uid %s",
				mp.UID, mp.Labels[podmeta.LabelHostUID], memberPod.UID, replacement.UID)
		}
		return nil
	})
	if time.Since(evictedAt) > maxDeferral {
		t.Fatalf("adoption took until %s after the eviction, beyond maxDeferral %s: the scene is not set", time.Since(evictedAt).Round(time.Millisecond), maxDeferral)
	}

	// Resume the deposed replica once its deferral has expired, and give it
	// time to act on what it remembers.
	time.Sleep(time.Until(evictedAt.Add(maxDeferral + 3*time.Second)))
	if err := first.Resume(); err != nil {
		t.Fatal(err)
	}
	resumedAt := time.Now()
	time.Sleep(10 * time.Second)

	for _, e := range rec.events(t) {
		if e.typ == watch.Deleted || e.pod.DeletionTimestamp != nil {
			t.Errorf("member pod %s (uid %s) deleted at %s, %s after the deposed replica was resumed",
				e.pod.Name, e.pod.UID, e.at.Format(time.StampMilli), e.at.Sub(resumedAt).Round(time.Millisecond))
		}
	}
	mp, err := member.Client().CoreV1().Pods(appsNS).Get(ctx, "db-0", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("member pod db-0: %v", err)
	}
	if mp.UID != memberPod.UID || mp.Labels[podmeta.LabelHostUID] != string(replacement.UID) {
		t.Errorf("member pod db-0 is uid %s for host %s; want the adopted uid %s for host %s",
			mp.UID, mp.Labels[podmeta.LabelHostUID], memberPod.UID, replacement.UID)
	}
	waitHostPodsReady(t, f, "app=db", 1, 10*time.Second, leaf)

	exited, exitErr := first.Exited()
	logText, _ := os.ReadFile(first.LogPath())
	refused := strings.Count(string(logText), "not deleting member pod")
	t.Logf("deposed replica resumed %s after the eviction (maxDeferral %s); exited: %v (%v); member deletes it refused itself: %d",
		resumedAt.Sub(evictedAt).Round(time.Millisecond), maxDeferral, exited, exitErr, refused)
}
