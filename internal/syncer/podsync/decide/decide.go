package decide

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/syncer/podsync/deletes"
	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
	"github.com/leafsync/leafsync/internal/syncer/podsync/translate"
)

// ActionType is one step of a plan.
type ActionType string

// actions a plan may hold, carried out in order by the Controller.
const (
	// AddFinalizer puts FinalizerMemberPod on the host pod.
	AddFinalizer ActionType = "AddFinalizer"
	// RemoveFinalizer takes it off (the host pod is not being deleted).
	RemoveFinalizer ActionType = "RemoveFinalizer"
	// CreateMember creates the namespace, the ConfigMaps and Secrets the
	// pod uses, and the member pod; then records the member pod's UID on
	// the host pod.
	CreateMember ActionType = "CreateMember"
	// SetMemberUID records MemberUID on the host pod (AnnotationMemberUID).
	SetMemberUID ActionType = "SetMemberUID"
	// SyncStatus mirrors the member pod's status to the host pod.
	SyncStatus ActionType = "SyncStatus"
	// FailHost marks the host pod Failed (its member pod is gone).
	FailHost ActionType = "FailHost"
	// FinishHost removes the finalizer and deletes the host pod with grace
	// 0. With Persist, only once the Keeper has written every change.
	FinishHost ActionType = "FinishHost"
	// DeleteMember deletes the member pod (UID precondition) with Grace.
	DeleteMember ActionType = "DeleteMember"
	// Record adds or replaces (by HostUID) a pending delete.
	Record ActionType = "Record"
	// DropRecord removes the pending delete of HostUID.
	DropRecord ActionType = "DropRecord"
	// Adopt relabels the member pod (MemberUID) for the current host pod.
	Adopt ActionType = "Adopt"
	// MarkRetained annotates the member pod as an orphan kept by Retain.
	MarkRetained ActionType = "MarkRetained"
	// Event records an Event (on the host pod, or the leaf when there is
	// no host pod).
	Event ActionType = "Event"
	// MarkEvictionRefused notes on the host pod (AnnotationEvictionRefused
	// = Reason) that the taint manager's eviction was refused.
	MarkEvictionRefused ActionType = "MarkEvictionRefused"
	// EvictHost evicts the host pod as the taint manager does: the
	// DisruptionTarget condition, then a DELETE (UID precondition).
	EvictHost ActionType = "EvictHost"
	// ResizeMember writes the host pod's container resources to the member
	// pod through its resize subresource (decide/resize.go).
	ResizeMember ActionType = "ResizeMember"
	// UpdateEphemeral adds the host pod's ephemeral containers to the
	// member pod through its ephemeralcontainers subresource
	// (decide/ephemeral.go).
	UpdateEphemeral ActionType = "UpdateEphemeral"
	// UpdateMember writes what changed on the host pod after creation
	// (labels, annotations, the mutable spec fields) to the member pod,
	// with AnnotationHostGeneration (decide/update.go). It comes after
	// ResizeMember and UpdateEphemeral, so that the generation it records
	// is only claimed once every part of the spec was sent (a part the
	// member refused is an Event, not a hold: a kubelet too observes a
	// generation whose resize is infeasible).
	UpdateMember ActionType = "UpdateMember"
)

