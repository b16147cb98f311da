// Package podmeta is the vocabulary pod sync shares between its decision
// (podsync/decide), its execution (podsync) and the tests: the labels and
// annotations leafsync puts on host pods and member objects, the finalizer,
// the causes of a host deletion (CauseOf), the stale-eviction Policy and
// what a member's owner agreed to run (Admission).
package podmeta

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/leafsync/leafsync/internal/syncer/registration"
)

// Labels and annotations leafsync puts on the objects it creates in a
// member, and on host pods. Labels use the leafsync.io/ prefix so that the
// member's informer keeps synced pods whole (member.IsLeafsyncPod).
const (
	// LabelManaged ("true") marks every object leafsync created in a member.
	LabelManaged = "leafsync.io/managed"
	// LabelCluster is the member's cluster name (as registered in the host).
	LabelCluster = "leafsync.io/cluster"
	// LabelHostUID is the UID of the host object a member object stands for.
	LabelHostUID = "leafsync.io/host-uid"
	// LabelHost is the identity of the host whose leafsync created a
	// member object (the UID of the host's kube-system namespace), so that
	// two hosts sharing a member never take each other's objects.
	LabelHost = "leafsync.io/host"

	// AnnotationLeaf names the leaf node the host pod was bound to.
	AnnotationLeaf = "leafsync.io/leaf"
	// AnnotationSpecHash is the hash of the member pod spec leafsync built;
	// a recreated host pod with the same hash may adopt the member pod.
	AnnotationSpecHash = "leafsync.io/spec-hash"
	// AnnotationHostGeneration, on a member pod, is the host pod's
	// metadata.generation whose spec leafsync last wrote to it (at create
	// and by every update). Once the member's kubelet has observed the
	// member pod's own generation, the host pod's status.observedGeneration
	// is this value.
	AnnotationHostGeneration = "leafsync.io/host-generation"
	// AnnotationHostLabels and AnnotationHostAnnotations, on a member pod,
	// list (sorted, comma-separated) the keys of the host pod's labels and
	// annotations leafsync last wrote to it, so that an update removes a
	// key the host removed and never one the member side added
	// (translate.MemberUpdate).
	AnnotationHostLabels      = "leafsync.io/host-labels"
	AnnotationHostAnnotations = "leafsync.io/host-annotations"
	// AnnotationOwner is the host pod's controller, "Kind/name".
	AnnotationOwner = "leafsync.io/owner"
	// AnnotationOrphaned is set on a member pod kept by the Retain policy
	// after its host pod went (the time it was retained, RFC 3339).
	AnnotationOrphaned = "leafsync.io/orphaned"

	// AnnotationMemberUID, on a host pod, is the UID of its member pod
	// (set once leafsync created or adopted it). A host pod that has it
	// and whose member pod is gone was deleted in the member.
	AnnotationMemberUID = "leafsync.io/member-uid"
	// AnnotationMemberServiceAccount, on a host pod, opts in to running the
	// member pod as that member ServiceAccount, with the member's token
	// mounted as the member's ServiceAccount says. Without it the member
	// pod runs as its namespace's default ServiceAccount with no token.
	AnnotationMemberServiceAccount = "leafsync.io/member-service-account"

	// FinalizerMemberPod holds a host pod while its member pod may exist.
	FinalizerMemberPod = "leafsync.io/member-pod"

	// AnnotationStaleEvictionPolicy, on a registration Secret, overrides
	// podSync.staleEvictionPolicy for that member.
	AnnotationStaleEvictionPolicy = registration.AnnotationStaleEvictionPolicy
)

// Policy is what happens to a member pod whose host pod was evicted by a
// cause that no longer holds (a stale eviction).
type Policy string

const (
	// DeferUntilReplaced keeps the member pod running until the host's
	// replacement from the same owner is Ready (at most MaxDeferral), then
	// deletes it.
	DeferUntilReplaced Policy = "DeferUntilReplaced"
	// Retain keeps the member pod and reports it as an orphan.
	Retain Policy = "Retain"
	// Forward deletes the member pod as the host did (the naive behaviour,
	// kept for comparison).
	Forward Policy = "Forward"
)

