//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
	"github.com/leafsync/leafsync/test/harness"
)

// hostEvents returns the host Events with reason about pods in appsNS.
func hostEvents(t *testing.T, f *fleet, reason string) map[string]string {
	t.Helper()
	evs, err := f.host.Client().EventsV1().Events(appsNS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range evs.Items {
		if e.Reason == reason && e.Regarding.Kind == "Pod" {
			out[e.Regarding.Name] = e.Note
		}
	}
	return out
}

// TestPodRules: what leafsync will not run, and a delete whose cause holds.
//   - a tolerate-all DaemonSet lands on the leaf: nothing reaches the member,
//     its pod gets no finalizer and an Event saying why;
//   - a pod asking for a member ServiceAccount its registration does not
//     allow: an Event, nothing created in the member;
//   - a user's NoExecute maintenance taint on the leaf: the taint manager
//     evicts the pods and the deletes are forwarded to the member at once
//     (the cause still holds), not deferred as stale evictions.
func TestPodRules(t *testing.T) {
	f := newPodSyncFleet(t, "member-a")
	hc, mc := f.host.Client(), f.members["member-a"].Client()
	ctx := context.Background()
	f.startLeafsync(t, "leafsync")
	f.register(t, "member-a", nil)
	const leaf = "leaf-member-a"
	f.waitLeafReady(t, leaf, time.Minute)

	t.Run("a tolerate-all DaemonSet is not synced", func(t *testing.T) {
		labels := map[string]string{"app": "agent"}
		ds := &appsv1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: appsNS},
			Spec: appsv1.DaemonSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{
						HostNetwork: true,
						Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
						Containers:  []corev1.Container{{Name: "agent", Image: "registry.example/agent:1", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}},
					},
				},
			},
		}
		if _, err := hc.AppsV1().DaemonSets(appsNS).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var onLeaf string
		harness.Eventually(t, 30*time.Second, "the DaemonSet's pod on the leaf, with a NotSyncedDaemonSetPod Event", func() error {
			pods, err := hc.CoreV1().Pods(appsNS).List(ctx, metav1.ListOptions{LabelSelector: "app=agent"})
			if err != nil {
				return err
			}
			for _, p := range pods.Items {
				if p.Spec.NodeName == leaf {
					onLeaf = p.Name
				}
			}
			if onLeaf == "" {
				return fmt.Errorf("no agent pod on %s among %d", leaf, len(pods.Items))
			}
			if _, ok := hostEvents(t, f, "NotSyncedDaemonSetPod")[onLeaf]; !ok {
				return fmt.Errorf("no Event on %s", onLeaf)
			}
			return nil
		})
		time.Sleep(2 * podSyncResync)
		p, err := hc.CoreV1().Pods(appsNS).Get(ctx, onLeaf, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Finalizers) != 0 {
			t.Errorf("DaemonSet pod has finalizers %v", p.Finalizers)
		}
		if pods, _ := mc.CoreV1().Pods(appsNS).List(ctx, metav1.ListOptions{LabelSelector: "app=agent"}); len(pods.Items) != 0 {
			t.Errorf("%d DaemonSet pods in the member", len(pods.Items))
		}
		if err := hc.AppsV1().DaemonSets(appsNS).Delete(ctx, "agent", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a member ServiceAccount the registration does not allow", func(t *testing.T) {
		w := leafWorkload("sa", 1, leaf)
		d := w.Deployment()
		d.Spec.Template.Annotations = map[string]string{podmeta.AnnotationMemberServiceAccount: "deployer"}
		if _, err := hc.AppsV1().Deployments(appsNS).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, 30*time.Second, "a NotSyncedServiceAccount Event", func() error {
			for name, note := range hostEvents(t, f, "NotSyncedServiceAccount") {
				if strings.HasPrefix(name, "sa-") && strings.Contains(note, podmeta.AnnotationMemberServiceAccounts) {
					return nil
				}
			}
			return fmt.Errorf("none yet")
		})
		time.Sleep(podSyncResync)
		if pods, _ := mc.CoreV1().Pods(appsNS).List(ctx, metav1.ListOptions{LabelSelector: "app=sa"}); len(pods.Items) != 0 {
			t.Errorf("%d pods created in the member for a ServiceAccount it did not allow", len(pods.Items))
		}
		if err := hc.AppsV1().Deployments(appsNS).Delete(ctx, "sa", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a user's NoExecute taint: evictions forwarded", func(t *testing.T) {
		w := leafWorkload("maint", 2, leaf)
		f.createWorkloads(t, []harness.LeafWorkload{w}, nil)
		pods := waitHostPodsReady(t, f, "app=maint", 2, time.Minute, leaf)
		before := map[string]bool{}
		for _, p := range listPods(t, f.members["member-a"].Cluster, "app=maint") {
			before[string(p.UID)] = true
		}
		if len(before) != 2 {
			t.Fatalf("%d member pods", len(before))
		}
		n := f.node(t, leaf)
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "maintenance", Value: "true", Effect: corev1.TaintEffectNoExecute})
		if _, err := hc.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		taintedAt := time.Now()
		harness.Eventually(t, 60*time.Second, "the evicted pods' member copies deleted", func() error {
			for _, p := range listPods(t, f.members["member-a"].Cluster, "app=maint") {
				if before[string(p.UID)] && p.DeletionTimestamp == nil {
					return fmt.Errorf("member pod %s still running", p.Name)
				}
			}
			return nil
		})
		t.Logf("member pods of the evicted host pods deleted %s after the maintenance taint", time.Since(taintedAt).Round(time.Millisecond))
		for _, p := range pods {
			got, err := hc.CoreV1().Pods(appsNS).Get(ctx, p.Name, metav1.GetOptions{})
			if err == nil && got.UID == p.UID && podmeta.CauseOf(got) != podmeta.CauseTaintManager {
				t.Errorf("host pod %s not evicted by the taint manager: %v", p.Name, got.Status.Conditions)
			}
		}
		if deferred := hostEvents(t, f, "StaleEvictionDeferred"); len(deferred) != 0 {
			t.Errorf("evictions under a user taint deferred as stale: %v", deferred)
		}
	})
}