// Action is one step of a plan.
type Action struct {
	Type ActionType
	// Reason (CamelCase) and Message explain the step (Events, logs).
	Reason  string
	Message string
	// Warning makes an Event a Warning.
	Warning bool
	// MemberUID is the member pod a step is about (precondition).
	MemberUID types.UID
	// Grace is DeleteMember's grace period (nil: the pod's own).
	Grace *int64
	// Record is Record's pending delete.
	Record deletes.PendingDelete
	// HostUID is DropRecord's key; on DeleteMember, the host pod UID the
	// member pod must still carry (label leafsync.io/host-uid) when it is
	// deleted: a pod adopted meanwhile for a new host pod is not.
	HostUID string
	// Persist makes FinishHost wait until the Keeper has written.
	Persist bool
	// Outcome is what the step does with a host deletion of Cause (the
	// DisruptionTarget reason), for leafsync_pod_deletes_total; "" for
	// none.
	Outcome Outcome
	Cause   string
	// ForUserTaint, on MarkEvictionRefused: the refused eviction was for a
	// user's NoExecute taint, which leafsync carries out itself; nothing
	// is wrong, so it is not counted as a refused eviction.
	ForUserTaint bool
	// ConfirmGone, on FailHost and FinishHost, is a member pod the member
	// cache no longer shows: the step only happens once a live read
	// confirms it is gone (the cache may simply not have seen it yet).
	ConfirmGone types.UID
	// ConfirmNoPodFor, on DropRecord with reason MemberPodGone, is the host
	// UID whose member pod the cache no longer shows: the record is only
	// dropped once a live read confirms no member pod of this name stands
	// for it (a cache that has not relisted since the member came back may
	// simply not show it).
	ConfirmNoPodFor string
	// Ephemeral, on UpdateEphemeral: the ephemeral containers to add to
	// the member pod (translated; names it lacks).
	Ephemeral []corev1.EphemeralContainer
	// Update, on UpdateMember, is what the member pod gets; the write is
	// conditional on MemberUID and MemberResourceVersion (the pod decide
	// saw).
	Update                *translate.Update
	MemberResourceVersion string
}

// Outcome is what pod sync did with a host deletion.
type Outcome string

// Outcomes of a host deletion (label outcome of leafsync_pod_deletes_total).
const (
	outcomeForwarded Outcome = "forwarded"
	outcomeOwed      Outcome = "owed"
	outcomeDeferred  Outcome = "stale_deferred"
	outcomeRetained  Outcome = "stale_retained"
	outcomeReaped    Outcome = "reaped"
	outcomeAdopted   Outcome = "adopted"
)

// recordOutcome is the outcome of recording a host deletion as r.
func recordOutcome(r deletes.PendingDelete) Outcome {
	switch r.Kind {
	case deletes.Owed:
		return outcomeOwed
	case deletes.Deferred:
		return outcomeDeferred
	case deletes.Retained:
		return outcomeRetained
	}
	return ""
}

// Plan is what decide wants done for one pod name.
type Plan struct {
	Actions []Action
	// RequeueAfter says when to look again (0: only on change).
	RequeueAfter time.Duration
}

func (p *Plan) add(a ...Action) { p.Actions = append(p.Actions, a...) }

func (p *Plan) requeue(d time.Duration) {
	if d <= 0 {
		d = time.Millisecond
	}
	if p.RequeueAfter == 0 || d < p.RequeueAfter {
		p.RequeueAfter = d
	}
}

// Input is everything decide looks at for one namespace/name in one member.
type Input struct {
	// Now is leafsync's clock: compared only with leafsync's own times
	// (State, Records).
	Now time.Time
	// HostNow is the host API server's time now (hostclock): compared only
	// with times in host objects (deletionTimestamp, conditions, taints).
	HostNow time.Time
	// Cluster is the member's name.
	Cluster string
	// HostIdentity is the host's identity (LabelHost on what leafsync
	// creates in members).
	HostIdentity string
	// State is the member's hysteresis status.
	State hysteresis.Status
	// Policy is the member's stale-eviction policy.
	Policy podmeta.Policy
	// MaxDeferral bounds DeferUntilReplaced; ReapAfter is how long a host
	// pod may stay Terminating on a leaf confirmed down.
	MaxDeferral, ReapAfter time.Duration
	// Host is the host pod of this name bound to the member's leaf (nil:
	// none). Member is the member pod of this name (nil: none).
	Host, Member *corev1.Pod
	// DesiredHash is translate.HostSpecHash(Host).
	DesiredHash string
	// Records are the pending deletes of this namespace/name.
	Records []deletes.PendingDelete
	// Replacements are the host pods that may replace a deferred delete
	// of Records, or one decide defers now (nil: not known yet, or the
	// member is not Ready). decide chooses the replacement.
	Replacements *Replacements
	// LeafTaints are the leaf Node's taints now: a taint-manager delete
	// whose NoExecute taint still holds is not stale.
	LeafTaints []corev1.Taint
	// Admission is what the member's owner agreed to run.
	Admission podmeta.Admission
	// OtherCopies are leafsync's copies of this name in other members not
	// confirmed down, made for other host pods (looked up, for a host pod
	// with a stable identity about to be created, in their caches and by a
	// live read; identity.go).
	OtherCopies []OtherCopy
	// IdentityMoved maps the host UIDs of Records to the node (not this
	// leaf) that a new live host pod of their name is bound to.
	IdentityMoved map[string]string
}

