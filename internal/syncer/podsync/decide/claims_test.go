package decide

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
)

// A claim leafsync provisioned into the member (internal/syncer/volumes)
// runs; another claim of the same pod still refuses it.
func TestProvisionedClaimsRun(t *testing.T) {
	hp := hostPod("h1")
	hp.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-0"}}}}
	in := newInput(hysteresis.Ready, hp, nil)
	in.Admission = podmeta.Admission{ClaimProvisioned: func(ns, name string) bool { return ns == hp.Namespace && name == "data-0" }}
	wantActions(t, Decide(in), AddFinalizer, CreateMember)

	hp.Spec.Volumes = append(hp.Spec.Volumes, corev1.Volume{Name: "other", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "theirs"}}})
	p := Decide(in)
	wantActions(t, p, Event)
	if a, _ := p.Get(Event); a.Reason != "NotSyncedVolumeClaim" {
		t.Errorf("%+v", a)
	}
}
