package podsync

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

	// annotationLeaf names the leaf node the host pod was bound to.
	annotationLeaf = "leafsync.io/leaf"
	// annotationSpecHash is the hash of the member pod spec leafsync built;
	// a recreated host pod with the same hash may adopt the member pod.
	annotationSpecHash = "leafsync.io/spec-hash"
	// annotationOwner is the host pod's controller, "Kind/name".
	annotationOwner = "leafsync.io/owner"
	// annotationOrphaned is set on a member pod kept by the Retain policy
	// after its host pod went (the time it was retained, RFC 3339).
	annotationOrphaned = "leafsync.io/orphaned"

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
	causeNone         = ""
	causeEvictionAPI  = "EvictionByEvictionAPI"
	causePreemption   = "PreemptionByScheduler"
	CauseTaintManager = "DeletionByTaintManager"
	causePodGC        = "DeletionByPodGC"
	// causeOrphan: leafsync found one of its member pods with no host pod
	// and no record of why (state lost, finalizer removed by hand); it is
	// handled like a stale eviction.
	causeOrphan = "Orphan"
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
			if isEvictionCause(c.Reason) && leftOverCondition(p, c) {
				return causeNone
			}
			return c.Reason
		}
	}
	return causeNone
}

// isEvictionCause reports whether a cause is an eviction the node's state
// brought about (taint manager, pod GC, or an orphan), which may be stale
// by the time leafsync acts. Every other cause (none, Eviction API,
// preemption, kubelet, unknown reasons) is someone's decision about the
// pod itself, and is forwarded.
func isEvictionCause(cause string) bool {
	return cause == CauseTaintManager || cause == causePodGC || cause == causeOrphan
}

func hasFinalizer(p *corev1.Pod) bool {
	for _, f := range p.Finalizers {
		if f == FinalizerMemberPod {
			return true
		}
	}
	return false
}

// ownerOf returns a pod's controller as "Kind/name" ("" if none).
func ownerOf(p *corev1.Pod) string {
	for _, r := range p.OwnerReferences {
		if r.Controller != nil && *r.Controller {
			return r.Kind + "/" + r.Name
		}
	}
	return ""
}

func splitOwner(owner string) (kind, name string) {
	kind, name, ok := strings.Cut(owner, "/")
	if !ok {
		return "", ""
	}
	return kind, name
}

func isTerminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

func isReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