// Replacements are the host pods of a namespace and how they are bound to
// pending deletes: one host pod replaces one deleted pod, in every member.
type Replacements struct {
	// Pods are the host pods of the namespace (on any node).
	Pods []*corev1.Pod
	// Assigned maps a replacement's UID to the host UID of the pending
	// delete it is bound to.
	Assigned map[string]string
	// Pending holds the host UIDs of every pending delete: a deleted pod
	// is never a replacement.
	Pending map[string]bool
}

// replacementOf binds a deferred delete to its replacement, chosen now
// (chooseReplacement), and says whether that replacement is Ready. A
// StatefulSet's replacement is its name's next pod, never bound. Without
// Replacements r is returned as it is, not replaced.
func (in Input) replacementOf(r deletes.PendingDelete) (deletes.PendingDelete, bool) {
	rs := in.Replacements
	if rs == nil {
		return r, false
	}
	taken := map[string]bool{}
	for uid, holder := range rs.Assigned {
		if holder != r.HostUID {
			taken[uid] = true
		}
	}
	uid, ready := chooseReplacement(r, taken, rs.Pending, rs.Pods)
	if kind, _ := podmeta.SplitOwner(r.Owner); kind != "StatefulSet" {
		r.Replacement = uid
	}
	return r, uid != "" && ready
}

// deferRecord is the Record of a deferred delete, bound to its replacement.
func (in Input) deferRecord(r deletes.PendingDelete) Action {
	r, _ = in.replacementOf(r)
	return Action{Type: Record, Record: r}
}

// lifecycleTaints are the NoExecute taints node lifecycle sets on a node
// it cannot hear from; on a leaf they pass when the member is back.
var lifecycleTaints = map[string]bool{corev1.TaintNodeUnreachable: true, corev1.TaintNodeNotReady: true}

// staleEviction reports whether the delete of a host pod is an eviction
// whose cause has passed: its DisruptionTarget reason is an eviction cause,
// and, for the taint manager, no NoExecute taint other than node
// lifecycle's (a user's maintenance taint, node.kubernetes.io/out-of-service)
// that the pod does not tolerate is on the leaf now.
func staleEviction(hp *corev1.Pod, cause string, leafTaints []corev1.Taint) bool {
	if !podmeta.IsEvictionCause(cause) {
		return false
	}
	if cause != podmeta.CauseTaintManager {
		return true
	}
	for i := range leafTaints {
		t := &leafTaints[i]
		if t.Effect == corev1.TaintEffectNoExecute && !lifecycleTaints[t.Key] && !tolerates(hp, t) {
			return false
		}
	}
	return true
}

func tolerates(hp *corev1.Pod, t *corev1.Taint) bool {
	for i := range hp.Spec.Tolerations {
		if hp.Spec.Tolerations[i].ToleratesTaint(klog.Background(), t, false) {
			return true
		}
	}
	return false
}

// runsOnce: pods of a Job are never kept after a stale eviction. The Job
// controller made their replacement when the host pod went; keeping the old
// one would run the work twice, then kill it mid-run.
func runsOnce(owner string) bool {
	kind, _ := podmeta.SplitOwner(owner)
	return kind == "Job"
}

// Polling periods of decide.
const (
	// waitShort: a member pod is terminating, or the member is Suspect.
	waitShort = time.Second
	// replacementPoll: how often a deferred delete checks its replacement.
	replacementPoll = 2 * time.Second
	// conflictRetry: a member pod of that name is not leafsync's.
	conflictRetry = 30 * time.Second
)

// relation of the member pod to the host pod.
type relation int

const (
	relNone    relation = iota // no member pod
	relForeign                 // a member pod leafsync did not create
	relSame                    // leafsync's, for this host pod
	relOther                   // leafsync's, for another host pod of this name
)

func relate(in Input) relation {
	mp := in.Member
	switch {
	case mp == nil:
		return relNone
	case !podmeta.Ours(mp, in.Cluster, in.HostIdentity):
		return relForeign
	case in.Host != nil && mp.Labels[podmeta.LabelHostUID] == string(in.Host.UID):
		return relSame
	case in.Host != nil && in.Host.Annotations[podmeta.AnnotationMemberUID] == string(mp.UID):
		// Adopted: the host pod recorded this member pod's UID after
		// relabelling it; the cache has not seen the new label yet.
		return relSame
	default:
		return relOther
	}
}

