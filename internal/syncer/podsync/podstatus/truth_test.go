package podstatus

import (
	"context"
	"reflect"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
)

func leafWith(addrs ...corev1.NodeAddress) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "leaf-a"}, Status: corev1.NodeStatus{Addresses: addrs}}
}

// readyMember is a member pod that its kubelet reports Ready, at member
// generation gen, carrying host generation hostGen (none when "").
func readyMember(gen, observed int64, hostGen string) *corev1.Pod {
	mp := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "apps", UID: "m1", Generation: gen}}
	if hostGen != "" {
		mp.Annotations = map[string]string{podmeta.AnnotationHostGeneration: hostGen}
	}
	mp.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, ObservedGeneration: observed, HostIP: "192.168.1.2", HostIPs: []corev1.HostIP{{IP: "192.168.1.2"}},
		Conditions: []corev1.PodCondition{
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, ObservedGeneration: observed},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, ObservedGeneration: observed},
		},
	}
	return mp
}

func hostPod(gen, observed int64) *corev1.Pod {
	hp := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "apps", UID: "h1", Generation: gen}}
	hp.Status.ObservedGeneration = observed
	return hp
}

func condition(st corev1.PodStatus, t corev1.PodConditionType) *corev1.PodCondition {
	if i := conditionIndex(st.Conditions, t); i >= 0 {
		return &st.Conditions[i]
	}
	return nil
}

// TestMirrorObservedGeneration: the host's observedGeneration is the host
// generation the member pod carries, once the member's kubelet observed
// the member pod's generation; before that, and without the annotation,
// it stays the host's.
func TestMirrorObservedGeneration(t *testing.T) {
	for _, tc := range []struct {
		name               string
		mp                 *corev1.Pod
		wantPod, wantReady int64
	}{
		{"member kubelet saw the latest spec", readyMember(3, 3, "5"), 5, 5},
		{"member kubelet behind", readyMember(3, 2, "5"), 4, 0},
		{"no host generation on the member pod", readyMember(3, 3, ""), 4, 0},
		{"member generation not reported", readyMember(3, 0, "5"), 4, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := Mirror(hostPod(5, 4), tc.mp, nil, t0)
			if st.ObservedGeneration != tc.wantPod {
				t.Errorf("status.observedGeneration %d, want %d", st.ObservedGeneration, tc.wantPod)
			}
			if c := condition(st, corev1.PodReady); c == nil || c.ObservedGeneration != tc.wantReady {
				t.Errorf("Ready condition %+v, want observedGeneration %d (a host generation, never the member's)", c, tc.wantReady)
			}
		})
	}
}

// TestMirrorReadinessGates: the member pod has no readiness gates, so its
// Ready is only its containers'; the host pod is Ready only when every
// gate's condition is True on the host pod too, and the gate conditions
// are the host's.
func TestMirrorReadinessGates(t *testing.T) {
	const gate = "example.com/lb-ready"
	for _, tc := range []struct {
		name       string
		gateStatus corev1.ConditionStatus // "" for no gate condition
		want       corev1.ConditionStatus
		wantReason string
	}{
		{"gate condition missing", "", corev1.ConditionFalse, ReasonReadinessGatesNotReady},
		{"gate False", corev1.ConditionFalse, corev1.ConditionFalse, ReasonReadinessGatesNotReady},
		{"gate True", corev1.ConditionTrue, corev1.ConditionTrue, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hp := hostPod(1, 1)
			hp.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: gate}}
			if tc.gateStatus != "" {
				hp.Status.Conditions = []corev1.PodCondition{{Type: gate, Status: tc.gateStatus, Reason: "SetByLB"}}
			}
			st := Mirror(hp, readyMember(1, 1, "1"), nil, t0)
			c := condition(st, corev1.PodReady)
			if c == nil || c.Status != tc.want || c.Reason != tc.wantReason {
				t.Fatalf("Ready %+v, want %s/%s", c, tc.want, tc.wantReason)
			}
			g := condition(st, gate)
			if tc.gateStatus == "" && g != nil {
				t.Errorf("gate condition %+v invented", g)
			}
			if tc.gateStatus != "" && (g == nil || g.Status != tc.gateStatus || g.Reason != "SetByLB") {
				t.Errorf("gate condition %+v, want the host's %s/SetByLB", g, tc.gateStatus)
			}
		})
	}
	// The gate turns True: Ready turns True now, not at the member's
	// (earlier) transition; held back, Ready keeps its transition time.
	earlier, later := t0.Add(-time.Hour), t0.Add(time.Minute)
	hp := hostPod(1, 1)
	hp.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: gate}}
	mp := readyMember(1, 1, "1")
	mp.Status.Conditions[1].LastTransitionTime = metav1.NewTime(earlier)
	held := Mirror(hp, mp, nil, t0)
	hp.Status = held
	if c := condition(Mirror(hp, mp, nil, later), corev1.PodReady); c.Status != corev1.ConditionFalse || !c.LastTransitionTime.Time.Equal(t0) {
		t.Errorf("Ready still held back %+v, want its transition at %v kept", c, t0)
	}
	hp.Status.Conditions = append(hp.Status.Conditions, corev1.PodCondition{Type: gate, Status: corev1.ConditionTrue})
	if c := condition(Mirror(hp, mp, nil, later), corev1.PodReady); c.Status != corev1.ConditionTrue || !c.LastTransitionTime.Time.Equal(later) {
		t.Errorf("Ready once the gate is True %+v, want True at %v", c, later)
	}

	// Not Ready in the member stays not Ready, with the member's reason.
	hp = hostPod(1, 1)
	hp.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: gate}}
	hp.Status.Conditions = []corev1.PodCondition{{Type: gate, Status: corev1.ConditionTrue}}
	mp = readyMember(1, 1, "1")
	mp.Status.Conditions[1].Status, mp.Status.Conditions[1].Reason = corev1.ConditionFalse, "ContainersNotReady"
	if c := condition(Mirror(hp, mp, nil, t0), corev1.PodReady); c.Status != corev1.ConditionFalse || c.Reason != "ContainersNotReady" {
		t.Errorf("Ready %+v, want the member's False/ContainersNotReady", c)
	}
}

