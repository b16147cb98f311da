package decide

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
)

// The taint manager's evictions of a leaf's pods, seen from pod sync. With
// the eviction guard (internal/syncer/guard), the API server refuses them unless
// leafsync has confirmed the member NotReady; the taint manager marks the
// pod DisruptionTarget=DeletionByTaintManager, is refused, retries a few
// times and gives up until the leaf's taints change
// (kubernetes/kubernetes#140639). Pod sync reports each refusal, completes
// the evictions the taint manager gave up on once the outage is real, and
// does not mistake the condition a refusal leaves behind for the cause of
// a later delete.
//
// One clock per comparison: times in the host pod and on the leaf (the
// condition, deletionTimestamp, a taint's timeAdded) are the host control
// plane's and are measured against input.HostNow; the member's outage
// times are leafsync's and are measured against input.Now. leafsync stamps
// the conditions it sets with HostNow, so that they compare with the API
// server's deletionTimestamp.

const (
	// refusedAfter: a live pod whose taint-manager condition is this old
	// was not deleted; the taint manager deletes within milliseconds of
	// setting it.
	refusedAfter = 5 * time.Second
	// completeAfter: leafsync completes an eviction only this long after
	// the taint manager should have done it, so that the two do not race.
	completeAfter = 5 * time.Second
)

// evictionCondition is a pod's DisruptionTarget=True condition of an
// eviction cause, or nil.
func evictionCondition(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		c := &p.Status.Conditions[i]
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && podmeta.IsEvictionCause(c.Reason) {
			return c
		}
	}
	return nil
}

// evictionWait is how long until a pod is evicted from a leaf whose member
// is down (≤ 0: due): the pod's shortest toleration of a node-lifecycle
// NoExecute taint (the taint manager's rule, from kube-controller-manager's
// tainteviction.getMinTolerationTime), counted from the taint's timeAdded
// (on the host's clock, hostNow) or from when the member stopped answering
// (unreachable, on leafsync's clock, now; zero if unknown), whichever ends
// first. KCM taints a leafsync leaf only once leafsync has confirmed the
// outage, notReadyAfter after it began; a kubelet's node is tainted a grace
// period after it went silent. Counting from the taint alone would make
// waiting out flaps cost a slower failover in every real outage. due is
// the deadline on the host's clock, for messages. ok is false when no such
// taint is on the leaf or the pod tolerates it for ever.
func evictionWait(hp *corev1.Pod, leafTaints []corev1.Taint, unreachable, now, hostNow time.Time) (wait time.Duration, due time.Time, ok bool) {
	for i := range leafTaints {
		t := &leafTaints[i]
		if t.Effect != corev1.TaintEffectNoExecute || !lifecycleTaints[t.Key] || t.TimeAdded == nil {
			continue
		}
		tol, bounded := tolerationOf(hp, t)
		if !bounded {
			continue
		}
		w := t.TimeAdded.Add(tol).Sub(hostNow)
		if !unreachable.IsZero() {
			w = min(w, unreachable.Add(tol).Sub(now))
		}
		if !ok || w < wait {
			wait, ok = w, true
		}
	}
	return wait, hostNow.Add(wait), ok
}

// userTaintDeadline is when the taint manager evicts a pod for the
// NoExecute taints node lifecycle did not set (a user's maintenance taint,
// out-of-service), whatever the member's state: a time on the host's
// clock.
func userTaintDeadline(hp *corev1.Pod, leafTaints []corev1.Taint) (deadline time.Time, ok bool) {
	for i := range leafTaints {
		t := &leafTaints[i]
		if t.Effect != corev1.TaintEffectNoExecute || lifecycleTaints[t.Key] || t.TimeAdded == nil {
			continue
		}
		if tol, bounded := tolerationOf(hp, t); bounded {
			if at := t.TimeAdded.Add(tol); !ok || at.Before(deadline) {
				deadline, ok = at, true
			}
		}
	}
	if ok {
		return deadline, true
	}
	// A taint without timeAdded (node lifecycle sets it; a user usually
	// does not): the taint manager counts from when it saw the taint, which
	// its own DisruptionTarget condition, set as it tried to evict, records.
	c := evictionCondition(hp)
	if c == nil || c.Reason != podmeta.CauseTaintManager {
		return time.Time{}, false
	}
	for i := range leafTaints {
		t := &leafTaints[i]
		if t.Effect == corev1.TaintEffectNoExecute && !lifecycleTaints[t.Key] && t.TimeAdded == nil && !toleratesForever(hp, t) {
			return c.LastTransitionTime.Time, true
		}
	}
	return time.Time{}, false
}

// userTaintKey is the key of a NoExecute taint on the leaf that node
// lifecycle did not set and that the pod does not tolerate for ever (the
// taint manager evicts it for that taint), or "".
func userTaintKey(hp *corev1.Pod, leafTaints []corev1.Taint) string {
	for i := range leafTaints {
		t := &leafTaints[i]
		if t.Effect == corev1.TaintEffectNoExecute && !lifecycleTaints[t.Key] && !toleratesForever(hp, t) {
			return t.Key
		}
	}
	return ""
}

