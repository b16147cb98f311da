package volumes

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
)

func hostClaim() *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data-db-0", Namespace: "apps", UID: "c1",
			Labels:      map[string]string{"app": "db"},
			Annotations: map[string]string{"volume.kubernetes.io/selected-node": "leaf-east"}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To("fast"),
			VolumeMode:       ptr.To(corev1.PersistentVolumeFilesystem),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("100Mi")}},
		},
	}
}

// The stand-in pins the claim's pods to the leaf, is pre-bound to the
// claim, of its class, capacity and access modes, and is recognised as
// leafsync's for that member only.
func TestStandIn(t *testing.T) {
	c := hostClaim()
	a := standIn(c, "east", "host-1", "leaf-east", "member-ssd")
	if *a.Name != "leafsync-c1" {
		t.Errorf("name %s", *a.Name)
	}
	s := a.Spec
	req := s.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0]
	if *req.Key != corev1.LabelHostname || *req.Operator != corev1.NodeSelectorOpIn || len(req.Values) != 1 || req.Values[0] != "leaf-east" {
		t.Errorf("node affinity %+v", req)
	}
	if *s.ClaimRef.Name != "data-db-0" || *s.ClaimRef.Namespace != "apps" || *s.ClaimRef.UID != "c1" {
		t.Errorf("claimRef %+v", s.ClaimRef)
	}
	if *s.StorageClassName != "fast" || *s.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete || *s.VolumeMode != corev1.PersistentVolumeFilesystem {
		t.Errorf("class %s policy %s mode %s", *s.StorageClassName, *s.PersistentVolumeReclaimPolicy, *s.VolumeMode)
	}
	if q := (*s.Capacity)[corev1.ResourceStorage]; q.String() != "100Mi" || len(s.AccessModes) != 1 {
		t.Errorf("capacity %s access %v", q.String(), s.AccessModes)
	}
	if !strings.Contains(*s.Local.Path, "east/apps/data-db-0") {
		t.Errorf("path %s", *s.Local.Path)
	}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Labels: a.Labels, Annotations: a.Annotations}}
	if !isStandIn(pv, "east", "host-1") || !isStandIn(pv, "", "host-1") || isStandIn(pv, "west", "host-1") || isStandIn(pv, "east", "host-2") {
		t.Error("isStandIn does not tell this member's stand-ins")
	}
	if a.Annotations[annotationMemberClass] != "member-ssd" {
		t.Errorf("annotations %v", a.Annotations)
	}

	m := memberClaimOf(c, "east", "host-1", "member-ssd")
	if m.Name != c.Name || m.Namespace != c.Namespace || *m.Spec.StorageClassName != "member-ssd" || m.Labels["app"] != "db" ||
		!podmeta.OwnedBy(m.Labels, "east", "host-1") || m.Labels[podmeta.LabelHostUID] != "c1" {
		t.Errorf("member claim %+v", m)
	}
	if q := m.Spec.Resources.Requests[corev1.ResourceStorage]; q.String() != "100Mi" {
		t.Errorf("member request %s", q.String())
	}
}

func memberClaim(hostUID string, phase corev1.PersistentVolumeClaimPhase, capacity string) *corev1.PersistentVolumeClaim {
	mc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-db-0", Namespace: "apps",
		Labels: map[string]string{podmeta.LabelHostUID: hostUID}}}
	mc.Status.Phase = phase
	if capacity != "" {
		mc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(capacity)}
	}
	return mc
}

func TestProvision(t *testing.T) {
	classes := map[string]string{"fast": "member-ssd"}
	ours := memberClaim("c1", corev1.ClaimPending, "")
	for name, tc := range map[string]struct {
		classes map[string]string
		m       memberState
		want    action
		reason  string
		says    []string
	}{
		"mapped, no member claim":   {classes, memberState{}, createStandIn, "", nil},
		"mapped, our member claim":  {classes, memberState{Claim: ours, Ours: true}, createStandIn, "", nil},
		"unmapped":                  {map[string]string{"slow": "x"}, memberState{}, refuse, "StorageClassNotMapped", []string{"fast", "leafsync.io/storage-classes", "east", "leaf-east"}},
		"member's own claim":        {classes, memberState{Claim: memberClaim("", corev1.ClaimBound, "1Gi")}, refuse, "MemberObjectConflict", []string{"east", "apps/data-db-0"}},
		"ours, of an earlier claim": {classes, memberState{Claim: memberClaim("c0", corev1.ClaimBound, "1Gi"), Ours: true}, refuse, "MemberClaimRetained", []string{"Retain"}},
	} {
		p := decideProvision(hostClaim(), "east", tc.classes, tc.m)
		if p.action != tc.want || p.Reason != tc.reason {
			t.Errorf("%s: %+v", name, p)
		}
		for _, w := range tc.says {
			if !strings.Contains(p.Message, w) {
				t.Errorf("%s: message does not say %q: %s", name, w, p.Message)
			}
		}
		if p.action == createStandIn && p.MemberClass != "member-ssd" {
			t.Errorf("%s: member class %q", name, p.MemberClass)
		}
	}
}

