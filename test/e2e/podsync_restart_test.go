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

	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
	"github.com/leafsync/leafsync/internal/syncer/store/kubestore"
	"github.com/leafsync/leafsync/test/harness"
)

// TestPodSyncOwedDeleteSurvivesRestart: a user deletes a StatefulSet pod
// while its member is down. The delete is owed (recorded in the state
// store), the host pod is reaped and recreated. leafsync is then killed and
// a new one started before the member comes back. The new leafsync must
// still know the delete was asked for: the old member pod is deleted and
// the recreated pod starts afresh. Had the record been lost, the member pod
// would look like a stale eviction and be adopted instead.
func TestPodSyncOwedDeleteSurvivesRestart(t *testing.T) {
	f := newPodSyncFleet(t, "member-a")
	member := f.members["member-a"]
	hc := f.host.Client()
	ctx := context.Background()
	const leaf = "leaf-member-a"
	first := f.startLeafsync(t, "leafsync-1")
	f.register(t, "member-a", nil)
	f.waitLeafReady(t, leaf, time.Minute)
	db := leafWorkload("db", 2, leaf)
	db.TolerationSeconds = 3600 // no eviction: the only delete is the user's
	f.createWorkloads(t, nil, []harness.LeafWorkload{db})
	before := waitHostPodsReady(t, f, "app=db", 2, 90*time.Second, leaf)
	waitOneToOne(t, f, "member-a", leaf, 10*time.Second)
	memberBefore := map[string]corev1.Pod{}
	for _, p := range listPods(t, member.Cluster, "app=db") {
		memberBefore[p.Name] = p
	}

	member.proxy.Cut()
	cutAt := time.Now()
	if err := hc.CoreV1().Pods(appsNS).Delete(ctx, "db-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, notReadyAfter+reapAfter+30*time.Second, "db-0 reaped and recreated by its StatefulSet", func() error {
		p, err := hc.CoreV1().Pods(appsNS).Get(ctx, "db-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.UID == findPod(before, "db-0").UID {
			return fmt.Errorf("still the old pod (deletionTimestamp %v)", p.DeletionTimestamp)
		}
		return nil
	})
	t.Logf("db-0 reaped and recreated %s after the cut", time.Since(cutAt).Round(time.Millisecond))

	// The owed delete lives only in the state store now: restart leafsync.
	first.Kill()
	f.startLeafsync(t, "leafsync-2")
	if err := member.proxy.Heal(); err != nil {
		t.Fatal(err)
	}
	healAt := time.Now()
	f.waitLeafReady(t, leaf, readyAfter+probeInterval+writeSlack+30*time.Second)
	after := waitHostPodsReady(t, f, "app=db", 2, 90*time.Second, leaf)
	waitOneToOne(t, f, "member-a", leaf, 30*time.Second)
	t.Logf("host and member one to one %s after the heal", time.Since(healAt).Round(time.Millisecond))

	mp0, err := member.Client().CoreV1().Pods(appsNS).Get(ctx, "db-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if mp0.UID == memberBefore["db-0"].UID {
		t.Errorf("member pod db-0 was adopted (uid %s): the owed user delete was lost across the restart", mp0.UID)
	}
	if mp0.Labels[podmeta.LabelHostUID] != string(findPod(after, "db-0").UID) {
		t.Errorf("member pod db-0 is for host uid %s, host pod is %s", mp0.Labels[podmeta.LabelHostUID], findPod(after, "db-0").UID)
	}
	mp1, err := member.Client().CoreV1().Pods(appsNS).Get(ctx, "db-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if mp1.UID != memberBefore["db-1"].UID || findPod(after, "db-1").UID != findPod(before, "db-1").UID {
		t.Errorf("db-1, never deleted, was replaced: member uid %s (before %s)", mp1.UID, memberBefore["db-1"].UID)
	}
}

