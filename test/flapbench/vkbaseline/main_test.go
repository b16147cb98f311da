package main

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestMemberPod(t *testing.T) {
	host := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1", Labels: map[string]string{"app": "a"},
			Annotations: map[string]string{"x": "y"}, OwnerReferences: []metav1.OwnerReference{{Name: "rs"}}},
		Spec: corev1.PodSpec{
			NodeName: "leaf", ServiceAccountName: "sa", SchedulerName: "default-scheduler", PriorityClassName: "high",
			Priority: ptr.To[int32](5), NodeSelector: map[string]string{"k": "v"}, Affinity: &corev1.Affinity{},
			Tolerations: []corev1.Toleration{{Key: "t"}}, Volumes: []corev1.Volume{{Name: "v"}},
			Containers: []corev1.Container{{Name: "c", Image: "i", VolumeMounts: []corev1.VolumeMount{{Name: "v"}}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	m := memberPod(host)
	if m.Name != "p" || m.Namespace != "ns" || m.UID != "" || len(m.OwnerReferences) != 0 {
		t.Errorf("meta %+v", m.ObjectMeta)
	}
	if m.Labels["app"] != "a" || m.Labels[contestantLabel] != contestant || m.Annotations["x"] != "y" || m.Annotations[hostUIDAnnotation] != "u1" {
		t.Errorf("labels %v annotations %v", m.Labels, m.Annotations)
	}
	s := m.Spec
	if s.NodeName != "" || s.ServiceAccountName != "" || s.SchedulerName != "" || s.PriorityClassName != "" || s.Priority != nil ||
		s.NodeSelector != nil || s.Affinity != nil || s.Tolerations != nil || s.Volumes != nil ||
		s.Containers[0].VolumeMounts != nil || ptr.Deref(s.AutomountServiceAccountToken, true) {
		t.Errorf("spec %+v", s)
	}
	if s.Containers[0].Image != "i" || m.Status.Phase != "" {
		t.Errorf("container %+v status %+v", s.Containers[0], m.Status)
	}
	if host.Spec.NodeName != "leaf" || host.Labels[contestantLabel] != "" {
		t.Error("host pod modified")
	}
}

func TestParseTaint(t *testing.T) {
	for in, want := range map[string]corev1.Taint{
		"leafsync.io/leaf=true:NoSchedule": {Key: "leafsync.io/leaf", Value: "true", Effect: corev1.TaintEffectNoSchedule},
		"k:NoExecute":                      {Key: "k", Effect: corev1.TaintEffectNoExecute},
	} {
		if got, err := parseTaint(in); err != nil || got != want {
			t.Errorf("parseTaint(%q) = %+v, %v", in, got, err)
		}
	}
	for _, in := range []string{"k=v", "k=v:Sometimes", "=v:NoSchedule"} {
		if _, err := parseTaint(in); err == nil {
			t.Errorf("parseTaint(%q): no error", in)
		}
	}
}

func TestListFlag(t *testing.T) {
	l := listFlag{values: []string{"default=1"}}
	_ = l.Set("a=1,b=2")
	_ = l.Set("c=3")
	if l.String() != "a=1,b=2,c=3" {
		t.Errorf("got %s", l.String())
	}
}