func recordFor(rs []deletes.PendingDelete, hostUID string) *deletes.PendingDelete {
	for i := range rs {
		if rs[i].HostUID == hostUID {
			return &rs[i]
		}
	}
	return nil
}

// terminatingSince is when a host pod began terminating.
func terminatingSince(hp *corev1.Pod) time.Time {
	t := hp.DeletionTimestamp.Time
	if g := hp.DeletionGracePeriodSeconds; g != nil {
		t = t.Add(-time.Duration(*g) * time.Second)
	}
	return t
}

// reapWait is how long until a Terminating host pod on a leaf confirmed
// down is finished (≤ 0: now): reapAfter after it began terminating and
// after the outage was confirmed, whichever is later. Each on its own
// clock: the termination on the host's (hostNow), the outage on
// leafsync's (now).
func reapWait(hp *corev1.Pod, st hysteresis.Status, reapAfter time.Duration, now, hostNow time.Time) time.Duration {
	down := st.OutageSince
	if down.IsZero() {
		down = st.Since
	}
	return max(terminatingSince(hp).Add(reapAfter).Sub(hostNow), down.Add(reapAfter).Sub(now))
}

// Decide is the pure decision of pod sync for one namespace/name in one
// member: given the host pod, the member pod, the member's state and the
// pending deletes, what to do next. It is level-based: run again after
// the plan is carried out, it goes on from where things are.
func Decide(in Input) Plan {
	var p Plan
	hostUID := ""
	if in.Host != nil {
		hostUID = string(in.Host.UID)
	}
	for _, r := range in.Records {
		if r.HostUID != hostUID {
			decideRecord(in, r, &p)
		}
	}
	switch {
	case in.Host == nil:
		decideOrphan(in, &p)
	case in.Host.DeletionTimestamp != nil:
		decideTerminating(in, &p)
	default:
		decideLive(in, &p)
	}
	return p
}

func (in Input) del(mp *corev1.Pod, grace *int64, reason, msg string) Action {
	return Action{Type: DeleteMember, MemberUID: mp.UID, HostUID: mp.Labels[podmeta.LabelHostUID], Grace: grace, Reason: reason, Message: msg}
}

