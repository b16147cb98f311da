package volumes

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/leafsync/leafsync/internal/syncer/clusters"
	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
)

// Provisioned: yes for a claim bound to this member's stand-in, no for
// any other claim once the caches have synced; yes before (pod sync
// deletes the member pod of a pod it would not run: a restart must never
// cost a running pod), while Ensure makes no member claim before.
func TestProvisioned(t *testing.T) {
	ours := hostClaim()
	ours.Spec.VolumeName = standInName(ours.UID)
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: ours.Spec.VolumeName,
			Labels:      map[string]string{podmeta.LabelManaged: "true", podmeta.LabelCluster: "east"},
			Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": Provisioner}},
		Spec: corev1.PersistentVolumeSpec{ClaimRef: &corev1.ObjectReference{Namespace: ours.Namespace, Name: ours.Name, UID: ours.UID}},
	}
	other := hostClaim()
	other.Name, other.UID, other.Spec.VolumeName = "theirs", "c9", "nfs-1"
	host := fake.NewClientset(ours, other, pv)
	c := New(Options{Host: host, Registry: &clusters.Registry{}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	if !c.Provisioned("east", "apps", "theirs") {
		t.Error("before the caches synced: no")
	}
	if err := c.Ensure(ctx, "east", fake.NewClientset(), podWithClaim("theirs")); err == nil {
		t.Error("Ensure before the caches synced: no error")
	}

	c.factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		t.Fatal("caches")
	}
	for claim, want := range map[string]bool{ours.Name: true, "theirs": false, "missing": false} {
		if got := c.Provisioned("east", "apps", claim); got != want {
			t.Errorf("%s: %v, want %v", claim, got, want)
		}
	}
	if c.Provisioned("west", "apps", ours.Name) {
		t.Error("another member's: yes")
	}
	member := fake.NewClientset()
	if err := c.Ensure(ctx, "east", member, podWithClaim(ours.Name)); err != nil {
		t.Fatal(err)
	}
	mc, err := member.CoreV1().PersistentVolumeClaims("apps").Get(ctx, ours.Name, metav1.GetOptions{})
	if err != nil || mc.Labels[podmeta.LabelHostUID] != string(ours.UID) {
		t.Errorf("member claim %v: %v", mc, err)
	}
}

func podWithClaim(claim string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "apps"}, Spec: corev1.PodSpec{Volumes: []corev1.Volume{{
		Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}},
	}}}}
}
