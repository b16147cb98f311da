package podsync

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/leafsync/leafsync/internal/runner"
	"github.com/leafsync/leafsync/internal/syncer/clusters"
	"github.com/leafsync/leafsync/internal/syncer/member"
	"github.com/leafsync/leafsync/internal/syncer/metrics"
	"github.com/leafsync/leafsync/internal/syncer/podsync/decide"
	"github.com/leafsync/leafsync/internal/syncer/podsync/deletes"
	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
	"github.com/leafsync/leafsync/internal/syncer/podsync/podstatus"
	"github.com/leafsync/leafsync/internal/syncer/podsync/translate"
	"github.com/leafsync/leafsync/internal/syncer/reflector"
)

// execution carries out one plan for one pod name.
type execution struct {
	c    *Controller
	ms   *memberSync
	m    clusters.Member
	leaf string
	node *corev1.Node // the leaf, as the host's Node informer has it
	key  key
	hp   *corev1.Pod // updated as host writes return
	mp   *corev1.Pod

	// wait, set by a step that found the world not yet as the plan
	// assumed (a cache behind, a conflict), stops the plan: the pod is
	// looked at again after wait, which is not a failure.
	wait time.Duration
}

// errWait stops a plan whose step set execution.wait.
var errWait = errors.New("looking again shortly")

// retryIn stops the plan and looks again after d (not a failure).
func (x *execution) retryIn(d time.Duration, why string) error {
	x.wait = d
	x.c.log.V(1).Info("pod sync looks again", "cluster", x.key.Cluster, "pod", x.key.Namespace+"/"+x.key.Name, "after", d, "why", why)
	return errWait
}

// run carries out the plan's actions in order, stopping at the first that
// fails or must wait; the result is the plan's, or the wait's.
func (x *execution) run(ctx context.Context, plan decide.Plan) (runner.Result, error) {
	for _, a := range plan.Actions {
		err := x.do(ctx, a)
		if errors.Is(err, errWait) {
			return runner.Result{RequeueAfter: x.wait}, nil
		}
		if err != nil {
			x.memberWriteFailed(ctx, a, err)
			return runner.Result{}, fmt.Errorf("%s: %w", a.Type, err)
		}
		if a.Outcome != "" && a.Cause != podmeta.CauseOrphan {
			metrics.PodDeletesVec.WithLabelValues(x.key.Cluster, causeLabel(a.Cause), string(a.Outcome)).Inc()
		}
	}
	return runner.Result{RequeueAfter: plan.RequeueAfter}, nil
}

// memberWriteFailures name the Event a failed member write leaves on the
// host pod. The member's answer (its admission refusing the pod, a quota)
// is pod sync's business, retried with backoff; it is never readiness
// evidence.
var memberWriteFailures = map[decide.ActionType]string{
	decide.CreateMember: "MemberCreateFailed",
	decide.DeleteMember: "MemberDeleteFailed",
	decide.Adopt:        "MemberAdoptFailed",
}

func (x *execution) memberWriteFailed(ctx context.Context, a decide.Action, err error) {
	reason, ok := memberWriteFailures[a.Type]
	if !ok || x.hp == nil || ctx.Err() != nil {
		return
	}
	x.event(decide.Action{Type: decide.Event, Warning: true, Reason: reason,
		Message: fmt.Sprintf("member %s: %v (retrying with backoff)", x.key.Cluster, err)})
}

// causeLabel maps a DisruptionTarget reason to a bounded metric label.
// memberRefused: the member's API refused a write as such (its
// validation, admission, quota), which the user must read, not a failure
// the same write would get past on a retry.
func memberRefused(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err)
}

func causeLabel(cause string) string {
	switch cause {
	case podmeta.CauseNone:
		return "user"
	case podmeta.CauseEvictionAPI:
		return "eviction_api"
	case podmeta.CausePreemption:
		return "preemption"
	case podmeta.CauseTaintManager:
		return "taint_manager"
	case podmeta.CausePodGC:
		return "pod_gc"
	}
	return "other"
}

func (x *execution) logAction(a decide.Action, kv ...any) {
	kv = append([]any{"cluster", x.key.Cluster, "pod", x.key.Namespace + "/" + x.key.Name, "action", string(a.Type)}, kv...)
	if a.Reason != "" {
		kv = append(kv, "reason", a.Reason)
	}
	if a.Message != "" {
		kv = append(kv, "message", a.Message)
	}
	x.c.log.Info("pod sync", kv...)
}