// decideRecord handles a pending delete whose host pod is gone (or was
// replaced by a new pod of the same name).
func decideRecord(in Input, r deletes.PendingDelete, p *Plan) {
	if in.State.State != hysteresis.Ready {
		return // owed and deferred deletes wait for a Ready member; a state change looks again
	}
	mp := in.Member
	if mp == nil || !podmeta.Ours(mp, in.Cluster, in.HostIdentity) || mp.Labels[podmeta.LabelHostUID] != r.HostUID {
		p.add(dropGone(r))
		return
	}
	if mp.DeletionTimestamp != nil {
		p.requeue(waitShort)
		return
	}
	if in.Host != nil {
		return // a new host pod wants this name: decideLive adopts or deletes
	}
	if !podmeta.IsEvictionCause(r.Cause) {
		p.add(in.del(mp, r.GracePeriodSeconds, "OwedDeleteForwarded",
			fmt.Sprintf("forwarding the delete (cause %q) the member missed while unreachable", causeText(r.Cause))))
		p.requeue(waitShort)
		return
	}
	switch {
	case runsOnce(r.Owner):
		p.add(in.del(mp, r.GracePeriodSeconds, "StaleEvictionForwarded",
			fmt.Sprintf("stale eviction (%s) of a pod of %s forwarded: its replacement already runs, keeping this one would run the work twice", r.Cause, r.Owner)))
		p.requeue(waitShort)
		return
	case in.Policy == podmeta.Forward:
		p.add(in.del(mp, r.GracePeriodSeconds, "StaleEvictionForwarded",
			fmt.Sprintf("stale eviction (%s) forwarded: policy Forward", r.Cause)))
		p.requeue(waitShort)
		return
	case in.Policy != podmeta.Retain && movedAway(in, r, mp):
		deleteOldCopy(in, r, mp, p)
		return
	case in.Policy == podmeta.Retain:
		if r.Kind != deletes.Retained {
			rr := r
			rr.Kind, rr.Since = deletes.Retained, in.Now
			p.add(Action{Type: Record, Record: rr},
				Action{Type: MarkRetained, MemberUID: mp.UID},
				Action{Type: Event, Warning: true, Reason: "StaleEvictionRetained",
					Message: fmt.Sprintf("member pod %s/%s kept as an orphan: stale eviction (%s), policy Retain", r.Namespace, r.Name, r.Cause)})
		}
		return
	}
	// DeferUntilReplaced.
	if r.Kind != deletes.Deferred {
		rr := r
		rr.Kind, rr.Since = deletes.Deferred, in.Now
		p.add(in.deferRecord(rr),
			Action{Type: Event, Reason: "StaleEvictionDeferred",
				Message: fmt.Sprintf("member pod %s/%s kept until its replacement is Ready (at most %s): stale eviction (%s)", r.Namespace, r.Name, in.MaxDeferral, r.Cause)})
		p.requeue(min(replacementPoll, in.MaxDeferral))
		return
	}
	rr, replaced := in.replacementOf(r)
	if rr.Replacement != r.Replacement {
		p.add(Action{Type: Record, Record: rr, Reason: "ReplacementAssigned"})
	}
	if replaced {
		p.add(in.del(mp, r.GracePeriodSeconds, "DeferredDeleteReplaced",
			fmt.Sprintf("the replacement of %s/%s is Ready in the host", r.Namespace, r.Name)))
		p.requeue(waitShort)
		return
	}
	deadline := r.Since.Add(in.MaxDeferral)
	if !in.Now.Before(deadline) {
		p.add(in.del(mp, r.GracePeriodSeconds, "DeferredDeleteExpired",
			fmt.Sprintf("no Ready replacement of %s/%s within maxDeferral %s", r.Namespace, r.Name, in.MaxDeferral)))
		p.requeue(waitShort)
		return
	}
	p.requeue(min(replacementPoll, deadline.Sub(in.Now)))
}

// dropGone drops a record whose member pod the cache no longer shows,
// once a live read agrees.
func dropGone(r deletes.PendingDelete) Action {
	return Action{Type: DropRecord, HostUID: r.HostUID, Reason: "MemberPodGone", ConfirmNoPodFor: r.HostUID}
}

func causeText(c string) string {
	if c == podmeta.CauseNone {
		return "DELETE"
	}
	return c
}

// decideOrphan: no host pod of this name on the leaf. A member pod of
// leafsync's without a pending delete is an orphan (state lost, finalizer
// removed by hand); it is handled like a stale eviction.
func decideOrphan(in Input, p *Plan) {
	mp := in.Member
	if mp == nil || !podmeta.Ours(mp, in.Cluster, in.HostIdentity) || mp.DeletionTimestamp != nil || in.State.State != hysteresis.Ready {
		return
	}
	uid := mp.Labels[podmeta.LabelHostUID]
	if recordFor(in.Records, uid) != nil {
		return
	}
	r := deletes.PendingDelete{
		Kind: deletes.Deferred, Namespace: mp.Namespace, Name: mp.Name, HostUID: uid,
		Cause: podmeta.CauseOrphan, Owner: mp.Annotations[podmeta.AnnotationOwner], Since: in.Now,
	}
	switch in.Policy {
	case podmeta.Forward:
		p.add(in.del(mp, nil, "OrphanDeleted", "member pod has no host pod: policy Forward"))
		p.requeue(waitShort)
		return
	case podmeta.Retain:
		r.Kind = deletes.Retained
		p.add(Action{Type: Record, Record: r}, Action{Type: MarkRetained, MemberUID: mp.UID})
	default:
		p.add(in.deferRecord(r))
		p.requeue(min(replacementPoll, in.MaxDeferral))
	}
	p.add(Action{Type: Event, Warning: true, Reason: "OrphanMemberPod",
		Message: fmt.Sprintf("member pod %s/%s has no host pod and no record; handled as a stale eviction (%s)", mp.Namespace, mp.Name, r.Kind)})
}

