package volumes

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	applycorev1 "k8s.io/client-go/applyconfigurations/core/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
)

const (
	// Provisioner is the provisioner of the host StorageClasses whose
	// claims leafsync provisions into members. The host PV controller
	// writes it on a claim (storage-provisioner annotations) and waits for
	// it, as for any external provisioner.
	Provisioner = "leafsync.io/member"
	// annotationMemberClass on a stand-in is the member StorageClass its
	// member claim gets: the registration's mapping when it was
	// provisioned, so a later change of the mapping never changes a claim.
	annotationMemberClass = "leafsync.io/member-storage-class"
	// pathPrefix starts the stand-in's local path: it is never mounted (no
	// kubelet runs a leaf), it only says where the data is.
	pathPrefix = "/leafsync/member/"
)

// standInName is the name of the host PV that stands in for the member
// claim of host claim uid.
func standInName(uid types.UID) string { return "leafsync-" + string(uid) }

// ownerLabels mark what leafsync made for member cluster of host host,
// on behalf of the host object hostUID.
func ownerLabels(cluster, host string, hostUID types.UID) map[string]string {
	return map[string]string{
		podmeta.LabelManaged: "true", podmeta.LabelCluster: cluster,
		podmeta.LabelHost: host, podmeta.LabelHostUID: string(hostUID),
	}
}

// standIn is the host PV leafsync provisions for host claim c, placed on
// leaf of member cluster, whose member claim is of memberClass. Its
// nodeAffinity pins every pod of the claim to the leaf, its claimRef
// pre-binds it to c (the host PV controller completes the binding), its
// capacity is what c asks for until the member's claim is bound.
func standIn(c *corev1.PersistentVolumeClaim, cluster, host, leaf, memberClass string) *applycorev1.PersistentVolumeApplyConfiguration {
	spec := applycorev1.PersistentVolumeSpec().
		WithCapacity(corev1.ResourceList{corev1.ResourceStorage: c.Spec.Resources.Requests[corev1.ResourceStorage]}).
		WithAccessModes(c.Spec.AccessModes...).
		WithStorageClassName(storagehelpers.GetPersistentVolumeClaimClass(c)).
		WithPersistentVolumeReclaimPolicy(corev1.PersistentVolumeReclaimDelete).
		WithLocal(applycorev1.LocalVolumeSource().WithPath(fmt.Sprintf("%s%s/%s/%s", pathPrefix, cluster, c.Namespace, c.Name))).
		WithNodeAffinity(applycorev1.VolumeNodeAffinity().WithRequired(applycorev1.NodeSelector().WithNodeSelectorTerms(
			applycorev1.NodeSelectorTerm().WithMatchExpressions(applycorev1.NodeSelectorRequirement().
				WithKey(corev1.LabelHostname).WithOperator(corev1.NodeSelectorOpIn).WithValues(leaf))))).
		WithClaimRef(applycorev1.ObjectReference().WithAPIVersion("v1").WithKind("PersistentVolumeClaim").
			WithNamespace(c.Namespace).WithName(c.Name).WithUID(c.UID))
	if c.Spec.VolumeMode != nil {
		spec.WithVolumeMode(*c.Spec.VolumeMode)
	}
	return applycorev1.PersistentVolume(standInName(c.UID)).
		WithLabels(ownerLabels(cluster, host, c.UID)).
		WithAnnotations(map[string]string{storagehelpers.AnnDynamicallyProvisioned: Provisioner, annotationMemberClass: memberClass}).
		WithSpec(spec)
}

// standInCapacity is the apply configuration that sets a stand-in's
// capacity to the member claim's (field manager capacityManager).
func standInCapacity(name string, q resource.Quantity) *applycorev1.PersistentVolumeApplyConfiguration {
	return applycorev1.PersistentVolume(name).WithSpec(applycorev1.PersistentVolumeSpec().
		WithCapacity(corev1.ResourceList{corev1.ResourceStorage: q}))
}

// claimCapacity is the apply configuration of host claim c's
// status.capacity (field manager capacityManager).
func claimCapacity(c *corev1.PersistentVolumeClaim, q resource.Quantity) *applycorev1.PersistentVolumeClaimApplyConfiguration {
	return applycorev1.PersistentVolumeClaim(c.Name, c.Namespace).WithStatus(applycorev1.PersistentVolumeClaimStatus().
		WithCapacity(corev1.ResourceList{corev1.ResourceStorage: q}))
}

// memberClaimOf is the member's claim for host claim c: same name and
// namespace, what c asks for, the member's class, leafsync's labels
// (with c's own).
func memberClaimOf(c *corev1.PersistentVolumeClaim, cluster, host, memberClass string) *corev1.PersistentVolumeClaim {
	labels := map[string]string{}
	for k, v := range c.Labels {
		labels[k] = v
	}
	for k, v := range ownerLabels(cluster, host, c.UID) {
		labels[k] = v
	}
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: c.Name, Namespace: c.Namespace, Labels: labels},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      c.Spec.AccessModes,
			Resources:        corev1.VolumeResourceRequirements{Requests: c.Spec.Resources.Requests},
			StorageClassName: &memberClass,
			VolumeMode:       c.Spec.VolumeMode,
		},
	}
}

// isStandIn: pv is a stand-in leafsync made for member cluster (any
// cluster when cluster is "") of this host.
func isStandIn(pv *corev1.PersistentVolume, cluster, host string) bool {
	if pv == nil || pv.Annotations[storagehelpers.AnnDynamicallyProvisioned] != Provisioner {
		return false
	}
	if cluster == "" {
		cluster = pv.Labels[podmeta.LabelCluster]
	}
	return podmeta.OwnedBy(pv.Labels, cluster, host)
}