// TestMirrorHostIPs: the host IPs are the leaf's, as a kubelet reports
// its node's (InternalIP first, one per family), never the member node's.
func TestMirrorHostIPs(t *testing.T) {
	for _, tc := range []struct {
		name string
		leaf *corev1.Node
		want []corev1.HostIP
	}{
		{"internal first, then the other family", leafWith(
			corev1.NodeAddress{Type: corev1.NodeHostName, Address: "leaf-a"},
			corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "203.0.113.4"},
			corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.9.0.1"},
			corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.9.0.2"},
			corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "fd00::1"},
		), []corev1.HostIP{{IP: "10.9.0.1"}, {IP: "fd00::1"}}},
		{"external when no internal", leafWith(corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "203.0.113.4"}), []corev1.HostIP{{IP: "203.0.113.4"}}},
		{"a leaf without addresses", leafWith(), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := Mirror(hostPod(1, 1), readyMember(1, 1, "1"), tc.leaf, t0)
			if !reflect.DeepEqual(st.HostIPs, tc.want) {
				t.Errorf("hostIPs %v, want %v", st.HostIPs, tc.want)
			}
			wantIP := ""
			if len(tc.want) > 0 {
				wantIP = tc.want[0].IP
			}
			if st.HostIP != wantIP {
				t.Errorf("hostIP %q, want %q (the member node's is 192.168.1.2)", st.HostIP, wantIP)
			}
		})
	}
}

// TestWriteFromStaleHostPod: a status computed from a host pod older than
// the stored one never lands; the status is computed again from the
// newest pod, so a condition another writer set meanwhile stays.
func TestWriteFromStaleHostPod(t *testing.T) {
	ctx := context.Background()
	stale := hostPod(1, 1)
	stale.Status.Phase = corev1.PodPending
	cs := fake.NewClientset(stale)
	rv := 0
	// Enforce resourceVersions on status updates as the API server does
	// (the fake tracker does not).
	cs.PrependReactor("update", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		u := a.(clienttesting.UpdateAction)
		p := u.GetObject().(*corev1.Pod)
		cur, err := cs.Tracker().Get(corev1.SchemeGroupVersion.WithResource("pods"), p.Namespace, p.Name)
		if err != nil {
			return true, nil, err
		}
		if rv := cur.(*corev1.Pod).ResourceVersion; p.ResourceVersion != rv {
			return true, nil, apierrors.NewConflict(corev1.Resource("pods"), p.Name, nil)
		}
		rv++
		p.ResourceVersion = strconv.Itoa(rv)
		return false, nil, nil
	})
	stale, err := cs.CoreV1().Pods("apps").Get(ctx, "web-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Another controller writes a condition after stale was read.
	other := stale.DeepCopy()
	other.Status.Conditions = append(other.Status.Conditions, corev1.PodCondition{Type: "example.com/lb-ready", Status: corev1.ConditionTrue})
	if _, err := cs.CoreV1().Pods("apps").UpdateStatus(ctx, other, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	mp := readyMember(1, 1, "1")
	out, err := Write(ctx, cs, stale, func(hp *corev1.Pod) corev1.PodStatus { return Mirror(hp, mp, nil, t0) })
	if err != nil {
		t.Fatal(err)
	}
	got, err := cs.CoreV1().Pods("apps").Get(ctx, "web-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if condition(got.Status, "example.com/lb-ready") == nil {
		t.Errorf("conditions %+v: the condition written meanwhile was erased", got.Status.Conditions)
	}
	if got.Status.Phase != corev1.PodRunning || out.ResourceVersion != got.ResourceVersion {
		t.Errorf("status not mirrored (phase %s) or not returned as written (rv %s, stored %s)", got.Status.Phase, out.ResourceVersion, got.ResourceVersion)
	}
}