// notRun says why leafsync will not run a host pod in the member ("" if
// it will). Pods of DaemonSets: a tolerate-all DaemonSet (CNI agent,
// kube-proxy, log shipper) lands on every leaf, and its pods are made for
// the host's own nodes (hostNetwork, privileged, the host's Secrets).
// Nor pods the member's owner has not agreed to (Admission).
func notRun(in Input) (reason, msg string) {
	hp := in.Host
	if ref := metav1.GetControllerOf(hp); ref != nil && ref.Kind == "DaemonSet" {
		return "NotSyncedDaemonSetPod", fmt.Sprintf("pods of DaemonSets are not run in member clusters: DaemonSet %s places one on every node, leaves included; give it a nodeAffinity that excludes type=virtual-kubelet", ref.Name)
	}
	return notAdmitted(in.Admission, hp, in.Cluster)
}

// decideNotRun: a host pod leafsync will not run. A member pod made for it
// before (an older leafsync) is deleted, and leafsync's finalizer released.
func decideNotRun(in Input, rel relation, reason, msg string, p *Plan) {
	warn := Action{Type: Event, Warning: true, Reason: reason, Message: msg}
	if rel == relSame {
		if in.State.State != hysteresis.Ready {
			p.add(warn)
			p.requeue(waitShort)
			return
		}
		if in.Member.DeletionTimestamp == nil {
			p.add(in.del(in.Member, nil, reason, msg))
		}
	}
	if podmeta.HasFinalizer(in.Host) {
		p.add(Action{Type: RemoveFinalizer, Reason: reason})
	}
	p.add(warn)
}

// decideLive: the host pod exists and is not being deleted.
func decideLive(in Input, p *Plan) {
	hp, mp := in.Host, in.Member
	rel := relate(in)
	st := in.State.State
	if podmeta.IsTerminal(hp) {
		switch {
		case rel == relSame && st.LeafReady():
			p.add(Action{Type: SyncStatus})
		case rel != relSame && podmeta.HasFinalizer(hp) && st == hysteresis.Ready:
			p.add(Action{Type: RemoveFinalizer, Reason: "NoMemberPod"})
		}
		return
	}
	decideEvictions(in, p)
	if !st.LeafReady() {
		return // member confirmed down: nothing to write; a state change looks again
	}
	if reason, msg := notRun(in); reason != "" {
		decideNotRun(in, rel, reason, msg, p)
		return
	}
	switch rel {
	case relNone:
		if hp.Annotations[podmeta.AnnotationMemberUID] != "" {
			if st != hysteresis.Ready {
				p.requeue(waitShort)
				return
			}
			msg := fmt.Sprintf("the pod was deleted or evicted in member cluster %s", in.Cluster)
			gone := types.UID(hp.Annotations[podmeta.AnnotationMemberUID])
			p.add(Action{Type: FailHost, Reason: "MemberPodDeleted", Message: msg, ConfirmGone: gone})
			if podmeta.HasFinalizer(hp) {
				p.add(Action{Type: RemoveFinalizer, Reason: "MemberPodDeleted"})
			}
			p.add(Action{Type: Event, Warning: true, Reason: "MemberPodDeleted", Message: msg})
			return
		}
		if copyHeldElsewhere(in, p) {
			return
		}
		if !podmeta.HasFinalizer(hp) {
			p.add(Action{Type: AddFinalizer})
		}
		p.add(Action{Type: CreateMember})
	case relForeign:
		p.add(Action{Type: Event, Warning: true, Reason: "MemberPodConflict",
			Message: fmt.Sprintf("member cluster %s has a pod %s/%s that leafsync did not create; not touching it", in.Cluster, hp.Namespace, hp.Name)})
		p.requeue(conflictRetry)
	case relSame:
		if !podmeta.HasFinalizer(hp) && mp.DeletionTimestamp == nil {
			p.add(Action{Type: AddFinalizer})
		}
		if hp.Annotations[podmeta.AnnotationMemberUID] != string(mp.UID) {
			p.add(Action{Type: SetMemberUID, MemberUID: mp.UID})
		}
		if mp.DeletionTimestamp == nil && !podmeta.IsTerminal(mp) {
			// a running member pod follows the host pod's changes; nothing
			// written to one that finished or is going would run
			decideResize(in, p)
			decideEphemeral(in, p)
			decideUpdate(in, p)
		}
		p.add(Action{Type: SyncStatus})
	case relOther:
		decideOtherIncarnation(in, p)
	}
}

