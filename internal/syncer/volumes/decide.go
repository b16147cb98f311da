package volumes

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
	"github.com/leafsync/leafsync/internal/syncer/registration"
)

// action is what to do about one host claim or stand-in.
type action int

const (
	// nothing: all is as it should be, or up to someone else.
	nothing action = iota
	// createStandIn provisions the claim: the stand-in PV (plan.MemberClass
	// is its member class).
	createStandIn
	// refuse: nothing is made; a Warning Event on the host claim and its
	// pods (plan.Reason, plan.Message).
	refuse
	// setCapacity: the stand-in's capacity and the host claim's
	// status.capacity become plan.Capacity, the member claim's (the host
	// PV controller copies a PV's capacity to its claim only when it binds
	// them, before the member claim is bound).
	setCapacity
	// report: an Event on the host claim about its member claim.
	report
	// deleteMemberClaim: the host claim is gone and no member pod uses
	// the member claim.
	deleteMemberClaim
	// deleteStandIn: the host claim is gone, so is its member claim.
	deleteStandIn
)

// plan is a decision.
type plan struct {
	action      action
	Reason      string
	Message     string
	Warning     bool
	MemberClass string
	Capacity    resource.Quantity
}

// memberState is what leafsync knows of a member claim of a host claim's name.
type memberState struct {
	// Claim is the member's claim (nil: there is none).
	Claim *corev1.PersistentVolumeClaim
	// Ours: leafsync made Claim for this member (its labels).
	Ours bool
	// InUse: a member pod uses Claim.
	InUse bool
}

// decideProvision decides for host claim c, not bound yet, that the host
// scheduler placed (selected-node) on the leaf of member cluster, whose
// registration maps storage classes with classes: provision it, or refuse
// with a reason a person can act on. Nothing is made on a refusal.
func decideProvision(c *corev1.PersistentVolumeClaim, cluster string, classes map[string]string, m memberState) plan {
	class := storagehelpers.GetPersistentVolumeClaimClass(c)
	leaf := c.Annotations[storagehelpers.AnnSelectedNode]
	memberClass, mapped := classes[class]
	switch {
	case !mapped:
		return plan{action: refuse, Warning: true, Reason: "StorageClassNotMapped", Message: fmt.Sprintf(
			"claim %s/%s of StorageClass %s is used by a pod placed on leaf %s, but member %s's registration maps no member StorageClass for %s: the member's owner can add %s=<member class> to the Secret's annotation %s; nothing was created",
			c.Namespace, c.Name, class, leaf, cluster, class, class, registration.AnnotationStorageClasses)}
	case m.Claim != nil && !m.Ours:
		return plan{action: refuse, Warning: true, Reason: "MemberObjectConflict", Message: fmt.Sprintf(
			"member cluster %s already has PersistentVolumeClaim %s/%s, which leafsync did not create: it is never used, changed or deleted; rename the host claim, or the member's owner removes theirs; nothing was created",
			cluster, c.Namespace, c.Name)}
	case m.Claim != nil && m.Claim.Labels[podmeta.LabelHostUID] != string(c.UID):
		return plan{action: refuse, Warning: true, Reason: "MemberClaimRetained", Message: fmt.Sprintf(
			"member cluster %s still has claim %s/%s that leafsync made for an earlier host claim of this name (kept by reclaim policy Retain, or still used by a member pod): its data is not handed to a new claim; delete it in the member to provision anew",
			cluster, c.Namespace, c.Name)}
	}
	return plan{action: createStandIn, MemberClass: memberClass}
}

// released: the host claim of stand-in pv is gone (nil, or a new claim
// of its name).
func released(pv *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim) bool {
	ref := pv.Spec.ClaimRef
	return claim == nil || ref == nil || claim.UID != ref.UID
}

// decideFollow decides for stand-in pv and its host claim (nil: gone), from its
// member claim m.
//
//	host claim   member claim            -> action
//	bound        Bound, other capacity   -> setCapacity (stand-in, claim status)
//	bound        Lost                    -> report (Warning)
//	bound        Pending, used by a pod  -> report
//	gone         any, policy Retain      -> nothing (both kept)
//	gone         ours, used by a pod     -> nothing (wait for the pod)
//	gone         ours, unused            -> deleteMemberClaim
//	gone         none, or not ours       -> deleteStandIn
func decideFollow(pv *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim, cluster string, m memberState) plan {
	ref := pv.Spec.ClaimRef
	if released(pv, claim) {
		switch {
		case pv.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimRetain:
			return plan{}
		case m.Claim != nil && m.Ours && ref != nil && m.Claim.Labels[podmeta.LabelHostUID] == string(ref.UID):
			if m.InUse {
				return plan{}
			}
			return plan{action: deleteMemberClaim}
		}
		return plan{action: deleteStandIn}
	}
	if m.Claim == nil || !m.Ours {
		return plan{} // made with the claim's first pod (Ensure)
	}
	mc := m.Claim
	switch mc.Status.Phase {
	case corev1.ClaimBound:
		if q, ok := mc.Status.Capacity[corev1.ResourceStorage]; ok {
			onPV, onClaim := pv.Spec.Capacity[corev1.ResourceStorage], claim.Status.Capacity[corev1.ResourceStorage]
			if onPV.Cmp(q) != 0 || onClaim.Cmp(q) != 0 {
				return plan{action: setCapacity, Capacity: q}
			}
		}
	case corev1.ClaimLost:
		return plan{action: report, Warning: true, Reason: "MemberClaimLost", Message: fmt.Sprintf(
			"the claim's data lives in member %s, whose claim %s/%s is Lost (its PersistentVolume is gone): the member's owner can tell why",
			cluster, mc.Namespace, mc.Name)}
	case corev1.ClaimPending:
		if m.InUse {
			return plan{action: report, Reason: "MemberClaimPending", Message: fmt.Sprintf(
				"member %s's claim %s/%s (StorageClass %s) is Pending while a pod uses it: the member has not bound it yet",
				cluster, mc.Namespace, mc.Name, storagehelpers.GetPersistentVolumeClaimClass(mc))}
		}
	}
	return plan{}
}