func (x *execution) do(ctx context.Context, a decide.Action) error {
	c := x.c
	if a.ConfirmGone != "" {
		if err := x.confirmGone(ctx, a.ConfirmGone); err != nil {
			return err
		}
	}
	if a.ConfirmNoPodFor != "" {
		if err := x.confirmNoPodFor(ctx, a.ConfirmNoPodFor); err != nil {
			return err
		}
	}
	var err error
	switch a.Type {
	case decide.AddFinalizer:
		x.hp, err = c.addFinalizer(ctx, x.hp)
	case decide.RemoveFinalizer:
		x.logAction(a)
		x.hp, err = c.removeFinalizer(ctx, x.hp)
	case decide.CreateMember:
		err = x.createMember(ctx)
	case decide.SetMemberUID:
		x.hp, err = c.setMemberUID(ctx, x.hp, a.MemberUID)
	case decide.SyncStatus:
		err = x.syncStatus(ctx)
	case decide.FailHost:
		x.logAction(a)
		err = x.updateHostStatus(ctx, func(hp *corev1.Pod) corev1.PodStatus {
			return podstatus.Failed(hp, a.Reason, a.Message, c.opts.HostClock.Now())
		})
	case decide.FinishHost:
		x.logAction(a)
		err = x.finishHost(ctx, a.Persist)
	case decide.DeleteMember:
		x.logAction(a, "memberUID", string(a.MemberUID), "grace", a.Grace)
		err = x.deleteMember(ctx, a)
	case decide.Record:
		x.logAction(a, "kind", string(a.Record.Kind), "hostUID", a.Record.HostUID, "cause", a.Record.Cause, "owner", a.Record.Owner)
		err = x.record(a.Record)
	case decide.DropRecord:
		x.logAction(a, "hostUID", a.HostUID)
		c.ledger.dropDelete(x.key.Cluster, x.key.Namespace, x.key.Name, a.HostUID)
	case decide.Adopt:
		x.logAction(a, "memberUID", string(a.MemberUID))
		err = x.adopt(ctx, a.MemberUID)
	case decide.MarkRetained:
		err = x.patchMember(ctx, a.MemberUID, map[string]any{"metadata": map[string]any{
			"annotations": map[string]any{podmeta.AnnotationOrphaned: c.opts.Clock.Now().UTC().Format(time.RFC3339)},
		}})
	case decide.Event:
		x.event(a)
	case decide.MarkEvictionRefused:
		x.hp, err = c.patchHost(ctx, x.hp, types.MergePatchType, map[string]any{"metadata": map[string]any{
			"uid": x.hp.UID, "annotations": map[string]any{podmeta.AnnotationEvictionRefused: a.Reason},
		}})
		if err == nil && !a.ForUserTaint {
			metrics.EvictionsRefusedVec.WithLabelValues(x.key.Cluster).Inc()
		}
	case decide.EvictHost:
		x.logAction(a)
		err = x.evictHost(ctx, a)
	case decide.ResizeMember:
		err = x.resizeMember(ctx, a) // resize.go
	case decide.UpdateEphemeral:
		err = x.updateEphemeral(ctx, a) // ephemeral.go
	case decide.UpdateMember:
		err = x.updateMember(ctx, a) // update.go
	}
	return err
}

// record writes a pending delete. A deferred delete's replacement was
// chosen by decide from a view of the other deletes' bindings; if another
// delete bound that pod meanwhile, the record is written unbound and the
// next look chooses again.
func (x *execution) record(r deletes.PendingDelete) error {
	c := x.c
	c.assignMu.Lock()
	defer c.assignMu.Unlock()
	if r.Replacement != "" {
		if holder, ok := c.assignedReplacements()[r.Replacement]; ok && holder != r.HostUID {
			r.Replacement = ""
		}
	}
	c.ledger.recordDelete(x.key.Cluster, r)
	if r.Kind == deletes.Deferred {
		c.log.V(1).Info("replacement assigned", "cluster", x.key.Cluster, "pod", r.Namespace+"/"+r.Name, "hostUID", r.HostUID, "replacement", r.Replacement)
	}
	return nil
}

