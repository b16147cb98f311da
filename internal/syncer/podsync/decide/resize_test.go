package decide

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
)

func cpu(req, limit string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(req)},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(limit)},
	}
}

// resizedPair is a running host pod with its member pod, both created
// with 100m/200m CPU, and the host pod then resized by change.
func resizedPair(change func(hp *corev1.Pod)) (hp, mp *corev1.Pod) {
	hp = withMemberUID(withFinalizer(hostPod("h1")), "m1")
	hp.Spec.InitContainers = []corev1.Container{{Name: "sidecar", Image: "i", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways), Resources: cpu("10m", "20m")}}
	hp.Spec.Containers[0].Resources = cpu("100m", "200m")
	mp = memberOf(hp, "m1")
	change(hp)
	return hp, mp
}

func TestResize(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(hp *corev1.Pod)
		want   string // ResizeMember's message, "" for none
	}{
		{"unchanged", func(*corev1.Pod) {}, ""},
		{"same quantity written differently is no resize", func(hp *corev1.Pod) {
			hp.Spec.Containers[0].Resources = cpu("0.1", "0.2")
		}, ""},
		{"container requests and limits", func(hp *corev1.Pod) {
			hp.Spec.Containers[0].Resources = cpu("300m", "400m")
		}, "resources of container app changed in the host"},
		{"memory added", func(hp *corev1.Pod) {
			hp.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("64Mi")
		}, "resources of container app changed in the host"},
		{"resizePolicy", func(hp *corev1.Pod) {
			hp.Spec.Containers[0].ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer}}
		}, "resources of container app changed in the host"},
		{"sidecar init container", func(hp *corev1.Pod) {
			hp.Spec.InitContainers[0].Resources = cpu("30m", "40m")
		}, "resources of container sidecar changed in the host"},
		{"pod-level resources and a container", func(hp *corev1.Pod) {
			hp.Spec.Resources = ptr.To(cpu("1", "2"))
			hp.Spec.Containers[0].Resources = cpu("300m", "400m")
		}, "resources of pod, container app changed in the host"},
		{"other spec changes are not a resize", func(hp *corev1.Pod) {
			hp.Spec.Containers[0].Image = "registry.example/app:2"
			hp.Spec.ActiveDeadlineSeconds = ptr.To[int64](60)
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hp, mp := resizedPair(tc.change)
			p := Decide(newInput(hysteresis.Ready, hp, mp))
			a, ok := p.Get(ResizeMember)
			if !ok {
				if tc.want != "" {
					t.Fatalf("no ResizeMember, want %q: %v", tc.want, types_(p))
				}
				return
			}
			if tc.want == "" {
				t.Fatalf("unexpected ResizeMember %q", a.Message)
			}
			if a.Message != tc.want || a.MemberUID != "m1" {
				t.Errorf("ResizeMember = %q for %s, want %q for m1", a.Message, a.MemberUID, tc.want)
			}
			// Before the update that claims the host generation, and
			// before the status mirror.
			if got := types_(p); !before(got, ResizeMember, UpdateMember) || !before(got, ResizeMember, SyncStatus) {
				t.Errorf("plan %v: ResizeMember must come before UpdateMember and SyncStatus", got)
			}
		})
	}
}

func TestResizeSkipped(t *testing.T) {
	grow := func(hp *corev1.Pod) { hp.Spec.Containers[0].Resources = cpu("300m", "400m") }
	t.Run("member pod terminating", func(t *testing.T) {
		hp, mp := resizedPair(grow)
		mp.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
		if p := Decide(newInput(hysteresis.Ready, hp, mp)); p.Has(ResizeMember) {
			t.Errorf("resize of a terminating member pod: %v", types_(p))
		}
	})
	t.Run("member pod finished", func(t *testing.T) {
		hp, mp := resizedPair(grow)
		mp.Status.Phase = corev1.PodSucceeded
		if p := Decide(newInput(hysteresis.Ready, hp, mp)); p.Has(ResizeMember) {
			t.Errorf("resize of a finished member pod: %v", types_(p))
		}
	})
	t.Run("member confirmed down", func(t *testing.T) {
		hp, mp := resizedPair(grow)
		if p := Decide(newInput(hysteresis.NotReady, hp, mp)); p.Has(ResizeMember) {
			t.Errorf("resize while NotReady: %v", types_(p))
		}
	})
	t.Run("member pod of another host pod", func(t *testing.T) {
		hp, mp := resizedPair(grow)
		mp.Labels[podmeta.LabelHostUID] = "old"
		hp.Annotations = nil
		if p := Decide(newInput(hysteresis.Ready, hp, mp)); p.Has(ResizeMember) {
			t.Errorf("resize of another incarnation's pod: %v", types_(p))
		}
	})
}

// before reports whether a is in plan, and b, if there, comes after it.
func before(plan []ActionType, a, b ActionType) bool {
	ia, ib := slices.Index(plan, a), slices.Index(plan, b)
	return ia >= 0 && (ib < 0 || ia < ib)
}