// TestPodSyncOwedDeleteSurvivesDeletedRecord: a user deletes a StatefulSet
// pod while its member is down; the delete is owed and recorded. Then the
// member's state ConfigMaps (its head and ledger parts) are deleted by
// hand. They are rebuilt from memory at the next write (owed delete included), and when the member
// comes back the old member pod is deleted, not adopted. (Before, the
// deleted record was merged with nothing and the owed delete dropped.)
func TestPodSyncOwedDeleteSurvivesDeletedRecord(t *testing.T) {
	f := newPodSyncFleet(t, "member-a")
	member := f.members["member-a"]
	hc := f.host.Client()
	ctx := context.Background()
	const leaf = "leaf-member-a"
	f.startLeafsync(t, "leafsync")
	f.register(t, "member-a", nil)
	f.waitLeafReady(t, leaf, time.Minute)
	db := leafWorkload("db", 1, leaf)
	db.TolerationSeconds = 3600 // no eviction: the only delete is the user's
	f.createWorkloads(t, nil, []harness.LeafWorkload{db})
	before := waitHostPodsReady(t, f, "app=db", 1, 90*time.Second, leaf)
	waitOneToOne(t, f, "member-a", leaf, 10*time.Second)
	memberBefore := listPods(t, member.Cluster, "app=db")[0]

	member.proxy.Cut()
	if err := hc.CoreV1().Pods(appsNS).Delete(ctx, "db-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The member's records: its head (the engine's snapshot) and the
	// ledger parts its pending deletes are spread over (docs/state-store.md).
	records := metav1.ListOptions{LabelSelector: kubestore.LabelComponent + "=" + kubestore.ComponentState + "," + kubestore.LabelCluster + "=member-a"}
	owedIn := func() (bool, error) {
		cms, err := hc.CoreV1().ConfigMaps(leafsyncNamespace).List(ctx, records)
		if err != nil {
			return false, err
		}
		for _, cm := range cms.Items {
			if strings.Contains(cm.Data[kubestore.KeyState], string(findPod(before, "db-0").UID)) {
				return true, nil
			}
		}
		return false, nil
	}
	harness.Eventually(t, notReadyAfter+reapAfter+30*time.Second, "the owed delete recorded", func() error {
		if ok, err := owedIn(); err != nil || !ok {
			return fmt.Errorf("not in member-a's records yet (%v)", err)
		}
		return nil
	})
	if err := hc.CoreV1().ConfigMaps(leafsyncNamespace).DeleteCollection(ctx, metav1.DeleteOptions{}, records); err != nil {
		t.Fatal(err)
	}
	deletedAt := time.Now()
	harness.Eventually(t, 30*time.Second, "the records rebuilt with the owed delete", func() error {
		if ok, err := owedIn(); err != nil || !ok {
			return fmt.Errorf("not rebuilt yet (%v)", err)
		}
		return nil
	})
	t.Logf("record rebuilt with its owed delete %s after it was deleted", time.Since(deletedAt).Round(time.Millisecond))

	if err := member.proxy.Heal(); err != nil {
		t.Fatal(err)
	}
	f.waitLeafReady(t, leaf, readyAfter+probeInterval+writeSlack+30*time.Second)
	after := waitHostPodsReady(t, f, "app=db", 1, 90*time.Second, leaf)
	waitOneToOne(t, f, "member-a", leaf, 30*time.Second)
	mp, err := member.Client().CoreV1().Pods(appsNS).Get(ctx, "db-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if mp.UID == memberBefore.UID {
		t.Errorf("member pod db-0 was adopted (uid %s): the owed user delete was lost with the record", mp.UID)
	}
	if mp.Labels[podmeta.LabelHostUID] != string(findPod(after, "db-0").UID) {
		t.Errorf("member pod db-0 is for host uid %s, host pod is %s", mp.Labels[podmeta.LabelHostUID], findPod(after, "db-0").UID)
	}
}
