package podsync

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/syncer/podsync/deletes"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	testCluster = "member-a"
	// testHost is the host's identity.
	testHost = "host-a"
	testLeaf = "leaf-member-a"
)

func hostPod(uid string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-0", Namespace: "apps", UID: types.UID(uid),
			Labels:            map[string]string{"app": "web"},
			CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour)),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web", UID: "sts-uid", Controller: ptr.To(true),
			}},
		},
		Spec: corev1.PodSpec{
			NodeName:   testLeaf,
			Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

func withFinalizer(p *corev1.Pod) *corev1.Pod {
	p.Finalizers = append(p.Finalizers, FinalizerMemberPod)
	return p
}

func withMemberUID(p *corev1.Pod, uid string) *corev1.Pod {
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[AnnotationMemberUID] = uid
	return p
}

// deleted marks a host pod Terminating since at, with grace g and a
// DisruptionTarget cause (CauseNone for a plain DELETE).
func deleted(p *corev1.Pod, at time.Time, grace int64, cause string) *corev1.Pod {
	p.DeletionTimestamp = ptr.To(metav1.NewTime(at.Add(time.Duration(grace) * time.Second)))
	p.DeletionGracePeriodSeconds = ptr.To(grace)
	if cause != causeNone {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
			Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: cause,
		})
	}
	return p
}

// memberOf is the member pod leafsync made for hp.
func memberOf(hp *corev1.Pod, uid string) *corev1.Pod {
	mp, _ := memberPod(hp, testCluster, testLeaf, testHost)
	mp.UID = types.UID(uid)
	mp.Status.Phase = corev1.PodRunning
	return mp
}

func status(s hysteresis.State) hysteresis.Status {
	st := hysteresis.Status{State: s, Since: t0.Add(-time.Minute)}
	if s == hysteresis.NotReady || s == hysteresis.Recovering {
		st.OutageSince = t0.Add(-time.Minute)
		st.UnreachableSince = st.OutageSince
	}
	return st
}

func newInput(st hysteresis.State, hp, mp *corev1.Pod, recs ...deletes.PendingDelete) input {
	in := input{
		Now: t0, HostNow: t0, Cluster: testCluster, HostIdentity: testHost, State: status(st), Policy: DeferUntilReplaced,
		MaxDeferral: 10 * time.Minute, ReapAfter: time.Minute,
		Host: hp, Member: mp, Records: recs,
	}
	if hp != nil {
		in.DesiredHash = hostSpecHash(hp)
	}
	return in
}

func types_(p plan) []actionType {
	out := make([]actionType, len(p.Actions))
	for i, a := range p.Actions {
		out[i] = a.Type
	}
	return out
}

// Has reports whether the plan holds an action of type t (tests only).
func (p plan) Has(t actionType) bool {
	for _, a := range p.Actions {
		if a.Type == t {
			return true
		}
	}
	return false
}