// TestStaleEvictionOfAJobPod: an outage long enough for the taint manager
// to evict, then the member comes back. The Job's evicted pod has a
// replacement already (the Job controller made it), so its member copy is
// deleted as soon as the member is Ready, not kept next to the replacement
// (the work would run twice, then be killed mid-run).
func TestStaleEvictionOfAJobPod(t *testing.T) {
	f := newPodSyncFleet(t, "member-a")
	member := f.members["member-a"]
	hc := f.host.Client()
	ctx := context.Background()
	f.startLeafsync(t, "leafsync")
	f.register(t, "member-a", nil)
	const leaf = "leaf-member-a"
	f.waitLeafReady(t, leaf, time.Minute)

	w := leafWorkload("report", 1, leaf)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "report", Namespace: appsNS},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](3),
			Template:     w.PodTemplate(),
		},
	}
	job.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
	if _, err := hc.BatchV1().Jobs(appsNS).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitHostPodsReady(t, f, "app=report", 1, time.Minute, leaf)
	old := map[string]corev1.Pod{}
	for _, p := range listPods(t, member.Cluster, "app=report") {
		old[p.Labels["app"]] = p
	}
	if len(old) != 1 {
		t.Fatalf("member pods: %v", old)
	}

	rec := recordPods(t, member.Cluster, "app=report")
	member.proxy.Cut()
	harness.Eventually(t, notReadyAfter+tolerationSeconds*time.Second+reapAfter+30*time.Second, "the Job's host pod evicted", func() error {
		for _, app := range []string{"report"} {
			pods, err := hc.CoreV1().Pods(appsNS).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
			if err != nil {
				return err
			}
			for _, p := range pods.Items {
				if p.Annotations[podmeta.AnnotationMemberUID] == string(old[app].UID) && p.DeletionTimestamp == nil {
					return fmt.Errorf("%s's host pod not evicted yet", app)
				}
			}
		}
		return nil
	})
	if err := member.proxy.Heal(); err != nil {
		t.Fatal(err)
	}
	healAt := time.Now()
	waitGone(t, member.Client(), old["report"].Name, old["report"].UID)
	t.Logf("the Job's stale member pod deleted %s after the heal (readyAfter %s)", time.Since(healAt).Round(time.Millisecond), readyAfter)
	// The replacement runs in the member...
	waitHostPodsReady(t, f, "app=report", 1, time.Minute, leaf)
	// ...and never at the same time as the old pod: in every watched
	// version, the old pod was being deleted before any other Job pod ran.
	var oldEnds, newRuns time.Time
	for _, e := range rec.events(t) {
		switch {
		case e.pod.UID == old["report"].UID:
			if oldEnds.IsZero() && (e.pod.DeletionTimestamp != nil || e.typ == watch.Deleted) {
				oldEnds = e.at
			}
		case newRuns.IsZero() && e.pod.Status.Phase == corev1.PodRunning && e.pod.DeletionTimestamp == nil:
			newRuns = e.at
		}
	}
	if oldEnds.IsZero() || newRuns.IsZero() {
		t.Fatalf("old pod's deletion seen at %v, replacement running at %v", oldEnds, newRuns)
	}
	t.Logf("old member pod deleted %s before its replacement ran", newRuns.Sub(oldEnds).Round(time.Millisecond))
	if newRuns.Before(oldEnds) {
		t.Errorf("the Job ran twice: its replacement ran in the member %s before the old pod was deleted", oldEnds.Sub(newRuns).Round(time.Millisecond))
	}
}