// Policies lists the valid policies.
var Policies = []Policy{DeferUntilReplaced, Retain, Forward}

// ParsePolicy parses a policy name.
func ParsePolicy(s string) (Policy, error) {
	for _, p := range Policies {
		if string(p) == s {
			return p, nil
		}
	}
	names := make([]string, len(Policies))
	for i, p := range Policies {
		names[i] = string(p)
	}
	return "", fmt.Errorf("unknown stale-eviction policy %q (want one of %s)", s, strings.Join(names, ", "))
}

// Causes of a host pod deletion: the reason of its DisruptionTarget
// condition, "" for none, or CauseOrphan for a member pod found without
// its host pod.
const (
	CauseNone         = ""
	CauseEvictionAPI  = "EvictionByEvictionAPI"
	CausePreemption   = "PreemptionByScheduler"
	CauseTaintManager = "DeletionByTaintManager"
	CausePodGC        = "DeletionByPodGC"
	// CauseOrphan: leafsync found one of its member pods with no host pod
	// and no record of why (state lost, finalizer removed by hand); it is
	// handled like a stale eviction.
	CauseOrphan = "Orphan"
)

// CauseOf classifies a host pod's deletion: the reason of its
// DisruptionTarget=True condition, or CauseNone (a user's or a
// controller's DELETE). An eviction condition set long before the delete
// was asked for is left over from an eviction that was refused: the delete
// is someone's later decision (CauseNone).
func CauseOf(p *corev1.Pod) string {
	for i := range p.Status.Conditions {
		c := &p.Status.Conditions[i]
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			if IsEvictionCause(c.Reason) && leftOverCondition(p, c) {
				return CauseNone
			}
			return c.Reason
		}
	}
	return CauseNone
}

// IsEvictionCause reports whether a cause is an eviction the node's state
// brought about (taint manager, pod GC, or an orphan), which may be stale
// by the time leafsync acts. Every other cause (none, Eviction API,
// preemption, kubelet, unknown reasons) is someone's decision about the
// pod itself, and is forwarded.
func IsEvictionCause(cause string) bool {
	return cause == CauseTaintManager || cause == CausePodGC || cause == CauseOrphan
}

func HasFinalizer(p *corev1.Pod) bool {
	for _, f := range p.Finalizers {
		if f == FinalizerMemberPod {
			return true
		}
	}
	return false
}

// OwnerOf returns a pod's controller as "Kind/name" ("" if none).
func OwnerOf(p *corev1.Pod) string {
	for _, r := range p.OwnerReferences {
		if r.Controller != nil && *r.Controller {
			return r.Kind + "/" + r.Name
		}
	}
	return ""
}

func SplitOwner(owner string) (kind, name string) {
	kind, name, ok := strings.Cut(owner, "/")
	if !ok {
		return "", ""
	}
	return kind, name
}

func IsTerminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

func IsReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Ours reports whether a member pod is one leafsync created for this
// host's registration of cluster.
func Ours(mp *corev1.Pod, cluster, host string) bool {
	return OwnedBy(mp.Labels, cluster, host) && mp.Labels[LabelHostUID] != ""
}

// OwnedBy reports whether a member object's labels say this host's
// leafsync created it for cluster: managed, the cluster's, and the host's
// identity. An object without LabelHost was created by a leafsync older
// than the label; it counts as this host's because pod sync runs only for
// a member whose claim this host holds (internal/syncer/clusters), so no other host
// registers the member under this cluster name. An object with another
// host's identity is never deleted, adopted or relabelled.
func OwnedBy(l map[string]string, cluster, host string) bool {
	if l[LabelManaged] != "true" || l[LabelCluster] != cluster {
		return false
	}
	h, labelled := l[LabelHost]
	return !labelled || (h != "" && h == host)
}
