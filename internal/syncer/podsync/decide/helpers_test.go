package decide

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/syncer/podsync/deletes"
	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
	"github.com/leafsync/leafsync/internal/syncer/podsync/podtest"
	"github.com/leafsync/leafsync/internal/syncer/podsync/translate"
)

// The shared fixtures (podtest), by their short names.
var (
	t0      = podtest.T0
	hostPod = podtest.HostPod
)

const (
	testCluster = podtest.Cluster
	testHost    = podtest.Host
	testLeaf    = podtest.Leaf
)

func withFinalizer(p *corev1.Pod) *corev1.Pod {
	p.Finalizers = append(p.Finalizers, podmeta.FinalizerMemberPod)
	return p
}

func withMemberUID(p *corev1.Pod, uid string) *corev1.Pod {
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[podmeta.AnnotationMemberUID] = uid
	return p
}

// deleted marks a host pod Terminating since at, with grace g and a
// DisruptionTarget cause (CauseNone for a plain DELETE).
func deleted(p *corev1.Pod, at time.Time, grace int64, cause string) *corev1.Pod {
	p.DeletionTimestamp = ptr.To(metav1.NewTime(at.Add(time.Duration(grace) * time.Second)))
	p.DeletionGracePeriodSeconds = ptr.To(grace)
	if cause != podmeta.CauseNone {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
			Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: cause,
		})
	}
	return p
}

// memberOf is the member pod leafsync made for hp.
func memberOf(hp *corev1.Pod, uid string) *corev1.Pod {
	mp, _ := translate.MemberPod(hp, testCluster, testLeaf, testHost)
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

func newInput(st hysteresis.State, hp, mp *corev1.Pod, recs ...deletes.PendingDelete) Input {
	in := Input{
		Now: t0, HostNow: t0, Cluster: testCluster, HostIdentity: testHost, State: status(st), Policy: podmeta.DeferUntilReplaced,
		MaxDeferral: 10 * time.Minute, ReapAfter: time.Minute,
		Host: hp, Member: mp, Records: recs,
	}
	if hp != nil {
		in.DesiredHash = translate.HostSpecHash(hp)
	}
	return in
}

func types_(p Plan) []ActionType {
	out := make([]ActionType, len(p.Actions))
	for i, a := range p.Actions {
		out[i] = a.Type
	}
	return out
}

// Has reports whether the plan holds an action of type t (tests only).
func (p Plan) Has(t ActionType) bool {
	for _, a := range p.Actions {
		if a.Type == t {
			return true
		}
	}
	return false
}

// Get returns the first action of type t (tests only).
func (p Plan) Get(t ActionType) (Action, bool) {
	for _, a := range p.Actions {
		if a.Type == t {
			return a, true
		}
	}
	return Action{}, false
}
