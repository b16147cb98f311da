package decide

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/leafsync/leafsync/internal/syncer/podsync/deletes"
	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
)

// A pod with a stable identity — a StatefulSet's, or one that sets
// spec.hostname or spec.subdomain — is one identity (its name, its DNS
// name, its volumes), and at most one copy of it runs across the members
// leafsync serves:
//
//   - a host pod of that name is not created in its member while another
//     member that is not confirmed down holds leafsync's copy of the name
//     for another host pod (input.OtherCopies, from that member's cache and
//     a live read): the creation waits, with an Event saying for what;
//   - that old copy, kept by a stale eviction under DeferUntilReplaced, is
//     deleted as soon as the name's new host pod is bound to another node
//     (input.IdentityMoved), not once that pod is Ready: the replacement
//     waits for the old copy, never the reverse.
//
// A member confirmed down (NotReady, Recovering) holds nothing up: fail-over
// must not wait for a member that may never return. Its copy is deleted
// when it is Ready again; meanwhile two copies may run, one of them
// unreachable. A replacement on an ordinary host node is not leafsync's to
// hold: the old copy is deleted at once, and they may overlap for as long
// as that delete takes. Pods of other owners (Deployments, Jobs) keep the
// stale-eviction policy as it is.

// StableIdentity reports whether a pod of this owner ("Kind/name") and
// spec has an identity of its own.
func StableIdentity(owner string, spec *corev1.PodSpec) bool {
	kind, _ := podmeta.SplitOwner(owner)
	return kind == "StatefulSet" || spec.Hostname != "" || spec.Subdomain != ""
}

// OtherCopy is leafsync's copy of a pod name in another member, made for
// another host pod, or a member that could not be read to rule one out.
type OtherCopy struct {
	// Cluster is the member.
	Cluster string
	// HostUID is the host pod the copy was made for ("" with Err).
	HostUID string
	// Err: the member could not be read (it may hold a copy).
	Err string
}

// copyHeldElsewhere holds the creation of a host pod with a stable
// identity while another member holds a copy of its name. It reports
// whether it did.
func copyHeldElsewhere(in Input, p *Plan) bool {
	hp := in.Host
	if len(in.OtherCopies) == 0 || !StableIdentity(podmeta.OwnerOf(hp), &hp.Spec) {
		return false
	}
	o := in.OtherCopies[0]
	msg := fmt.Sprintf("waiting for the old copy of %s/%s in member cluster %s (made for host pod %s) to be gone: a pod with a stable identity never runs in two members at once", hp.Namespace, hp.Name, o.Cluster, o.HostUID)
	if o.Err != "" {
		msg = fmt.Sprintf("waiting to confirm that member cluster %s holds no old copy of %s/%s (%s): a pod with a stable identity never runs in two members at once", o.Cluster, hp.Namespace, hp.Name, o.Err)
	}
	p.add(Action{Type: Event, Reason: reasonWaitingForOldCopy, Message: msg})
	p.requeue(replacementPoll)
	return true
}

// reasonWaitingForOldCopy is the Event of a creation held for an old copy
// in another member.
const reasonWaitingForOldCopy = "WaitingForOldCopy"

// movedAway reports whether the record's member pod has a stable identity
// that a new host pod bound to another node now holds.
func movedAway(in Input, r deletes.PendingDelete, mp *corev1.Pod) bool {
	return in.IdentityMoved[r.HostUID] != "" && StableIdentity(r.Owner, &mp.Spec)
}

// deleteOldCopy deletes the old copy of a stable identity at once, without
// waiting for the replacement to be Ready: the replacement waits for it.
func deleteOldCopy(in Input, r deletes.PendingDelete, mp *corev1.Pod, p *Plan) {
	p.add(in.del(mp, r.GracePeriodSeconds, reasonOldCopyDeleted,
		fmt.Sprintf("%s/%s has a new pod on node %s: its old copy here goes first, a pod with a stable identity never runs twice (stale eviction %s)", r.Namespace, r.Name, in.IdentityMoved[r.HostUID], r.Cause)))
	p.requeue(waitShort)
}

// reasonOldCopyDeleted is the reason of the delete of an old copy whose
// identity moved to another node.
const reasonOldCopyDeleted = "OldCopyDeleted"

// MovedTo returns the node a live host pod of the record's name, other than
// the deleted one, is bound to, when that is not leaf ("" otherwise).
func MovedTo(r deletes.PendingDelete, leaf string, pods []*corev1.Pod) string {
	for _, p := range pods {
		if p.Name == r.Name && string(p.UID) != r.HostUID && alive(p) && p.Spec.NodeName != "" && p.Spec.NodeName != leaf {
			return p.Spec.NodeName
		}
	}
	return ""
}
