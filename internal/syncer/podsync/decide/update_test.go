package decide

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/leafsync/leafsync/hysteresis"
)

// running is a host pod on the leaf with its member pod, converged.
func running() (hp, mp *corev1.Pod) {
	hp = withMemberUID(withFinalizer(hostPod("h2")), "m-h2")
	hp.Generation = 1
	mp = memberOf(hp, "m-h2")
	mp.ResourceVersion = "11"
	return hp.DeepCopy(), mp
}

func TestUpdateConvergedPlanHasNoUpdate(t *testing.T) {
	hp, mp := running()
	p := Decide(newInput(hysteresis.Ready, hp, mp))
	if !slices.Equal(types_(p), []ActionType{SyncStatus}) {
		t.Fatalf("plan for a converged pod: %v", types_(p))
	}
}

func TestUpdateHostChanges(t *testing.T) {
	for name, change := range map[string]func(hp *corev1.Pod){
		"label":                 func(hp *corev1.Pod) { hp.Labels["tier"] = "front" },
		"label removed":         func(hp *corev1.Pod) { delete(hp.Labels, "app") },
		"annotation":            func(hp *corev1.Pod) { hp.Annotations = map[string]string{"team": "web"} },
		"image":                 func(hp *corev1.Pod) { hp.Spec.Containers[0].Image = "registry.example/app:2"; hp.Generation = 2 },
		"activeDeadlineSeconds": func(hp *corev1.Pod) { hp.Spec.ActiveDeadlineSeconds = ptr.To[int64](5); hp.Generation = 2 },
		"generation behind":     func(hp *corev1.Pod) { hp.Generation = 2 },
	} {
		t.Run(name, func(t *testing.T) {
			hp, mp := running()
			change(hp)
			p := Decide(newInput(hysteresis.Ready, hp, mp))
			a, ok := p.Get(UpdateMember)
			if !ok {
				t.Fatalf("no UpdateMember: %v", types_(p))
			}
			if a.MemberUID != "m-h2" || a.MemberResourceVersion != "11" || a.Update == nil {
				t.Errorf("update not conditional on the member pod decide saw: %+v", a)
			}
			// Status is mirrored after the member pod was written.
			if i, j := slices.Index(types_(p), UpdateMember), slices.Index(types_(p), SyncStatus); i > j {
				t.Errorf("order %v", types_(p))
			}
		})
	}
}

func TestUpdateNotForMemberPodFinishedGoingOrDown(t *testing.T) {
	for name, tc := range map[string]struct {
		st     hysteresis.State
		member func(mp *corev1.Pod)
	}{
		"terminal member pod":    {hysteresis.Ready, func(mp *corev1.Pod) { mp.Status.Phase = corev1.PodSucceeded }},
		"member pod terminating": {hysteresis.Ready, func(mp *corev1.Pod) { mp.DeletionTimestamp = hostPod("x").CreationTimestamp.DeepCopy() }},
		"member NotReady":        {hysteresis.NotReady, func(*corev1.Pod) {}},
		"member Recovering":      {hysteresis.Recovering, func(*corev1.Pod) {}},
	} {
		t.Run(name, func(t *testing.T) {
			hp, mp := running()
			hp.Labels["tier"] = "front"
			tc.member(mp)
			if p := Decide(newInput(tc.st, hp, mp)); p.Has(UpdateMember) {
				t.Fatalf("UpdateMember: %v", types_(p))
			}
		})
	}
}
