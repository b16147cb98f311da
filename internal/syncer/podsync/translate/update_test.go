package translate

import (
	"encoding/json"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/utils/ptr"

	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
)

// updated is a host pod and the member pod leafsync created for it before
// change changed the host pod; the member side annotated its pod too.
func updated(change func(hp *corev1.Pod)) (hp, mp *corev1.Pod) {
	hp = hostPod("h1")
	hp.Generation = 1
	hp.Annotations = map[string]string{"team": "web", "gone": "soon"}
	hp.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "registry.example/init:1"}}
	hp.Spec.Tolerations = []corev1.Toleration{
		{Key: "leafsync.io/leaf", Operator: corev1.TolerationOpExists},
		{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
	}
	mp, _ = MemberPod(hp, testCluster, testLeaf, testHost)
	mp.UID, mp.ResourceVersion = "m1", "7"
	mp.Annotations["webhook.member.example/injected"] = "yes"
	mp.Labels["member.example/zone"] = "z1"
	hp = hp.DeepCopy()
	change(hp)
	return hp, mp
}

// apply is the member pod after the update's patch, as the member's API
// server merges it.
func apply(t *testing.T, mp *corev1.Pod, u *Update) *corev1.Pod {
	t.Helper()
	patch, err := u.Patch(mp.UID, mp.ResourceVersion)
	if err != nil {
		t.Fatal(err)
	}
	orig, _ := json.Marshal(mp)
	merged, err := strategicpatch.StrategicMergePatch(orig, patch, &corev1.Pod{})
	if err != nil {
		t.Fatal(err)
	}
	out := &corev1.Pod{}
	if err := json.Unmarshal(merged, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestMemberUpdateNothingWhenConverged(t *testing.T) {
	hp, mp := updated(func(*corev1.Pod) {})
	if u := MemberUpdate(hp, mp); u != nil {
		t.Fatalf("update for a converged pod: %s", u)
	}
}

func TestMemberUpdate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(hp *corev1.Pod)
		check  func(t *testing.T, mp *corev1.Pod)
	}{{
		name:   "label added and changed",
		change: func(hp *corev1.Pod) { hp.Labels["app"] = "web2"; hp.Labels["tier"] = "front" },
		check: func(t *testing.T, mp *corev1.Pod) {
			if mp.Labels["app"] != "web2" || mp.Labels["tier"] != "front" {
				t.Errorf("labels %v", mp.Labels)
			}
			if mp.Annotations[podmeta.AnnotationHostLabels] != "app,tier" {
				t.Errorf("host label record %q", mp.Annotations[podmeta.AnnotationHostLabels])
			}
		},
	}, {
		name:   "label removed, the member's own kept",
		change: func(hp *corev1.Pod) { delete(hp.Labels, "app") },
		check: func(t *testing.T, mp *corev1.Pod) {
			if _, ok := mp.Labels["app"]; ok {
				t.Errorf("removed host label still on the member pod: %v", mp.Labels)
			}
			if mp.Labels["member.example/zone"] != "z1" || mp.Labels[podmeta.LabelHostUID] != "h1" {
				t.Errorf("member-side or leafsync label lost: %v", mp.Labels)
			}
		},
	}, {
		name:   "annotation changed and removed, the member's own kept",
		change: func(hp *corev1.Pod) { hp.Annotations["team"] = "db"; delete(hp.Annotations, "gone") },
		check: func(t *testing.T, mp *corev1.Pod) {
			if mp.Annotations["team"] != "db" {
				t.Errorf("team = %q", mp.Annotations["team"])
			}
			if _, ok := mp.Annotations["gone"]; ok {
				t.Errorf("removed host annotation still there")
			}
			if mp.Annotations["webhook.member.example/injected"] != "yes" {
				t.Errorf("member-added annotation removed: %v", mp.Annotations)
			}
			if mp.Annotations[podmeta.AnnotationHostAnnotations] != "team" {
				t.Errorf("host annotation record %q", mp.Annotations[podmeta.AnnotationHostAnnotations])
			}
		},
	}, {
		name: "images",
		change: func(hp *corev1.Pod) {
			hp.Spec.Containers[0].Image = "registry.example/app:2"
			hp.Spec.InitContainers[0].Image = "init:2"
			hp.Generation = 2
		},
		check: func(t *testing.T, mp *corev1.Pod) {
			if mp.Spec.Containers[0].Image != "registry.example/app:2" || mp.Spec.InitContainers[0].Image != "init:2" {
				t.Errorf("images %s, %s", mp.Spec.Containers[0].Image, mp.Spec.InitContainers[0].Image)
			}
			if mp.Annotations[podmeta.AnnotationHostGeneration] != "2" {
				t.Errorf("host generation %q", mp.Annotations[podmeta.AnnotationHostGeneration])
			}
			if mp.Annotations[podmeta.AnnotationSpecHash] == "" || mp.Annotations[podmeta.AnnotationSpecHash] == hostSpecHashBefore() {
				t.Errorf("spec hash not updated: %q", mp.Annotations[podmeta.AnnotationSpecHash])
			}
		},
	}, {
		name:   "activeDeadlineSeconds",
		change: func(hp *corev1.Pod) { hp.Spec.ActiveDeadlineSeconds = ptr.To[int64](5); hp.Generation = 2 },
		check: func(t *testing.T, mp *corev1.Pod) {
			if ads := mp.Spec.ActiveDeadlineSeconds; ads == nil || *ads != 5 {
				t.Errorf("activeDeadlineSeconds %v", ads)
			}
		},
	}, {
		name: "toleration added, leafsync's left out",
		change: func(hp *corev1.Pod) {
			hp.Spec.Tolerations = append(hp.Spec.Tolerations, corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpExists},
				corev1.Toleration{Key: "leafsync.io/other", Operator: corev1.TolerationOpExists})
			hp.Spec.Tolerations[1].TolerationSeconds = ptr.To[int64](60)
		},
		check: func(t *testing.T, mp *corev1.Pod) {
			want := []corev1.Toleration{
				{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](60)},
				{Key: "gpu", Operator: corev1.TolerationOpExists},
			}
			if !reflect.DeepEqual(mp.Spec.Tolerations, want) {
				t.Errorf("tolerations %+v", mp.Spec.Tolerations)
			}
		},
	}, {
		name:   "generation alone",
		change: func(hp *corev1.Pod) { hp.Generation = 3 },
		check: func(t *testing.T, mp *corev1.Pod) {
			if mp.Annotations[podmeta.AnnotationHostGeneration] != "3" {
				t.Errorf("host generation %q", mp.Annotations[podmeta.AnnotationHostGeneration])
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			hp, mp := updated(tc.change)
			u := MemberUpdate(hp, mp)
			if u == nil {
				t.Fatal("no update")
			}
			after := apply(t, mp, u)
			tc.check(t, after)
			if again := MemberUpdate(hp, after); again != nil {
				t.Errorf("not converged after the update: %s", again)
			}
		})
	}
}

