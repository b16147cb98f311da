//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/leafsync/leafsync/internal/leafnode"
	"github.com/leafsync/leafsync/internal/syncer/podsync/hosttoken"
	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
	"github.com/leafsync/leafsync/test/harness"
)

// Pod sync settings of testConfig and of the test workloads.
const (
	appsNS             = "apps"
	tolerationSeconds  = 2
	reapAfter          = 10 * time.Second
	maxDeferral        = 30 * time.Second
	podSyncResync      = 5 * time.Second
	managedPodSelector = podmeta.LabelManaged + "=true"
)

// newPodSyncFleet is a host and members (2 kwok nodes each, with their own
// scheduler, as real members have) and the namespace of the test
// workloads in the host.
func newPodSyncFleet(t *testing.T, members ...string) *fleet {
	t.Helper()
	var opts []harness.MemberOptions
	for _, m := range members {
		opts = append(opts, harness.MemberOptions{Name: m, Nodes: 2})
	}
	f := newFleet(t, harness.HostOptions{}, opts...)
	for _, m := range f.members {
		if err := m.LiftNotReadyTaints(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := m.StartScheduler(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.host.EnsureNamespace(context.Background(), appsNS); err != nil {
		t.Fatal(err)
	}
	return f
}

func leafWorkload(name string, replicas int32, leaves ...string) harness.LeafWorkload {
	return harness.LeafWorkload{
		Namespace: appsNS, Name: name, Replicas: replicas, Leaves: leaves,
		TolerationSeconds: tolerationSeconds, TerminationGracePeriodSeconds: ptr.To[int64](5),
	}
}

func (f *fleet) createWorkloads(t *testing.T, deployments, statefulsets []harness.LeafWorkload) {
	t.Helper()
	ctx := context.Background()
	apps := f.host.Client().AppsV1()
	for _, w := range deployments {
		if _, err := apps.Deployments(w.Namespace).Create(ctx, w.Deployment(), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range statefulsets {
		if _, err := apps.StatefulSets(w.Namespace).Create(ctx, w.StatefulSet(), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func active(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodFailed && p.Status.Phase != corev1.PodSucceeded
}

// waitHostPodsReady waits until exactly n active host pods match the
// selector, all Running and Ready with a pod IP, on the given leaves.
func waitHostPodsReady(t *testing.T, f *fleet, selector string, n int, timeout time.Duration, leaves ...string) []corev1.Pod {
	t.Helper()
	onLeaf := map[string]bool{}
	for _, l := range leaves {
		onLeaf[l] = true
	}
	pods, err := f.host.WaitPods(context.Background(), appsNS, selector, timeout, func(ps []corev1.Pod) error {
		var act []corev1.Pod
		for _, p := range ps {
			if active(&p) {
				act = append(act, p)
			}
		}
		if len(act) != n {
			return fmt.Errorf("%d active pods, want %d", len(act), n)
		}
		for _, p := range act {
			if !onLeaf[p.Spec.NodeName] || p.Status.Phase != corev1.PodRunning || !podReady(&p) || p.Status.PodIP == "" {
				return fmt.Errorf("pod %s on %q: phase %s ready %v ip %q", p.Name, p.Spec.NodeName, p.Status.Phase, podReady(&p), p.Status.PodIP)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var act []corev1.Pod
	for _, p := range pods {
		if active(&p) {
			act = append(act, p)
		}
	}
	return act
}

func listPods(t *testing.T, c *harness.Cluster, selector string) []corev1.Pod {
	t.Helper()
	l, err := c.Client().CoreV1().Pods(appsNS).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// oneToOne checks that the active host pods on leaf and the member's
// leafsync pods match one to one: same names, and each member pod's
// host-uid label is its host pod's UID.
func oneToOne(hostPods, memberPods []corev1.Pod, leaf string) error {
	want := map[string]types.UID{}
	for _, p := range hostPods {
		if active(&p) && p.Spec.NodeName == leaf {
			want[p.Name] = p.UID
		}
	}
	got := map[string]string{}
	for _, p := range memberPods {
		got[p.Name] = p.Labels[podmeta.LabelHostUID]
	}
	var problems []string
	for name, uid := range want {
		if g, ok := got[name]; !ok {
			problems = append(problems, "no member pod for "+name)
		} else if g != string(uid) {
			problems = append(problems, fmt.Sprintf("member pod %s is for host uid %s, host pod is %s", name, g, uid))
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			problems = append(problems, "orphan member pod "+name)
		}
	}
	sort.Strings(problems)
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

func waitOneToOne(t *testing.T, f *fleet, member, leaf string, timeout time.Duration) {
	t.Helper()
	harness.Eventually(t, timeout, "member pods match host pods one to one", func() error {
		return oneToOne(listPods(t, f.host, ""), listPods(t, f.members[member].Cluster, managedPodSelector), leaf)
	})
}

// podEvent is one watch event of a pod.
type podEvent struct {
	at  time.Time
	typ watch.EventType
	pod *corev1.Pod
}

// podRecorder keeps every watch event of the pods of a namespace, so that
// a test can assert on everything that happened (deletions, Ready
// transitions), not only on what a poll saw.
type podRecorder struct {
	mu     sync.Mutex
	seen   []podEvent
	errs   []error
	cancel context.CancelFunc
	done   chan struct{}
}

func recordPods(t *testing.T, c *harness.Cluster, selector string) *podRecorder {
	t.Helper()
	cfg := c.RESTConfig()
	cfg.Timeout = 0
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	r := &podRecorder{cancel: cancel, done: make(chan struct{})}
	list, err := cs.CoreV1().Pods(appsNS).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i := range list.Items {
		r.seen = append(r.seen, podEvent{now, watch.Added, list.Items[i].DeepCopy()})
	}
	go func() {
		defer close(r.done)
		watchFrom(ctx, list.ResourceVersion, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return cs.CoreV1().Pods(appsNS).Watch(ctx, o)
		}, func(ev watch.Event) {
			if p, ok := ev.Object.(*corev1.Pod); ok {
				r.mu.Lock()
				r.seen = append(r.seen, podEvent{time.Now(), ev.Type, p.DeepCopy()})
				r.mu.Unlock()
			}
		}, r.fail)
	}()
	t.Cleanup(r.stop)
	return r
}

func (r *podRecorder) fail(err error) {
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.mu.Unlock()
}

func (r *podRecorder) stop() {
	r.cancel()
	<-r.done
}

// events returns what was seen so far (the recorder keeps running).
func (r *podRecorder) events(t *testing.T) []podEvent {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errs) > 0 {
		t.Fatalf("pod watch broke: %v", r.errs)
	}
	return append([]podEvent(nil), r.seen...)
}

// memberPodEvent is a recorded pod version and the member it came from.
type memberPodEvent struct {
	podEvent
	member string
}

// mergedEvents returns the versions the recorders of several members
// received, in the order they were received.
func mergedEvents(t *testing.T, recs map[string]*podRecorder) []memberPodEvent {
	t.Helper()
	var evs []memberPodEvent
	for m, r := range recs {
		for _, e := range r.events(t) {
			evs = append(evs, memberPodEvent{e, m})
		}
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].at.Before(evs[j].at) })
	return evs
}

func deletedUIDs(evs []podEvent) map[types.UID]podEvent {
	out := map[types.UID]podEvent{}
	for _, e := range evs {
		if e.typ == watch.Deleted {
			out[e.pod.UID] = e
		}
	}
	return out
}

// firstReady returns when each pod UID was first seen Ready.
func firstReady(evs []podEvent) map[types.UID]time.Time {
	out := map[types.UID]time.Time{}
	for _, e := range evs {
		if e.typ != watch.Deleted && podReady(e.pod) {
			if _, ok := out[e.pod.UID]; !ok {
				out[e.pod.UID] = e.at
			}
		}
	}
	return out
}

// hostPodDeletes returns the audit events, from since on, of DELETEs and
// evictions of pods in the host.
func hostPodDeletes(t *testing.T, f *fleet, since time.Time) []harness.AuditEvent {
	t.Helper()
	evs, err := f.host.AuditEvents(func(e harness.AuditEvent) bool {
		if e.ObjectRef.Resource != "pods" || e.ObjectRef.Namespace != appsNS || e.RequestReceived.Before(since) {
			return false
		}
		return (e.Verb == "delete" && e.ObjectRef.Subresource == "") || (e.Verb == "create" && e.ObjectRef.Subresource == "eviction")
	})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// TestPodSync follows a Deployment and a StatefulSet on one member's leaf:
// they run in the member and report back; ConfigMaps and Secrets follow
// them; a pod deleted in the member fails in the host; a flap shorter than
// notReadyAfter changes nothing; user deletes and drains are forwarded at
// once; deleting the workloads cleans the member.
func TestPodSync(t *testing.T) {
	f := newPodSyncFleet(t, "member-a")
	member := f.members["member-a"]
	hc, mc := f.host.Client(), member.Client()
	ctx := context.Background()
	f.startLeafsync(t, "leafsync")
	f.register(t, "member-a", nil)
	const leaf = "leaf-member-a"
	f.waitLeafReady(t, leaf, time.Minute)

	if _, err := hc.CoreV1().ConfigMaps(appsNS).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "web-config", Namespace: appsNS}, Data: map[string]string{"app.conf": "v1"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := hc.CoreV1().Secrets(appsNS).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "web-secret", Namespace: appsNS}, Data: map[string][]byte{"password": []byte("s3cret")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	web := leafWorkload("web", 2, leaf)
	web.ConfigMap, web.Secret = "web-config", "web-secret"
	db := leafWorkload("db", 2, leaf)
	created := time.Now()
	f.createWorkloads(t, []harness.LeafWorkload{web}, []harness.LeafWorkload{db})

	t.Run("pods run in the member and the host shows their status", func(t *testing.T) {
		hostPods := waitHostPodsReady(t, f, "app in (web,db)", 4, 90*time.Second, leaf)
		t.Logf("4 pods Running and Ready in the host %s after the workloads were created", time.Since(created).Round(time.Millisecond))
		for _, hp := range hostPods {
			mp, err := mc.CoreV1().Pods(appsNS).Get(ctx, hp.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("member pod of %s: %v", hp.Name, err)
			}
			if mp.Labels[podmeta.LabelCluster] != "member-a" || mp.Labels[podmeta.LabelHostUID] != string(hp.UID) || mp.Labels["app"] != hp.Labels["app"] {
				t.Errorf("member pod %s labels %v do not tie it to host pod %s", mp.Name, mp.Labels, hp.UID)
			}
			if hp.Annotations[podmeta.AnnotationMemberUID] != string(mp.UID) {
				t.Errorf("host pod %s records member uid %q, member pod is %s", hp.Name, hp.Annotations[podmeta.AnnotationMemberUID], mp.UID)
			}
			if !containsString(hp.Finalizers, podmeta.FinalizerMemberPod) {
				t.Errorf("host pod %s lacks the finalizer: %v", hp.Name, hp.Finalizers)
			}
			if mp.Status.Phase != corev1.PodRunning || !strings.HasPrefix(mp.Spec.NodeName, "member-a-node-") {
				t.Errorf("member pod %s: phase %s on %q", mp.Name, mp.Status.Phase, mp.Spec.NodeName)
			}
			// The host IP is the leaf's, as a kubelet's is its node's (this
			// fixture serves no kubelet API: the leaf has no address).
			if hp.Status.PodIP != mp.Status.PodIP || hp.Status.HostIP != leafInternalIP(f.node(t, leaf)) || hp.Status.StartTime == nil {
				t.Errorf("host pod %s status ip %s/%s, member %s/%s, leaf %v", hp.Name, hp.Status.PodIP, hp.Status.HostIP, mp.Status.PodIP, mp.Status.HostIP, f.node(t, leaf).Status.Addresses)
			}
			if len(hp.Status.ContainerStatuses) != 1 || !hp.Status.ContainerStatuses[0].Ready {
				t.Errorf("host pod %s container statuses %+v", hp.Name, hp.Status.ContainerStatuses)
			}
			// No host token leaks downstream.
			if mp.Spec.AutomountServiceAccountToken == nil || *mp.Spec.AutomountServiceAccountToken || mp.Spec.ServiceAccountName != "default" {
				t.Errorf("member pod %s: service account %q automount %v", mp.Name, mp.Spec.ServiceAccountName, mp.Spec.AutomountServiceAccountToken)
			}
			// The token volume goes down without its token (no
			// --host-api-server here: no host token is written), and no
			// token is projected from the member either.
			for _, v := range mp.Spec.Volumes {
				for _, src := range projectedSources(v) {
					if src.ServiceAccountToken != nil {
						t.Errorf("member pod %s: volume %s projects a token", mp.Name, v.Name)
					}
				}
			}
			if _, err := mc.CoreV1().Secrets(appsNS).Get(ctx, hosttoken.SecretName(mp.Name), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("member pod %s: a host token Secret without a host API address (%v)", mp.Name, err)
			}
		}
		ns, err := mc.CoreV1().Namespaces().Get(ctx, appsNS, metav1.GetOptions{})
		if err != nil || ns.Labels[podmeta.LabelManaged] != "true" {
			t.Errorf("member namespace: %v %v", err, ns.Labels)
		}
		cm, err := mc.CoreV1().ConfigMaps(appsNS).Get(ctx, "web-config", metav1.GetOptions{})
		if err != nil || cm.Data["app.conf"] != "v1" || cm.Labels[podmeta.LabelManaged] != "true" {
			t.Errorf("member ConfigMap: %v %+v", err, cm)
		}
		s, err := mc.CoreV1().Secrets(appsNS).Get(ctx, "web-secret", metav1.GetOptions{})
		if err != nil || string(s.Data["password"]) != "s3cret" || s.Labels[podmeta.LabelHostUID] == "" {
			t.Errorf("member Secret: %v %+v", err, s)
		}
		waitOneToOne(t, f, "member-a", leaf, 10*time.Second)
	})

	t.Run("ConfigMap changes reach the member", func(t *testing.T) {
		cm, err := hc.CoreV1().ConfigMaps(appsNS).Get(ctx, "web-config", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data["app.conf"] = "v2"
		if _, err := hc.CoreV1().ConfigMaps(appsNS).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		changed := time.Now()
		harness.Eventually(t, 2*podSyncResync+5*time.Second, "member ConfigMap updated", func() error {
			cm, err := mc.CoreV1().ConfigMaps(appsNS).Get(ctx, "web-config", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if cm.Data["app.conf"] != "v2" {
				return fmt.Errorf("app.conf=%q", cm.Data["app.conf"])
			}
			return nil
		})
		t.Logf("member ConfigMap updated %s after the host's (resync %s)", time.Since(changed).Round(time.Millisecond), podSyncResync)
	})

	t.Run("a pod deleted in the member fails in the host and is replaced", func(t *testing.T) {
		victim := listPods(t, f.host, "app=web")[0]
		mp, err := mc.CoreV1().Pods(appsNS).Get(ctx, victim.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := mc.CoreV1().Pods(appsNS).Delete(ctx, mp.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
		deletedAt := time.Now()
		harness.Eventually(t, 20*time.Second, "host pod Failed", func() error {
			p, err := hc.CoreV1().Pods(appsNS).Get(ctx, victim.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if p.UID != victim.UID {
				return fmt.Errorf("replaced by uid %s", p.UID)
			}
			if p.Status.Phase != corev1.PodFailed || p.Status.Reason != "MemberPodDeleted" || containsString(p.Finalizers, podmeta.FinalizerMemberPod) {
				return fmt.Errorf("phase %s reason %q finalizers %v", p.Status.Phase, p.Status.Reason, p.Finalizers)
			}
			return nil
		})
		t.Logf("host pod Failed (MemberPodDeleted) %s after its member pod was deleted", time.Since(deletedAt).Round(time.Millisecond))
		waitHostPodsReady(t, f, "app=web", 2, 60*time.Second, leaf)
		t.Logf("its owner's replacement Ready %s after the member-side delete", time.Since(deletedAt).Round(time.Millisecond))
		waitOneToOne(t, f, "member-a", leaf, 10*time.Second)
	})

	t.Run("flap shorter than notReadyAfter", func(t *testing.T) {
		before := map[string]corev1.Pod{}
		for _, p := range listPods(t, member.Cluster, managedPodSelector) {
			before[p.Name] = p
		}
		hostBefore := waitHostPodsReady(t, f, "app in (web,db)", 4, 10*time.Second, leaf)
		memberRec := recordPods(t, member.Cluster, managedPodSelector)
		hostRec := recordPods(t, f.host, "app in (web,db)")
		member.proxy.Cut()
		cutAt := time.Now()
		time.Sleep(time.Until(cutAt.Add(notReadyAfter / 2)))
		if err := member.proxy.Heal(); err != nil {
			t.Fatal(err)
		}
		t.Logf("member cut for %s", time.Since(cutAt).Round(time.Millisecond))
		harness.Eventually(t, 15*time.Second, "cordon lifted", func() error {
			if hasTaint(f.node(t, leaf), leafnode.TaintUnreachable, corev1.TaintEffectNoSchedule) {
				return errors.New("still cordoned")
			}
			return nil
		})
		// Give KCM a grace period, and pod sync a resync, to act if they would.
		time.Sleep(max(harness.DefaultTestTimings.NodeMonitorGracePeriod, podSyncResync))

		if dels := hostPodDeletes(t, f, cutAt); len(dels) > 0 {
			t.Errorf("host pods deleted or evicted during a flap: %+v", dels)
		}
		for _, e := range hostRec.events(t) {
			if e.pod.DeletionTimestamp != nil || podCondition(e.pod, corev1.DisruptionTarget) != nil {
				t.Errorf("host pod %s marked for deletion during a flap", e.pod.Name)
			}
		}
		for _, e := range memberRec.events(t) {
			if e.typ == watch.Deleted || e.pod.DeletionTimestamp != nil {
				t.Errorf("member pod %s (uid %s) deleted during a flap", e.pod.Name, e.pod.UID)
			}
		}
		after := listPods(t, member.Cluster, managedPodSelector)
		if len(after) != len(before) {
			t.Errorf("%d member pods after the flap, %d before", len(after), len(before))
		}
		for _, p := range after {
			b, ok := before[p.Name]
			if !ok || b.UID != p.UID {
				t.Errorf("member pod %s: uid %s, before %s", p.Name, p.UID, b.UID)
				continue
			}
			if restarts(&p) != restarts(&b) {
				t.Errorf("member pod %s restarted: %d restarts, %d before", p.Name, restarts(&p), restarts(&b))
			}
		}
		hostAfter := waitHostPodsReady(t, f, "app in (web,db)", 4, 10*time.Second, leaf)
		for i := range hostAfter {
			if hostAfter[i].UID != findPod(hostBefore, hostAfter[i].Name).UID {
				t.Errorf("host pod %s replaced during a flap", hostAfter[i].Name)
			}
		}
		t.Logf("flap: 0 host evictions, 0 member pods deleted, %d member pods kept their UID and restart count", len(after))
	})

	t.Run("user delete is forwarded", func(t *testing.T) {
		victim := waitHostPodsReady(t, f, "app=web", 2, 10*time.Second, leaf)[0]
		mp, err := mc.CoreV1().Pods(appsNS).Get(ctx, victim.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		memberRec := recordPods(t, member.Cluster, managedPodSelector)
		hostRec := recordPods(t, f.host, "app=web")
		if err := hc.CoreV1().Pods(appsNS).Delete(ctx, victim.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		waitGone(t, mc, victim.Name, mp.UID)
		waitGone(t, hc, victim.Name, victim.UID)
		mDel, ok := deletedUIDs(memberRec.events(t))[mp.UID]
		if !ok {
			t.Fatal("no DELETED event of the member pod")
		}
		hDel, ok := deletedUIDs(hostRec.events(t))[victim.UID]
		if !ok {
			t.Fatal("no DELETED event of the host pod")
		}
		t.Logf("user DELETE: member pod deleted %s, host pod gone %s after the DELETE",
			mDel.at.Sub(start).Round(time.Millisecond), hDel.at.Sub(start).Round(time.Millisecond))
		if hDel.at.Before(mDel.at) {
			t.Errorf("host pod gone (%s) before its member pod (%s)", hDel.at.Format(time.StampMilli), mDel.at.Format(time.StampMilli))
		}
		waitHostPodsReady(t, f, "app=web", 2, 60*time.Second, leaf)
		waitOneToOne(t, f, "member-a", leaf, 10*time.Second)
	})

	t.Run("drain is forwarded", func(t *testing.T) {
		hostPods := waitHostPodsReady(t, f, "app in (web,db)", 4, 10*time.Second, leaf)
		memberUID := map[string]types.UID{}
		for _, p := range listPods(t, member.Cluster, managedPodSelector) {
			memberUID[p.Name] = p.UID
		}
		// kubectl drain: cordon, then evict every pod through the Eviction API.
		setUnschedulable(t, hc, leaf, true)
		start := time.Now()
		for _, p := range hostPods {
			if err := hc.CoreV1().Pods(appsNS).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: appsNS}}); err != nil {
				t.Fatalf("evicting %s: %v", p.Name, err)
			}
		}
		var slowest time.Duration
		for _, p := range hostPods {
			if d := waitGone(t, mc, p.Name, memberUID[p.Name]).Sub(start); d > slowest {
				slowest = d
			}
			waitGone(t, hc, p.Name, p.UID)
		}
		t.Logf("drain of %d pods: every member pod deleted within %s of the evictions", len(hostPods), slowest.Round(time.Millisecond))
		setUnschedulable(t, hc, leaf, false)
		waitHostPodsReady(t, f, "app in (web,db)", 4, 90*time.Second, leaf)
		waitOneToOne(t, f, "member-a", leaf, 10*time.Second)
		// Evicted on purpose: the recreated StatefulSet pods start afresh.
		for _, p := range listPods(t, member.Cluster, "app=db") {
			if p.UID == memberUID[p.Name] {
				t.Errorf("member pod %s survived its eviction (uid %s)", p.Name, p.UID)
			}
		}
	})

	t.Run("deleting the workloads cleans the member", func(t *testing.T) {
		if err := hc.AppsV1().Deployments(appsNS).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := hc.AppsV1().StatefulSets(appsNS).Delete(ctx, "db", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, 60*time.Second, "host and member pods gone", func() error {
			if n := len(listPods(t, f.host, "app in (web,db)")); n > 0 {
				return fmt.Errorf("%d host pods", n)
			}
			if n := len(listPods(t, member.Cluster, managedPodSelector)); n > 0 {
				return fmt.Errorf("%d member pods", n)
			}
			return nil
		})
		gone := time.Now()
		harness.Eventually(t, 2*podSyncResync+10*time.Second, "member ConfigMap and Secret collected", func() error {
			if _, err := mc.CoreV1().ConfigMaps(appsNS).Get(ctx, "web-config", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("ConfigMap: %v", err)
			}
			if _, err := mc.CoreV1().Secrets(appsNS).Get(ctx, "web-secret", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("Secret: %v", err)
			}
			return nil
		})
		t.Logf("member copies collected %s after the last pod went (resync %s)", time.Since(gone).Round(time.Millisecond), podSyncResync)
	})

	t.Run("deregistration releases the host pods", func(t *testing.T) {
		f.createWorkloads(t, []harness.LeafWorkload{leafWorkload("late", 1, leaf)}, nil)
		p := waitHostPodsReady(t, f, "app=late", 1, 60*time.Second, leaf)[0]
		if !containsString(p.Finalizers, podmeta.FinalizerMemberPod) {
			t.Fatalf("host pod %s lacks the finalizer", p.Name)
		}
		if err := hc.CoreV1().Secrets(leafsyncNamespace).Delete(ctx, "member-member-a", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, 30*time.Second, "finalizer removed from the host pod", func() error {
			got, err := hc.CoreV1().Pods(appsNS).Get(ctx, p.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return err
			}
			if containsString(got.Finalizers, podmeta.FinalizerMemberPod) {
				return fmt.Errorf("finalizers %v", got.Finalizers)
			}
			return nil
		})
	})
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, c := range p.Status.ContainerStatuses {
		n += c.RestartCount
	}
	return n
}

func findPod(ps []corev1.Pod, name string) corev1.Pod {
	for _, p := range ps {
		if p.Name == name {
			return p
		}
	}
	return corev1.Pod{}
}

// waitGone waits until the pod with that name and UID no longer exists
// and returns when that was seen.
func waitGone(t *testing.T, c kubernetes.Interface, name string, uid types.UID) time.Time {
	t.Helper()
	var at time.Time
	harness.Eventually(t, 30*time.Second, "pod "+name+" gone", func() error {
		p, err := c.CoreV1().Pods(appsNS).Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && p.UID != uid) {
			at = time.Now()
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("still there (deletionTimestamp %v)", p.DeletionTimestamp)
	})
	return at
}

func setUnschedulable(t *testing.T, c kubernetes.Interface, node string, v bool) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"unschedulable":%v}}`, v)
	if _, err := c.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}