// evictHost does what the taint manager does to evict a pod: the
// DisruptionTarget condition, then a DELETE with the pod's own grace. The
// condition is set afresh so that the delete is classified as this
// eviction, not as a later user delete; it is stamped with the host API
// server's time, which that classification compares with the delete's
// deletionTimestamp (leafsync's clock may be off).
func (x *execution) evictHost(ctx context.Context, a decide.Action) error {
	disrupted := func(hp *corev1.Pod) corev1.PodStatus {
		st := hp.Status.DeepCopy()
		podstatus.SetCondition(st, corev1.PodCondition{
			Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: podmeta.CauseTaintManager,
			Message: "leafsync: " + a.Message, LastTransitionTime: metav1.NewTime(x.c.opts.HostClock.Now()),
		})
		return *st
	}
	if err := x.updateHostStatus(ctx, disrupted); err != nil {
		return err
	}
	err := x.c.opts.Host.CoreV1().Pods(x.hp.Namespace).Delete(ctx, x.hp.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &x.hp.UID},
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err == nil {
		metrics.EvictionsCompletedVec.WithLabelValues(x.key.Cluster).Inc()
		x.event(decide.Action{Type: decide.Event, Warning: true, Reason: a.Reason, Message: a.Message})
	}
	return err
}

// confirmGone reads the member pod from the member: a pod with that UID
// still there means the cache is behind (a pod just created), not that it
// was deleted.
func (x *execution) confirmGone(ctx context.Context, uid types.UID) error {
	mp, err := x.memberPodNow(ctx)
	if err == nil && mp != nil && mp.UID == uid {
		return x.retryIn(200*time.Millisecond, "member pod exists; the cache has not seen it yet")
	}
	return err
}

// confirmNoPodFor reads the member pod from the member: one of leafsync's
// that still stands for hostUID means the cache is behind, and the record
// must stay.
func (x *execution) confirmNoPodFor(ctx context.Context, hostUID string) error {
	mp, err := x.memberPodNow(ctx)
	if err == nil && mp != nil && podmeta.Ours(mp, x.key.Cluster, x.ms.hostIdentity()) && mp.Labels[podmeta.LabelHostUID] == hostUID {
		return x.retryIn(time.Second, "member pod of the record exists; the cache has not seen it")
	}
	return err
}