// decideOtherIncarnation: a new host pod wants a name whose member pod
// belongs to a previous host pod (a recreated StatefulSet pod).
func decideOtherIncarnation(in Input, p *Plan) {
	hp, mp := in.Host, in.Member
	if mp.DeletionTimestamp != nil || in.State.State != hysteresis.Ready {
		p.requeue(waitShort)
		return
	}
	r := recordFor(in.Records, mp.Labels[podmeta.LabelHostUID])
	stale := r == nil || podmeta.IsEvictionCause(r.Cause)
	compatible := mp.Annotations[podmeta.AnnotationSpecHash] == in.DesiredHash && !podmeta.IsTerminal(mp)
	if stale && compatible && in.Policy != podmeta.Forward {
		if !podmeta.HasFinalizer(hp) {
			p.add(Action{Type: AddFinalizer})
		}
		p.add(Action{Type: Adopt, MemberUID: mp.UID, Outcome: outcomeAdopted, Cause: adoptedCause(in, r)})
		if r != nil {
			p.add(Action{Type: DropRecord, HostUID: r.HostUID, Reason: "Adopted"})
		}
		p.add(Action{Type: SetMemberUID, MemberUID: mp.UID},
			Action{Type: Event, Reason: "MemberPodAdopted",
				Message: fmt.Sprintf("adopted the member pod still running in %s (uid %s) instead of restarting it", in.Cluster, mp.UID)})
		return
	}
	if r != nil && r.Kind == deletes.Retained && in.Policy == podmeta.Retain {
		p.add(Action{Type: Event, Warning: true, Reason: "MemberPodConflict",
			Message: fmt.Sprintf("member pod %s/%s is retained (policy Retain) and cannot be adopted (spec changed); delete it in %s to let this pod start", hp.Namespace, hp.Name, in.Cluster)})
		p.requeue(conflictRetry)
		return
	}
	var grace *int64
	why := "its spec differs from the new host pod's"
	switch {
	case r != nil && !podmeta.IsEvictionCause(r.Cause):
		grace, why = r.GracePeriodSeconds, fmt.Sprintf("its host pod was deleted (%s)", causeText(r.Cause))
	case in.Policy == podmeta.Forward:
		why = "policy Forward never adopts"
	case podmeta.IsTerminal(mp):
		why = "it has finished"
	}
	p.add(in.del(mp, grace, "MemberPodReplaced",
		fmt.Sprintf("deleting the member pod of the previous %s/%s: %s", hp.Namespace, hp.Name, why)))
	p.requeue(waitShort)
}

// adoptedCause is the cause of the deletion an adoption resolves: the
// record of the member pod's host pod, or else the name's first record.
func adoptedCause(in Input, r *deletes.PendingDelete) string {
	switch {
	case r != nil:
		return r.Cause
	case len(in.Records) > 0:
		return in.Records[0].Cause
	}
	return podmeta.CauseNone
}

// forward is the delete of a terminating host pod's member pod, counted
// as forwarded.
func (in Input) forward(mp *corev1.Pod, cause, reason, msg string) Action {
	a := in.del(mp, in.Host.DeletionGracePeriodSeconds, reason, msg)
	a.Outcome, a.Cause = outcomeForwarded, cause
	return a
}

