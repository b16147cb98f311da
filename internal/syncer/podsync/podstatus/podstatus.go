// Package podstatus is the status of a host pod on a leaf: mirrored from
// its member pod, failed when the member pod is gone, with a condition set
// (an eviction), and written only when it changed.
//
// What a kubelet would report, it reports as the leaf's kubelet would:
// the host IPs are the leaf Node's (not the member node's), Ready also
// waits for the host pod's readiness gates (the member pod has none), and
// observedGeneration counts host generations. What others write on the
// host pod (conditions the member does not report, readiness gate
// conditions, DisruptionTarget) is never overwritten: a status is computed
// from the newest host pod the write saw (see Write).
package podstatus

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	netutils "k8s.io/utils/net"

	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
)

// ReasonReadinessGatesNotReady is the kubelet's reason for a pod not
// Ready because of its readiness gates.
const ReasonReadinessGatesNotReady = "ReadinessGatesNotReady"

// Mirror is the host pod's status mirrored from its member pod: phase,
// conditions, container statuses, pod IPs and start time come from the
// member; the host IPs are the leaf's (HostIPs); Ready is the member's
// and the host pod's readiness gates (ready); observedGeneration and the
// conditions' observed generations are host generations (hostGeneration).
// What the host owns stays (QoS class, nominated node, resource claims,
// resize, and conditions only the host has — readiness gates,
// DisruptionTarget). now stamps a Ready that the gates turned.
func Mirror(hp, mp *corev1.Pod, leaf *corev1.Node, now time.Time) corev1.PodStatus {
	st := *mp.Status.DeepCopy()
	st.QOSClass = hp.Status.QOSClass
	st.NominatedNodeName = hp.Status.NominatedNodeName
	st.ResourceClaimStatuses = hp.Status.ResourceClaimStatuses
	st.ExtendedResourceClaimStatus = hp.Status.ExtendedResourceClaimStatus
	st.Resize = hp.Status.Resize
	st.HostIPs = HostIPs(leaf)
	st.HostIP = ""
	if len(st.HostIPs) > 0 {
		st.HostIP = st.HostIPs[0].IP
	}
	st.ObservedGeneration = hp.Status.ObservedGeneration
	if g, ok := hostGeneration(mp, mp.Status.ObservedGeneration); ok {
		st.ObservedGeneration = g
	}
	var conds []corev1.PodCondition
	fromMember := map[corev1.PodConditionType]bool{}
	for _, c := range mp.Status.Conditions {
		if c.Type == corev1.DisruptionTarget {
			continue // the host's own disruption is what matters there
		}
		fromMember[c.Type] = true
		c.ObservedGeneration = conditionGeneration(hp, mp, c)
		conds = append(conds, c)
	}
	for _, c := range hp.Status.Conditions {
		if !fromMember[c.Type] {
			conds = append(conds, c)
		}
	}
	st.Conditions = conds
	ready(&st, hp, now)
	return st
}

// hostGeneration is the host generation a member generation stands for:
// the member pod's AnnotationHostGeneration once memberGen has reached the
// member pod's own generation (its kubelet saw leafsync's latest spec);
// not known otherwise.
func hostGeneration(mp *corev1.Pod, memberGen int64) (int64, bool) {
	v, ok := mp.Annotations[podmeta.AnnotationHostGeneration]
	if !ok || memberGen == 0 || memberGen < mp.Generation {
		return 0, false
	}
	g, err := strconv.ParseInt(v, 10, 64)
	if err != nil || g <= 0 {
		return 0, false
	}
	return g, true
}

// conditionGeneration is a mirrored condition's observed generation in
// host generations; when not known, the host condition's own.
func conditionGeneration(hp, mp *corev1.Pod, c corev1.PodCondition) int64 {
	if g, ok := hostGeneration(mp, c.ObservedGeneration); ok {
		return g
	}
	for _, h := range hp.Status.Conditions {
		if h.Type == c.Type {
			return h.ObservedGeneration
		}
	}
	return 0
}