func TestFollow(t *testing.T) {
	c := hostClaim()
	pv := func(policy corev1.PersistentVolumeReclaimPolicy) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("100Mi")},
			ClaimRef:                      &corev1.ObjectReference{Namespace: "apps", Name: "data-db-0", UID: "c1"},
			PersistentVolumeReclaimPolicy: policy,
		}}
	}
	bound := func(capacity string) *corev1.PersistentVolumeClaim {
		c := hostClaim()
		c.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(capacity)}
		return c
	}
	newClaim := hostClaim()
	newClaim.UID = "c2"
	del, retain := corev1.PersistentVolumeReclaimDelete, corev1.PersistentVolumeReclaimRetain
	for name, tc := range map[string]struct {
		policy corev1.PersistentVolumeReclaimPolicy
		claim  *corev1.PersistentVolumeClaim
		m      memberState
		want   action
	}{
		"bound, member claim not made yet":     {del, c, memberState{}, nothing},
		"bound, member Bound at 1Gi":           {del, c, memberState{Claim: memberClaim("c1", corev1.ClaimBound, "1Gi"), Ours: true}, setCapacity},
		"bound, member Bound at the same":      {del, bound("100Mi"), memberState{Claim: memberClaim("c1", corev1.ClaimBound, "100Mi"), Ours: true}, nothing},
		"bound, claim status behind":           {del, bound("1Gi"), memberState{Claim: memberClaim("c1", corev1.ClaimBound, "100Mi"), Ours: true}, setCapacity},
		"bound, member Lost":                   {del, c, memberState{Claim: memberClaim("c1", corev1.ClaimLost, ""), Ours: true}, report},
		"bound, member Pending, used":          {del, c, memberState{Claim: memberClaim("c1", corev1.ClaimPending, ""), Ours: true, InUse: true}, report},
		"bound, member Pending, unused":        {del, c, memberState{Claim: memberClaim("c1", corev1.ClaimPending, ""), Ours: true}, nothing},
		"bound, member's own claim":            {del, c, memberState{Claim: memberClaim("", corev1.ClaimLost, "")}, nothing},
		"gone, Retain":                         {retain, nil, memberState{Claim: memberClaim("c1", corev1.ClaimBound, "1Gi"), Ours: true}, nothing},
		"gone, member claim used":              {del, nil, memberState{Claim: memberClaim("c1", corev1.ClaimBound, "1Gi"), Ours: true, InUse: true}, nothing},
		"gone, member claim unused":            {del, nil, memberState{Claim: memberClaim("c1", corev1.ClaimBound, "1Gi"), Ours: true}, deleteMemberClaim},
		"gone, member claim deleted":           {del, nil, memberState{}, deleteStandIn},
		"gone, member's own claim of the name": {del, nil, memberState{Claim: memberClaim("", corev1.ClaimBound, "1Gi")}, deleteStandIn},
		"replaced by a new claim of the name":  {del, newClaim, memberState{Claim: memberClaim("c1", corev1.ClaimBound, "1Gi"), Ours: true}, deleteMemberClaim},
		"gone, ours for another claim (c2)":    {del, nil, memberState{Claim: memberClaim("c2", corev1.ClaimBound, "1Gi"), Ours: true}, deleteStandIn},
	} {
		p := decideFollow(pv(tc.policy), tc.claim, "east", tc.m)
		if p.action != tc.want {
			t.Errorf("%s: %+v, want action %d", name, p, tc.want)
		}
		if p.action == setCapacity && p.Capacity.String() != tc.m.Claim.Status.Capacity.Storage().String() {
			t.Errorf("%s: capacity %s", name, p.Capacity.String())
		}
		if p.action == report && (p.Reason == "" || !strings.Contains(p.Message, "east")) {
			t.Errorf("%s: %+v", name, p)
		}
	}
}
