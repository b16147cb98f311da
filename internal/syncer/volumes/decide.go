package volumes

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
	"github.com/leafsync/leafsync/internal/syncer/registration"
)

// Action is what to do about one host claim or stand-in.
type Action int

const (
	// Nothing: all is as it should be, or up to someone else.
	Nothing Action = iota
	// CreateStandIn provisions the claim: the stand-in PV (Plan.MemberClass
	// is its member class).
	CreateStandIn
	// Refuse: nothing is made; a Warning Event on the host claim and its
	// pods (Plan.Reason, Plan.Message).
	Refuse
	// SetCapacity: the stand-in's capacity and the host claim's
	// status.capacity become Plan.Capacity, the member claim's (the host
	// PV controller copies a PV's capacity to its claim only when it binds
	// them, before the member claim is bound).
	SetCapacity
	// Report: an Event on the host claim about its member claim.
	Report
	// DeleteMemberClaim: the host claim is gone and no member pod uses
	// the member claim.
	DeleteMemberClaim
	// DeleteStandIn: the host claim is gone, so is its member claim.
	DeleteStandIn
)

// Plan is a decision.
type Plan struct {
	Action      Action
	Reason      string
	Message     string
	Warning     bool
	MemberClass string
	Capacity    resource.Quantity
}

// Member is what leafsync knows of a member claim of a host claim's name.
type Member struct {
	// Claim is the member's claim (nil: there is none).
	Claim *corev1.PersistentVolumeClaim
	// Ours: leafsync made Claim for this member (its labels).
	Ours bool
	// InUse: a member pod uses Claim.
	InUse bool
}

// Provision decides for host claim c, not bound yet, that the host
// scheduler placed (selected-node) on the leaf of member cluster, whose
// registration maps storage classes with classes: provision it, or refuse
// with a reason a person can act on. Nothing is made on a refusal.
func Provision(c *corev1.PersistentVolumeClaim, cluster string, classes map[string]string, m Member) Plan {
	class := storagehelpers.GetPersistentVolumeClaimClass(c)
	leaf := c.Annotations[storagehelpers.AnnSelectedNode]
	memberClass, mapped := classes[class]
	switch {
	case !mapped:
		return Plan{Action: Refuse, Warning: true, Reason: "StorageClassNotMapped", Message: fmt.Sprintf(
			"claim %s/%s of StorageClass %s is used by a pod placed on leaf %s, but member %s's registration maps no member StorageClass for %s: the member's owner can add %s=<member class> to the Secret's annotation %s; nothing was created",
			c.Namespace, c.Name, class, leaf, cluster, class, class, registration.AnnotationStorageClasses)}
	case m.Claim != nil && !m.Ours:
		return Plan{Action: Refuse, Warning: true, Reason: "MemberObjectConflict", Message: fmt.Sprintf(
			"member cluster %s already has PersistentVolumeClaim %s/%s, which leafsync did not create: it is never used, changed or deleted; rename the host claim, or the member's owner removes theirs; nothing was created",
			cluster, c.Namespace, c.Name)}
	case m.Claim != nil && m.Claim.Labels[podmeta.LabelHostUID] != string(c.UID):
		return Plan{Action: Refuse, Warning: true, Reason: "MemberClaimRetained", Message: fmt.Sprintf(
			"member cluster %s still has claim %s/%s that leafsync made for an earlier host claim of this name (kept by reclaim policy Retain, or still used by a member pod): its data is not handed to a new claim; delete it in the member to provision anew",
			cluster, c.Namespace, c.Name)}
	}
	return Plan{Action: CreateStandIn, MemberClass: memberClass}
}

// Released: the host claim of stand-in pv is gone (nil, or a new claim
// of its name).
func Released(pv *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim) bool {
	ref := pv.Spec.ClaimRef
	return claim == nil || ref == nil || claim.UID != ref.UID
}

// Follow decides for stand-in pv and its host claim (nil: gone), from its
// member claim m.
//
//	host claim   member claim            -> action
//	bound        Bound, other capacity   -> SetCapacity (stand-in, claim status)
//	bound        Lost                    -> Report (Warning)
//	bound        Pending, used by a pod  -> Report
//	gone         any, policy Retain      -> Nothing (both kept)
//	gone         ours, used by a pod     -> Nothing (wait for the pod)
//	gone         ours, unused            -> DeleteMemberClaim
//	gone         none, or not ours       -> DeleteStandIn
func Follow(pv *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim, cluster string, m Member) Plan {
	ref := pv.Spec.ClaimRef
	if Released(pv, claim) {
		switch {
		case pv.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimRetain:
			return Plan{}
		case m.Claim != nil && m.Ours && ref != nil && m.Claim.Labels[podmeta.LabelHostUID] == string(ref.UID):
			if m.InUse {
				return Plan{}
			}
			return Plan{Action: DeleteMemberClaim}
		}
		return Plan{Action: DeleteStandIn}
	}
	if m.Claim == nil || !m.Ours {
		return Plan{} // made with the claim's first pod (Ensure)
	}
	mc := m.Claim
	switch mc.Status.Phase {
	case corev1.ClaimBound:
		if q, ok := mc.Status.Capacity[corev1.ResourceStorage]; ok {
			onPV, onClaim := pv.Spec.Capacity[corev1.ResourceStorage], claim.Status.Capacity[corev1.ResourceStorage]
			if onPV.Cmp(q) != 0 || onClaim.Cmp(q) != 0 {
				return Plan{Action: SetCapacity, Capacity: q}
			}
		}
	case corev1.ClaimLost:
		return Plan{Action: Report, Warning: true, Reason: "MemberClaimLost", Message: fmt.Sprintf(
			"the claim's data lives in member %s, whose claim %s/%s is Lost (its PersistentVolume is gone): the member's owner can tell why",
			cluster, mc.Namespace, mc.Name)}
	case corev1.ClaimPending:
		if m.InUse {
			return Plan{Action: Report, Reason: "MemberClaimPending", Message: fmt.Sprintf(
				"member %s's claim %s/%s (StorageClass %s) is Pending while a pod uses it: the member has not bound it yet",
				cluster, mc.Namespace, mc.Name, storagehelpers.GetPersistentVolumeClaimClass(mc))}
		}
	}
	return Plan{}
}