// memberPodNow reads the member pod from the member, not from the cache;
// nil when there is none.
func (x *execution) memberPodNow(ctx context.Context) (*corev1.Pod, error) {
	mp, err := x.m.Runtime.Client().CoreV1().Pods(x.key.Namespace).Get(ctx, x.key.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return mp, err
}

func (x *execution) event(a decide.Action) {
	rec := x.c.opts.Recorder
	if rec == nil {
		return
	}
	typ := corev1.EventTypeNormal
	if a.Warning {
		typ = corev1.EventTypeWarning
	}
	var regarding runtime.Object = &corev1.ObjectReference{Kind: "Node", Name: x.leaf, APIVersion: "v1"}
	if x.hp != nil {
		regarding = x.hp
	}
	rec.Eventf(regarding, nil, typ, a.Reason, string(a.Type), "%s", a.Message)
}

// ---- host writes ----

func (c *Controller) patchHost(ctx context.Context, hp *corev1.Pod, pt types.PatchType, patch any) (*corev1.Pod, error) {
	data, err := json.Marshal(patch)
	if err != nil {
		return hp, err
	}
	out, err := c.opts.Host.CoreV1().Pods(hp.Namespace).Patch(ctx, hp.Name, pt, data, metav1.PatchOptions{})
	if err != nil {
		return hp, err
	}
	if out.UID != hp.UID {
		return hp, fmt.Errorf("host pod %s/%s was replaced (uid %s, expected %s)", hp.Namespace, hp.Name, out.UID, hp.UID)
	}
	return out, nil
}

func (c *Controller) addFinalizer(ctx context.Context, hp *corev1.Pod) (*corev1.Pod, error) {
	if podmeta.HasFinalizer(hp) {
		return hp, nil
	}
	return c.patchHost(ctx, hp, types.StrategicMergePatchType, map[string]any{"metadata": map[string]any{
		"uid": hp.UID, "finalizers": []string{podmeta.FinalizerMemberPod},
	}})
}

func (c *Controller) removeFinalizer(ctx context.Context, hp *corev1.Pod) (*corev1.Pod, error) {
	if !podmeta.HasFinalizer(hp) {
		return hp, nil
	}
	out, err := c.patchHost(ctx, hp, types.StrategicMergePatchType, map[string]any{"metadata": map[string]any{
		"uid": hp.UID, "$deleteFromPrimitiveList/finalizers": []string{podmeta.FinalizerMemberPod},
	}})
	if apierrors.IsNotFound(err) {
		return hp, nil
	}
	return out, err
}

func (c *Controller) setMemberUID(ctx context.Context, hp *corev1.Pod, uid types.UID) (*corev1.Pod, error) {
	if hp.Annotations[podmeta.AnnotationMemberUID] == string(uid) {
		return hp, nil
	}
	return c.patchHost(ctx, hp, types.MergePatchType, map[string]any{"metadata": map[string]any{
		"uid": hp.UID, "annotations": map[string]any{podmeta.AnnotationMemberUID: string(uid)},
	}})
}

// deleteHost deletes a host pod with grace 0 (its UID as precondition).
func (c *Controller) deleteHost(ctx context.Context, hp *corev1.Pod) error {
	err := c.opts.Host.CoreV1().Pods(hp.Namespace).Delete(ctx, hp.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      &metav1.Preconditions{UID: &hp.UID},
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone, or already another pod of that name
	}
	return err
}

// finishHost ends a host pod's deletion: the finalizer goes and the pod is
// deleted with grace 0. With persist, it first waits (briefly) for the
// Keeper to have written every change, so that a delete recorded just
// before is durable before the host pod that held it disappears.
func (x *execution) finishHost(ctx context.Context, persist bool) error {
	if persist {
		fctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := x.c.ledger.flush(fctx, x.key.Cluster)
		cancel()
		if err != nil {
			return x.retryIn(500*time.Millisecond, fmt.Sprintf("waiting for the state store to write the pending delete: %v", err))
		}
	}
	hp, err := x.c.removeFinalizer(ctx, x.hp)
	if err != nil {
		return err
	}
	x.hp = hp
	if hp.DeletionTimestamp != nil {
		return x.c.deleteHost(ctx, hp)
	}
	return nil
}

func (x *execution) syncStatus(ctx context.Context) error {
	if x.mp == nil {
		return nil
	}
	return x.updateHostStatus(ctx, func(hp *corev1.Pod) corev1.PodStatus {
		return podstatus.Mirror(hp, x.mp, x.node, x.c.opts.HostClock.Now())
	})
}

// updateHostStatus writes the status computed from the host pod (again
// from the newest one after a conflict: podstatus.Write).
func (x *execution) updateHostStatus(ctx context.Context, status func(*corev1.Pod) corev1.PodStatus) error {
	out, err := podstatus.Write(ctx, x.c.opts.Host, x.hp, status)
	if apierrors.IsConflict(err) {
		return x.retryIn(100*time.Millisecond, "host pod changed")
	}
	if err != nil {
		return err
	}
	x.hp = out
	return nil
}

// ---- member writes ----

func (x *execution) createMember(ctx context.Context) error {
	mp, _ := translate.MemberPod(x.hp, x.key.Cluster, x.leaf, x.ms.hostIdentity())
	rt := x.m.Runtime
	x.ms.depMu.Lock()
	err := x.ms.ensureNamespace(ctx, rt, mp.Namespace, x.c.admissionFor(x.m))
	if err == nil {
		var refs []reflector.Ref // its ConfigMaps and Secrets, its namespace's Services
		if refs, err = x.c.podRefs(mp.Namespace, mp.Name, &mp.Spec); err == nil {
			err = x.ms.reflector(rt).Ensure(ctx, mp.Namespace, refs)
		}
	}
	if err == nil && x.c.opts.Claims != nil { // its claims' member claims
		err = x.c.opts.Claims.Ensure(ctx, x.key.Cluster, rt.Client(), x.hp)
	}
	if err == nil {
		err = x.ms.tokens(x.m).Ensure(ctx, x.hp) // its host ServiceAccount token, before the pod mounts it
	}
	var created *corev1.Pod
	if err == nil {
		err = member.Retry(ctx, memberRetry, func(ctx context.Context) error {
			var err error
			created, err = rt.Client().CoreV1().Pods(mp.Namespace).Create(ctx, mp, metav1.CreateOptions{})
			return err
		})
	}
	x.ms.depMu.Unlock()
	var ref reflector.Refusal
	switch {
	case errors.As(err, &ref):
		// Not an error retried for ever: the pod waits, saying why.
		x.event(decide.Action{Type: decide.Event, Warning: true, Reason: ref.Reason, Message: ref.Message})
		return x.retryIn(ref.After, ref.Message)
	case apierrors.IsAlreadyExists(err):
		return x.retryIn(200*time.Millisecond, "member namespace or pod created meanwhile (cache behind)")
	case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "service account"):
		// The member's ServiceAccount controller has not made the
		// namespace's default ServiceAccount yet.
		return x.retryIn(500*time.Millisecond, err.Error())
	case err != nil:
		return err
	}
	x.logAction(decide.Action{Type: decide.CreateMember}, "memberUID", string(created.UID))
	if err := x.ms.tokens(x.m).Own(ctx, created); err != nil {
		x.ms.log.Error(err, "token Secret not owned by its member pod yet (the next resync retries)", "pod", created.Namespace+"/"+created.Name)
	}
	x.mp = created
	hp, err := x.c.setMemberUID(ctx, x.hp, created.UID)
	x.hp = hp
	return err
}

