package podstatus

import (
	"context"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const taintManager = "DeletionByTaintManager"

func TestMirrorAndFailed(t *testing.T) {
	hp := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "apps", UID: "h1"}}
	hp.Status = corev1.PodStatus{
		Phase: corev1.PodPending, QOSClass: corev1.PodQOSBestEffort,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
			{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: taintManager},
			{Type: "example.com/gate", Status: corev1.ConditionFalse},
		},
	}
	mp := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "apps", UID: "m1"}}
	mp.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, QOSClass: corev1.PodQOSBurstable, PodIP: "10.0.0.7", PodIPs: []corev1.PodIP{{IP: "10.0.0.7"}},
		HostIP: "192.168.1.2", StartTime: ptr.To(metav1.NewTime(t0)),
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue},
			{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "member-side"},
		},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, RestartCount: 2}},
	}
	st := Mirror(hp, mp, leafWith(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.9.0.1"}), t0)
	if st.Phase != corev1.PodRunning || st.PodIP != "10.0.0.7" || st.HostIP != "10.9.0.1" || st.StartTime == nil ||
		len(st.ContainerStatuses) != 1 || st.ContainerStatuses[0].RestartCount != 2 {
		t.Errorf("status not mirrored: %+v", st)
	}
	if st.QOSClass != corev1.PodQOSBestEffort {
		t.Errorf("QOSClass %s: it is immutable in the host", st.QOSClass)
	}
	got := map[corev1.PodConditionType]string{}
	for _, c := range st.Conditions {
		got[c.Type] = string(c.Status) + "/" + c.Reason
	}
	want := map[corev1.PodConditionType]string{
		corev1.PodScheduled: "True/", corev1.PodReady: "True/", corev1.DisruptionTarget: "True/" + taintManager, "example.com/gate": "False/",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("conditions %v, want %v", got, want)
	}

	running := hp.DeepCopy()
	running.Status = st
	f := Failed(running, "MemberPodDeleted", "gone", t0)
	if f.Phase != corev1.PodFailed || f.Reason != "MemberPodDeleted" || f.ContainerStatuses[0].State.Terminated == nil || f.ContainerStatuses[0].Ready {
		t.Errorf("failed status %+v", f)
	}
}

// TestWriteOnlyChanges: an unchanged status is not written.
func TestWriteOnlyChanges(t *testing.T) {
	hp := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "apps"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	cs := fake.NewClientset(hp)
	if _, err := Write(context.Background(), cs, hp, func(p *corev1.Pod) corev1.PodStatus { return *p.Status.DeepCopy() }); err != nil {
		t.Fatal(err)
	}
	st := *hp.Status.DeepCopy()
	SetCondition(&st, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: taintManager})
	SetCondition(&st, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: taintManager, Message: "again"})
	if len(st.Conditions) != 1 || st.Conditions[0].Message != "again" {
		t.Fatalf("conditions %+v, want the one DisruptionTarget replaced", st.Conditions)
	}
	out, err := Write(context.Background(), cs, hp, func(*corev1.Pod) corev1.PodStatus { return st })
	if err != nil || len(out.Status.Conditions) != 1 {
		t.Fatalf("Write = %+v, %v", out, err)
	}
	var updates int
	for _, a := range cs.Actions() {
		if u, ok := a.(clienttesting.UpdateAction); ok && u.GetSubresource() == "status" {
			updates++
		}
	}
	if updates != 1 {
		t.Fatalf("%d status updates, want 1 (the unchanged status is not written)", updates)
	}
}
