// Package podstatus is the status of a host pod on a leaf: mirrored from
// its member pod, failed when the member pod is gone, with a condition set
// (an eviction), and written only when it changed.
package podstatus

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Mirror is the host pod's status mirrored from its member pod: phase,
// conditions, container statuses, IPs and start time come from the member;
// what the host owns stays (QoS class, nominated node, resource claims,
// observed generation, and conditions only the host has — notably
// DisruptionTarget).
func Mirror(hp, mp *corev1.Pod) corev1.PodStatus {
	st := *mp.Status.DeepCopy()
	st.QOSClass = hp.Status.QOSClass
	st.NominatedNodeName = hp.Status.NominatedNodeName
	st.ObservedGeneration = hp.Status.ObservedGeneration
	st.ResourceClaimStatuses = hp.Status.ResourceClaimStatuses
	st.ExtendedResourceClaimStatus = hp.Status.ExtendedResourceClaimStatus
	st.Resize = hp.Status.Resize
	var conds []corev1.PodCondition
	fromMember := map[corev1.PodConditionType]bool{}
	for _, c := range mp.Status.Conditions {
		if c.Type == corev1.DisruptionTarget {
			continue // the host's own disruption is what matters there
		}
		fromMember[c.Type] = true
		conds = append(conds, c)
	}
	for _, c := range hp.Status.Conditions {
		if !fromMember[c.Type] {
			conds = append(conds, c)
		}
	}
	st.Conditions = conds
	return st
}

// Failed is the host pod's status once its member pod was deleted or
// evicted in the member: Failed, not ready, containers terminated.
func Failed(hp *corev1.Pod, reason, message string, now time.Time) corev1.PodStatus {
	st := *hp.Status.DeepCopy()
	st.Phase = corev1.PodFailed
	st.Reason = reason
	st.Message = message
	t := metav1.NewTime(now)
	for _, typ := range []corev1.PodConditionType{corev1.PodReady, corev1.ContainersReady} {
		found := false
		for i := range st.Conditions {
			if st.Conditions[i].Type == typ {
				found = true
				if st.Conditions[i].Status != corev1.ConditionFalse {
					st.Conditions[i].Status = corev1.ConditionFalse
					st.Conditions[i].LastTransitionTime = t
				}
				st.Conditions[i].Reason = reason
			}
		}
		if !found {
			st.Conditions = append(st.Conditions, corev1.PodCondition{Type: typ, Status: corev1.ConditionFalse, Reason: reason, LastTransitionTime: t})
		}
	}
	terminate := func(cs []corev1.ContainerStatus) {
		for i := range cs {
			cs[i].Ready = false
			if cs[i].State.Terminated == nil {
				started := t
				if cs[i].State.Running != nil {
					started = cs[i].State.Running.StartedAt
				}
				cs[i].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
					ExitCode: 137, Reason: reason, Message: message, StartedAt: started, FinishedAt: t,
				}}
			}
		}
	}
	terminate(st.ContainerStatuses)
	terminate(st.InitContainerStatuses)
	return st
}

// SetCondition puts c in st, in place of a condition of its type.
func SetCondition(st *corev1.PodStatus, c corev1.PodCondition) {
	for i := range st.Conditions {
		if st.Conditions[i].Type == c.Type {
			st.Conditions[i] = c
			return
		}
	}
	st.Conditions = append(st.Conditions, c)
}

// Write updates the host pod's status to st unless it holds st already,
// and returns the pod as written (on a conflict the caller looks again).
func Write(ctx context.Context, host kubernetes.Interface, hp *corev1.Pod, st corev1.PodStatus) (*corev1.Pod, error) {
	if equality.Semantic.DeepEqual(st, hp.Status) {
		return hp, nil
	}
	cp := hp.DeepCopy()
	cp.Status = st
	return host.CoreV1().Pods(cp.Namespace).UpdateStatus(ctx, cp, metav1.UpdateOptions{})
}