// decideTerminating: the host pod is being deleted.
func decideTerminating(in Input, p *Plan) {
	hp, mp := in.Host, in.Member
	rel := relate(in)
	st := in.State.State
	cause := podmeta.CauseOf(hp)
	stale := staleEviction(hp, cause, in.LeafTaints)
	r := recordFor(in.Records, string(hp.UID))
	down := st == hysteresis.NotReady || st == hysteresis.Recovering
	// Does a member pod of this host pod exist, or may it (the cache is
	// not trusted while the member is not Ready)?
	downstream := rel == relSame || (rel == relNone && hp.Annotations[podmeta.AnnotationMemberUID] != "" && st != hysteresis.Ready)
	if !downstream {
		finish := Action{Type: FinishHost, Reason: "MemberPodGone"}
		if rel == relNone {
			finish.ConfirmGone = types.UID(hp.Annotations[podmeta.AnnotationMemberUID])
		}
		p.add(finish)
		if r != nil {
			// After the finish: a record kept because the member cannot
			// confirm must not hold the host pod.
			p.add(dropGone(*r))
		}
		return
	}
	if down {
		if r == nil {
			p.add(Action{Type: Record, Outcome: outcomeOwed, Cause: cause, Record: deletes.PendingDelete{
				Kind: deletes.Owed, Namespace: hp.Namespace, Name: hp.Name, HostUID: string(hp.UID),
				Cause: cause, Owner: podmeta.OwnerOf(hp), Since: in.Now, HostDeletedAt: terminatingSince(hp),
				GracePeriodSeconds: hp.DeletionGracePeriodSeconds,
			}}, Action{Type: Event, Reason: "DeleteOwed",
				Message: fmt.Sprintf("member cluster %s is down: the delete (%s) is recorded and will be handled when it is back", in.Cluster, causeText(cause))})
		}
		reap := reapWait(hp, in.State, in.ReapAfter, in.Now, in.HostNow)
		if reap <= 0 {
			p.add(Action{Type: FinishHost, Persist: true, Reason: "Reaped", Outcome: outcomeReaped, Cause: cause},
				Action{Type: Event, Warning: true, Reason: "PodReaped",
					Message: fmt.Sprintf("finished in the host after %s Terminating on a leaf whose member is down; the member pod's delete is owed", in.ReapAfter)})
		} else {
			p.requeue(reap)
		}
		return
	}
	if rel == relNone || mp.DeletionTimestamp != nil {
		p.requeue(waitShort) // Suspect with an untrusted cache, or the member pod is going
		return
	}
	if st == hysteresis.Suspect {
		if !stale {
			p.add(in.forward(mp, cause, "DeleteForwarded", fmt.Sprintf("forwarding the host's delete (%s)", causeText(cause))))
		}
		p.requeue(waitShort) // an eviction waits until the member is confirmed Ready or down
		return
	}
	// The member is Ready.
	if !stale {
		why := causeText(cause)
		if podmeta.IsEvictionCause(cause) {
			why += ", its NoExecute taint still on the leaf"
		}
		p.add(in.forward(mp, cause, "DeleteForwarded", fmt.Sprintf("forwarding the host's delete (%s)", why)))
		p.requeue(waitShort)
		return
	}
	if owner := podmeta.OwnerOf(hp); runsOnce(owner) {
		p.add(in.forward(mp, cause, "StaleEvictionForwarded",
			fmt.Sprintf("stale eviction (%s) of a pod of %s forwarded: its replacement already runs, keeping this one would run the work twice", cause, owner)))
		p.requeue(waitShort)
		return
	}
	if in.Policy == podmeta.Forward {
		p.add(in.forward(mp, cause, "StaleEvictionForwarded", fmt.Sprintf("stale eviction (%s) forwarded: policy Forward", cause)))
		p.requeue(waitShort)
		return
	}
	rec := deletes.PendingDelete{
		Kind: deletes.Deferred, Namespace: hp.Namespace, Name: hp.Name, HostUID: string(hp.UID),
		Cause: cause, Owner: podmeta.OwnerOf(hp), Since: in.Now, HostDeletedAt: terminatingSince(hp),
		GracePeriodSeconds: hp.DeletionGracePeriodSeconds,
	}
	reason, msg := "StaleEvictionDeferred", fmt.Sprintf("member cluster %s is Ready: the eviction (%s) is stale; the member pod is kept until the replacement is Ready (at most %s)", in.Cluster, cause, in.MaxDeferral)
	if in.Policy == podmeta.Retain {
		rec.Kind = deletes.Retained
		reason, msg = "StaleEvictionRetained", fmt.Sprintf("member cluster %s is Ready: the eviction (%s) is stale; the member pod is kept as an orphan (policy Retain)", in.Cluster, cause)
	}
	if r == nil || r.Kind != rec.Kind {
		write := Action{Type: Record, Record: rec}
		if rec.Kind == deletes.Deferred {
			write = in.deferRecord(rec)
		}
		write.Outcome, write.Cause = recordOutcome(rec), cause
		p.add(write, Action{Type: Event, Reason: reason, Message: msg})
		if rec.Kind == deletes.Retained {
			p.add(Action{Type: MarkRetained, MemberUID: mp.UID})
		}
	}
	p.add(Action{Type: FinishHost, Persist: true, Reason: reason})
}