// deleteMember deletes a member pod, fenced: this replica must still be the
// state store's writer (a deposed leader resumed after a pause acts on
// stale caches), a fresh read must show the same pod still carrying the
// host UID the decision was about (not adopted meanwhile for a new host
// pod), and the delete is conditional on that read's UID and
// resourceVersion.
func (x *execution) deleteMember(ctx context.Context, a decide.Action) error {
	if err := x.c.ledger.checkWriter(ctx, x.key.Cluster); err != nil {
		return fmt.Errorf("not deleting member pod %s/%s: %w", x.key.Namespace, x.key.Name, err)
	}
	pods := x.m.Runtime.Client().CoreV1().Pods(x.key.Namespace)
	var cur *corev1.Pod
	err := member.Retry(ctx, memberRetry, func(ctx context.Context) error {
		var err error
		cur, err = pods.Get(ctx, x.key.Name, metav1.GetOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if cur.UID != a.MemberUID || (a.HostUID != "" && cur.Labels[podmeta.LabelHostUID] != a.HostUID) {
		x.c.log.Info("member pod changed since the decision; not deleting it", "cluster", x.key.Cluster, "pod", x.key.Namespace+"/"+x.key.Name,
			"memberUID", string(cur.UID), "wantUID", string(a.MemberUID), "hostUID", cur.Labels[podmeta.LabelHostUID], "wantHostUID", a.HostUID)
		return x.retryIn(memberChangedRetry, "member pod changed since the decision")
	}
	uid, rv := cur.UID, cur.ResourceVersion
	err = pods.Delete(ctx, x.key.Name, metav1.DeleteOptions{
		GracePeriodSeconds: a.Grace,
		Preconditions:      &metav1.Preconditions{UID: &uid, ResourceVersion: &rv},
	})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		return x.retryIn(200*time.Millisecond, "member pod changed while being deleted")
	}
	return err
}

func (x *execution) patchMember(ctx context.Context, uid types.UID, patch map[string]any) error {
	meta := patch["metadata"].(map[string]any)
	meta["uid"] = uid
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	rt := x.m.Runtime
	return member.Retry(ctx, memberRetry, func(ctx context.Context) error {
		_, err := rt.Client().CoreV1().Pods(x.key.Namespace).Patch(ctx, x.key.Name, types.MergePatchType, data, metav1.PatchOptions{})
		return err
	})
}

// adopt relabels the member pod for the current host pod: the host pod's
// labels and leafsync's annotations, with the new host UID.
func (x *execution) adopt(ctx context.Context, uid types.UID) error {
	// Only the writer adopts: a deposed leader must not relabel a pod the
	// new one decides about.
	if err := x.c.ledger.checkWriter(ctx, x.key.Cluster); err != nil {
		return fmt.Errorf("not adopting member pod %s/%s: %w", x.key.Namespace, x.key.Name, err)
	}
	want, _ := translate.MemberPod(x.hp, x.key.Cluster, x.leaf, x.ms.hostIdentity())
	lbls := map[string]any{}
	for k := range x.mp.Labels {
		if _, ok := want.Labels[k]; !ok {
			lbls[k] = nil
		}
	}
	for k, v := range want.Labels {
		lbls[k] = v
	}
	anns := map[string]any{}
	for k := range x.mp.Annotations {
		if _, ok := want.Annotations[k]; !ok && strings.HasPrefix(k, member.LeafsyncPrefix) {
			anns[k] = nil
		}
	}
	for k, v := range want.Annotations {
		anns[k] = v
	}
	return x.patchMember(ctx, uid, map[string]any{"metadata": map[string]any{"labels": lbls, "annotations": anns}})
}