// toleratesForever: a toleration matches the taint and none that matches
// bounds it with tolerationSeconds.
func toleratesForever(hp *corev1.Pod, t *corev1.Taint) bool {
	tolerated := false
	for j := range hp.Spec.Tolerations {
		tol := &hp.Spec.Tolerations[j]
		if !tol.ToleratesTaint(klog.Background(), t, false) {
			continue
		}
		if tol.TolerationSeconds != nil {
			return false
		}
		tolerated = true
	}
	return tolerated
}

// tolerationOf is how long the pod tolerates a taint: 0 when it does not
// tolerate it, the shortest tolerationSeconds of the tolerations that
// match; bounded is false when it tolerates the taint for ever.
func tolerationOf(hp *corev1.Pod, t *corev1.Taint) (wait time.Duration, bounded bool) {
	wait, forever, tolerated := time.Duration(-1), true, false
	for j := range hp.Spec.Tolerations {
		tol := &hp.Spec.Tolerations[j]
		if !tol.ToleratesTaint(klog.Background(), t, false) {
			continue
		}
		tolerated = true
		if tol.TolerationSeconds == nil {
			continue
		}
		forever = false
		d := time.Duration(max(*tol.TolerationSeconds, 0)) * time.Second
		if wait < 0 || d < wait {
			wait = d
		}
	}
	switch {
	case !tolerated:
		return 0, true
	case forever:
		return 0, false
	}
	return wait, true
}

// decideEvictions looks at a live host pod on the leaf: reports a refused
// eviction once, and completes an eviction the taint manager should have
// carried out by now while the member is confirmed NotReady.
func decideEvictions(in Input, p *Plan) {
	hp := in.Host
	if c := evictionCondition(hp); c != nil && c.Reason == podmeta.CauseTaintManager {
		stamp := podmeta.ConditionStamp(c)
		age := in.HostNow.Sub(c.LastTransitionTime.Time)
		switch {
		case hp.Annotations[podmeta.AnnotationEvictionRefused] == stamp:
		case age >= refusedAfter && userTaintKey(hp, in.LeafTaints) != "":
			// The guard refused the taint manager's eviction for a user's
			// NoExecute taint (when its record did not show the taint yet);
			// leafsync carries it out below. Noted, not a refused eviction.
			p.add(Action{Type: MarkEvictionRefused, Reason: stamp, ForUserTaint: true},
				Action{Type: Event, Reason: "EvictionForUserTaint",
					Message: fmt.Sprintf("the taint manager's eviction (%s) for the leaf's NoExecute taint %s was refused by the eviction guard; leafsync carries it out", c.LastTransitionTime.UTC().Format(time.RFC3339), userTaintKey(hp, in.LeafTaints))})
		case age >= refusedAfter:
			p.add(Action{Type: MarkEvictionRefused, Reason: stamp},
				Action{Type: Event, Warning: true, Reason: "EvictionRefused",
					Message: fmt.Sprintf("the taint manager's eviction (%s) did not happen: member cluster %s was %s, so the eviction guard refused it; the pod keeps running", c.LastTransitionTime.UTC().Format(time.RFC3339), in.Cluster, in.State.State)})
		default:
			p.requeue(refusedAfter - age)
		}
	}
	// A user's NoExecute taint: the guard cannot tell the taint manager's
	// delete for it from one for a lapsed Lease, and refuses it while the
	// member is Ready; the eviction is the user's intent, so leafsync
	// carries it out.
	if deadline, ok := userTaintDeadline(hp, in.LeafTaints); ok {
		if due := deadline.Add(completeAfter); in.HostNow.Before(due) {
			p.requeue(due.Sub(in.HostNow))
		} else {
			p.add(Action{Type: EvictHost, Reason: "EvictionCompleted",
				Message: fmt.Sprintf("evicted by leafsync as the taint manager would have: the leaf carries a NoExecute taint the pod does not tolerate (due %s)", deadline.UTC().Format(time.RFC3339))})
			return
		}
	}
	if in.State.State != hysteresis.NotReady {
		return
	}
	wait, deadline, ok := evictionWait(hp, in.LeafTaints, in.State.UnreachableSince, in.Now, in.HostNow)
	if !ok {
		return
	}
	if wait += completeAfter; wait > 0 {
		p.requeue(wait)
		return
	}
	p.add(Action{Type: EvictHost, Reason: "EvictionCompleted",
		Message: fmt.Sprintf("evicted by leafsync: member cluster %s is confirmed NotReady, unreachable since %s, and the pod's toleration of the leaf's NoExecute taint, counted from then, ran out (due %s)", in.Cluster, in.State.UnreachableSince.UTC().Format(time.RFC3339), deadline.UTC().Format(time.RFC3339))})
}