func hostSpecHashBefore() string {
	hp, _ := updated(func(*corev1.Pod) {})
	return HostSpecHash(hp)
}

// A member pod made before the record existed loses no key: the first
// update only writes the record.
func TestMemberUpdateWithoutRecord(t *testing.T) {
	hp, mp := updated(func(hp *corev1.Pod) { delete(hp.Annotations, "gone") })
	delete(mp.Annotations, podmeta.AnnotationHostAnnotations)
	delete(mp.Annotations, podmeta.AnnotationHostLabels)
	after := apply(t, mp, MemberUpdate(hp, mp))
	if after.Annotations["gone"] != "soon" {
		t.Errorf("a key removed without a record of who wrote it")
	}
	if after.Annotations[podmeta.AnnotationHostAnnotations] != "team" {
		t.Errorf("record not written: %v", after.Annotations)
	}
}

func TestMemberPodRecordsHostKeys(t *testing.T) {
	hp := hostPod("h1")
	hp.Generation = 4
	hp.Annotations = map[string]string{"b": "1", "a": "2", corev1.LastAppliedConfigAnnotation: "{}"}
	mp, _ := MemberPod(hp, testCluster, testLeaf, testHost)
	for k, want := range map[string]string{
		podmeta.AnnotationHostLabels: "app", podmeta.AnnotationHostAnnotations: "a,b", podmeta.AnnotationHostGeneration: "4",
	} {
		if mp.Annotations[k] != want {
			t.Errorf("%s = %q, want %q", k, mp.Annotations[k], want)
		}
	}
}

func TestUpdatePatchPreconditions(t *testing.T) {
	hp, mp := updated(func(hp *corev1.Pod) { hp.Labels["x"] = "y" })
	data, err := MemberUpdate(hp, mp).Patch("m1", "7")
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Metadata struct{ UID, ResourceVersion string }
		Spec     map[string]any
	}
	if err := json.Unmarshal(data, &p); err != nil {
		t.Fatal(err)
	}
	if p.Metadata.UID != "m1" || p.Metadata.ResourceVersion != "7" || p.Spec != nil {
		t.Errorf("patch %s", data)
	}
}