// ready makes st's Ready condition what the kubelet's
// GeneratePodReadyCondition computes: the member's Ready (its containers),
// and then every readiness gate of the host pod has its condition True.
// The transition time is kept while the status holds; a Ready the gates
// held back turns at now (the member's time is earlier).
func ready(st *corev1.PodStatus, hp *corev1.Pod, now time.Time) {
	i := conditionIndex(st.Conditions, corev1.PodReady)
	if i < 0 || st.Conditions[i].Status != corev1.ConditionTrue {
		return // not Ready already: the member's reason says why
	}
	h := conditionIndex(hp.Status.Conditions, corev1.PodReady)
	gatedBefore := h >= 0 && hp.Status.Conditions[h].Reason == ReasonReadinessGatesNotReady
	var unready []string
	for _, g := range hp.Spec.ReadinessGates {
		j := conditionIndex(st.Conditions, g.ConditionType)
		switch {
		case j < 0:
			unready = append(unready, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", g.ConditionType))
		case st.Conditions[j].Status != corev1.ConditionTrue:
			unready = append(unready, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", g.ConditionType, st.Conditions[j].Status))
		}
	}
	c := &st.Conditions[i]
	if len(unready) == 0 {
		if gatedBefore {
			c.LastTransitionTime = metav1.NewTime(now)
		}
		return
	}
	c.Status = corev1.ConditionFalse
	c.Reason = ReasonReadinessGatesNotReady
	c.Message = strings.Join(unready, ", ")
	c.LastTransitionTime = metav1.NewTime(now)
	if h >= 0 && hp.Status.Conditions[h].Status == corev1.ConditionFalse {
		c.LastTransitionTime = hp.Status.Conditions[h].LastTransitionTime
	}
}

func conditionIndex(conds []corev1.PodCondition, t corev1.PodConditionType) int {
	for i := range conds {
		if conds[i].Type == t {
			return i
		}
	}
	return -1
}

// HostIPs are what a kubelet on the leaf would report as a pod's host
// IPs: the leaf Node's first InternalIP (else its first ExternalIP), then
// the first address of the other IP family, if any. None for a leaf
// without addresses (the kubelet API is not served, so nothing is
// advertised).
func HostIPs(leaf *corev1.Node) []corev1.HostIP {
	if leaf == nil {
		return nil
	}
	var ordered []string
	for _, t := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP} {
		for _, a := range leaf.Status.Addresses {
			if a.Type == t && netutils.ParseIPSloppy(a.Address) != nil {
				ordered = append(ordered, a.Address)
			}
		}
	}
	if len(ordered) == 0 {
		return nil
	}
	ips := []corev1.HostIP{{IP: ordered[0]}}
	for _, a := range ordered[1:] {
		if netutils.IsIPv6String(a) != netutils.IsIPv6String(ordered[0]) {
			return append(ips, corev1.HostIP{IP: a})
		}
	}
	return ips
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
	if i := conditionIndex(st.Conditions, c.Type); i >= 0 {
		st.Conditions[i] = c
		return
	}
	st.Conditions = append(st.Conditions, c)
}

// Write updates the host pod's status to status(hp) unless it holds it
// already, and returns the pod as written. The update carries hp's
// resourceVersion, so a status computed from a stale pod never lands: on
// a conflict the newest host pod is read and status computed again from
// it, so what another writer put there meanwhile stays. A host pod
// replaced by another of its name is left alone (a conflict).
func Write(ctx context.Context, host kubernetes.Interface, hp *corev1.Pod, status func(*corev1.Pod) corev1.PodStatus) (*corev1.Pod, error) {
	cur := hp
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if cur == nil {
			fresh, err := host.CoreV1().Pods(hp.Namespace).Get(ctx, hp.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if fresh.UID != hp.UID {
				return apierrors.NewConflict(corev1.Resource("pods"), hp.Name, fmt.Errorf("replaced (uid %s, expected %s)", fresh.UID, hp.UID))
			}
			cur = fresh
		}
		st := status(cur)
		if equality.Semantic.DeepEqual(st, cur.Status) {
			return nil
		}
		cp := cur.DeepCopy()
		cp.Status = st
		out, err := host.CoreV1().Pods(cp.Namespace).UpdateStatus(ctx, cp, metav1.UpdateOptions{})
		if err != nil {
			cur = nil
			return err
		}
		cur = out
		return nil
	})
	if err != nil {
		return hp, err
	}
	return cur, nil
}
