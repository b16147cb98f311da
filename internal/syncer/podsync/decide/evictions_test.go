package decide

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
)

// markedByTaintManager gives a pod the condition the taint manager sets
// just before its DELETE.
func markedByTaintManager(p *corev1.Pod, at time.Time) *corev1.Pod {
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
		Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: podmeta.CauseTaintManager,
		LastTransitionTime: metav1.NewTime(at),
	})
	return p
}

func unreachableSince(at time.Time) []corev1.Taint {
	return []corev1.Taint{{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute, TimeAdded: ptr.To(metav1.NewTime(at))}}
}

func tolerating(p *corev1.Pod, seconds *int64) *corev1.Pod {
	p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{
		Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: seconds,
	})
	return p
}

func TestRefusedEvictionIsReportedOnce(t *testing.T) {
	hp := withMemberUID(withFinalizer(hostPod("h1")), "m1")
	mp := memberOf(hp, "m1")
	// Just marked: the DELETE may still be on its way.
	markedByTaintManager(hp, t0.Add(-time.Second))
	p := Decide(newInput(hysteresis.Ready, hp, mp))
	if p.Has(MarkEvictionRefused) || p.RequeueAfter == 0 || p.RequeueAfter > refusedAfter {
		t.Fatalf("fresh condition: plan %v requeue %s; want a look again within %s", types_(p), p.RequeueAfter, refusedAfter)
	}
	// Still running well after: refused.
	hp.Status.Conditions[0].LastTransitionTime = metav1.NewTime(t0.Add(-10 * time.Second))
	p = Decide(newInput(hysteresis.Ready, hp, mp))
	a, ok := p.Get(MarkEvictionRefused)
	if !ok {
		t.Fatalf("plan %v has no MarkEvictionRefused", types_(p))
	}
	if !p.Has(SyncStatus) {
		t.Errorf("a refused eviction stops pod sync: %v", types_(p))
	}
	// Once marked, not again.
	hp.Annotations[podmeta.AnnotationEvictionRefused] = a.Reason
	if p := Decide(newInput(hysteresis.Ready, hp, mp)); p.Has(MarkEvictionRefused) {
		t.Fatalf("refusal reported twice: %v", types_(p))
	}
}

func TestLeftOverConditionIsNotTheCauseOfALaterDelete(t *testing.T) {
	hp := withMemberUID(withFinalizer(hostPod("h1")), "m1")
	markedByTaintManager(hp, t0.Add(-10*time.Minute)) // refused ten minutes ago
	deleted(hp, t0, 30, podmeta.CauseNone)            // a user deletes it now
	if got := podmeta.CauseOf(hp); got != podmeta.CauseNone {
		t.Fatalf("CauseOf = %q, want a user delete", got)
	}
	p := Decide(newInput(hysteresis.Ready, hp, memberOf(hp, "m1")))
	if a, ok := p.Get(DeleteMember); !ok || a.Reason != "DeleteForwarded" {
		t.Fatalf("a user delete after a refused eviction: plan %v, want it forwarded", types_(p))
	}
	// Seen refused: a delete soon after is still not that eviction.
	soon := withMemberUID(withFinalizer(hostPod("h3")), "m3")
	markedByTaintManager(soon, t0.Add(-8*time.Second))
	soon.Annotations[podmeta.AnnotationEvictionRefused] = podmeta.ConditionStamp(&soon.Status.Conditions[0])
	deleted(soon, t0, 30, podmeta.CauseNone)
	if got := podmeta.CauseOf(soon); got != podmeta.CauseNone {
		t.Fatalf("CauseOf a delete after a reported refusal = %q, want a user delete", got)
	}
	// The taint manager's own delete follows its condition at once.
	ev := withMemberUID(withFinalizer(hostPod("h2")), "m2")
	markedByTaintManager(ev, t0.Add(-time.Second))
	deleted(ev, t0, 30, podmeta.CauseNone)
	if got := podmeta.CauseOf(ev); got != podmeta.CauseTaintManager {
		t.Fatalf("CauseOf = %q, want the taint manager", got)
	}
}

func TestEvictionDeadline(t *testing.T) {
	taintAt := t0.Add(-time.Minute)
	// deadline: the due time on the host's clock (t0 here), and ok.
	deadline := func(pod *corev1.Pod, taints []corev1.Taint, unreachable time.Time) (time.Time, bool) {
		_, due, ok := evictionWait(pod, taints, unreachable, t0, t0)
		return due, ok
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want time.Duration // after the taint; <0: never
	}{
		{"no toleration: at once", hostPod("h1"), 0},
		{"tolerationSeconds 30", tolerating(hostPod("h1"), ptr.To[int64](30)), 30 * time.Second},
		{"shortest toleration wins", tolerating(tolerating(hostPod("h1"), ptr.To[int64](300)), ptr.To[int64](20)), 20 * time.Second},
		{"tolerated for ever", tolerating(hostPod("h1"), nil), -1},
		{"negative seconds: at once", tolerating(hostPod("h1"), ptr.To[int64](-5)), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			at, ok := deadline(tc.pod, unreachableSince(taintAt), time.Time{})
			if tc.want < 0 {
				if ok {
					t.Fatalf("deadline %s, want none", at)
				}
				return
			}
			if !ok || !at.Equal(taintAt.Add(tc.want)) {
				t.Fatalf("deadline %s (%v), want %s", at, ok, taintAt.Add(tc.want))
			}
		})
	}
	// A user's NoExecute taint is the taint manager's business, not a
	// lifecycle eviction leafsync completes.
	user := []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoExecute, TimeAdded: ptr.To(metav1.NewTime(taintAt))}}
	if _, ok := deadline(hostPod("h1"), user, time.Time{}); ok {
		t.Fatalf("deadline from a user's taint")
	}
	// The toleration counts from when the member stopped answering, when
	// that came before the taint; never from later than the taint.
	pod := tolerating(hostPod("h1"), ptr.To[int64](30))
	began := taintAt.Add(-30 * time.Second)
	if at, ok := deadline(pod, unreachableSince(taintAt), began); !ok || !at.Equal(began.Add(30*time.Second)) {
		t.Fatalf("outage began 30s before the taint: deadline %s (%v), want %s", at, ok, began.Add(30*time.Second))
	}
	if at, _ := deadline(pod, unreachableSince(taintAt), taintAt.Add(time.Minute)); !at.Equal(taintAt.Add(30 * time.Second)) {
		t.Fatalf("outage dated after the taint: deadline %s, want the taint's %s", at, taintAt.Add(30*time.Second))
	}
}

// In a real outage a leafsync leaf is tainted notReadyAfter after the
// member stopped answering; a pod tolerating 30s is evicted 30s after the
// outage began, not 30s after the taint (found by the permanent-outage
// scenario of the flap benchmark: leafsync failed its Deployment over 14s
// after virtual-kubelet, the difference of notReadyAfter and KCM's grace).
func TestEvictionCountsFromTheOutagesBeginning(t *testing.T) {
	hp := tolerating(withMemberUID(withFinalizer(hostPod("h1")), "m1"), ptr.To[int64](30))
	in := newInput(hysteresis.NotReady, hp, nil)
	in.LeafTaints = unreachableSince(t0.Add(-10 * time.Second)) // KCM tainted on the confirmation
	in.State.OutageSince = t0.Add(-12 * time.Second)            // confirmed
	in.State.UnreachableSince = t0.Add(-42 * time.Second)       // began notReadyAfter (30s) earlier
	if p := Decide(in); !p.Has(EvictHost) {
		t.Fatalf("toleration of 30s ran out 12s ago counted from the outage: plan %v requeue %s, want EvictHost", types_(p), p.RequeueAfter)
	}
	in.State.UnreachableSince = t0.Add(-20 * time.Second)
	if p := Decide(in); p.Has(EvictHost) || p.RequeueAfter != 15*time.Second {
		t.Fatalf("toleration runs out in 10s (+5s): plan %v requeue %s", types_(p), p.RequeueAfter)
	}
}

func TestDeniedEvictionsAreCompletedWhenTheOutageIsReal(t *testing.T) {
	hp := tolerating(withMemberUID(withFinalizer(hostPod("h1")), "m1"), ptr.To[int64](30))
	in := func(st hysteresis.State, taintAge time.Duration) Input {
		i := newInput(st, hp, nil)
		i.LeafTaints = unreachableSince(t0.Add(-taintAge))
		if !i.State.OutageSince.IsZero() {
			i.State.UnreachableSince = t0.Add(-taintAge)
		}
		return i
	}
	if p := Decide(in(hysteresis.NotReady, 2*time.Minute)); !p.Has(EvictHost) {
		t.Fatalf("member confirmed NotReady, taint outlasted the toleration: plan %v, want EvictHost", types_(p))
	}
	p := Decide(in(hysteresis.NotReady, 20*time.Second))
	if p.Has(EvictHost) || p.RequeueAfter != 15*time.Second {
		t.Fatalf("toleration not expired: plan %v requeue %s, want a look again in 15s", types_(p), p.RequeueAfter)
	}
	for _, st := range []hysteresis.State{hysteresis.Ready, hysteresis.Suspect, hysteresis.Recovering} {
		if p := Decide(in(st, 2*time.Minute)); p.Has(EvictHost) {
			t.Fatalf("member %s: evicted %v; only a confirmed outage completes evictions", st, types_(p))
		}
	}
}

func TestUserTaintEvictionsAreCompletedWhateverTheMemberState(t *testing.T) {
	hp := withMemberUID(withFinalizer(hostPod("h1")), "m1")
	taints := []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoExecute, TimeAdded: ptr.To(metav1.NewTime(t0.Add(-time.Minute)))}}
	for _, st := range []hysteresis.State{hysteresis.Ready, hysteresis.Suspect, hysteresis.NotReady} {
		in := newInput(st, hp, memberOf(hp, "m1"))
		in.LeafTaints = taints
		if p := Decide(in); !p.Has(EvictHost) {
			t.Fatalf("member %s, user NoExecute taint a minute old: plan %v, want EvictHost", st, types_(p))
		}
	}
	// Just added: the taint manager goes first.
	in := newInput(hysteresis.Ready, hp, memberOf(hp, "m1"))
	in.LeafTaints = []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoExecute, TimeAdded: ptr.To(metav1.NewTime(t0.Add(-time.Second)))}}
	if p := Decide(in); p.Has(EvictHost) || p.RequeueAfter != completeAfter-time.Second {
		t.Fatalf("fresh user taint: plan %v requeue %s", types_(p), p.RequeueAfter)
	}
	// Tolerated: nothing.
	tol := withMemberUID(withFinalizer(hostPod("h2")), "m2")
	tol.Spec.Tolerations = []corev1.Toleration{{Key: "maintenance", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}
	in = newInput(hysteresis.Ready, tol, memberOf(tol, "m2"))
	in.LeafTaints = taints
	if p := Decide(in); p.Has(EvictHost) {
		t.Fatalf("tolerated user taint evicted: %v", types_(p))
	}
}

func TestUserTaintWithoutTimeAddedCountsFromTheTaintManagersAttempt(t *testing.T) {
	taints := []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoExecute}}
	hp := withMemberUID(withFinalizer(hostPod("h1")), "m1")
	in := newInput(hysteresis.Ready, hp, memberOf(hp, "m1"))
	in.LeafTaints = taints
	if p := Decide(in); p.Has(EvictHost) {
		t.Fatalf("no attempt by the taint manager yet: evicted %v", types_(p))
	}
	markedByTaintManager(hp, t0.Add(-10*time.Second)) // tried and was refused
	if p := Decide(in); !p.Has(EvictHost) {
		t.Fatalf("refused taint-manager eviction for a user taint: plan %v, want EvictHost", types_(p))
	}
	hp.Spec.Tolerations = []corev1.Toleration{{Key: "maintenance", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}
	if p := Decide(in); p.Has(EvictHost) {
		t.Fatalf("tolerated for ever: evicted %v", types_(p))
	}
}

// The guard refuses the taint manager's eviction for a user's NoExecute
// taint while its record does not show the taint; leafsync carries that
// eviction out, so the refusal is noted, not counted or warned about.
func TestUserTaintRefusalIsNotARefusedEviction(t *testing.T) {
	taints := []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoExecute}}
	hp := withMemberUID(withFinalizer(hostPod("h1")), "m1")
	markedByTaintManager(hp, t0.Add(-10*time.Second))
	in := newInput(hysteresis.Ready, hp, memberOf(hp, "m1"))
	in.LeafTaints = taints
	p := Decide(in)
	a, ok := p.Get(MarkEvictionRefused)
	if !ok || !a.ForUserTaint {
		t.Fatalf("plan %v (%+v): want the refusal noted as the user taint's", types_(p), a)
	}
	for _, a := range p.Actions {
		if a.Type == Event && (a.Warning || a.Reason == "EvictionRefused") {
			t.Errorf("a refusal for a user's taint reported as %s (warning %v)", a.Reason, a.Warning)
		}
	}
	if !p.Has(EvictHost) {
		t.Errorf("plan %v: leafsync does not carry the user's eviction out", types_(p))
	}
	// A pod tolerating the user's taint for ever is not evicted for it: its
	// refusal is a refused eviction.
	hp.Spec.Tolerations = []corev1.Toleration{{Key: "maintenance", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}
	a, ok = Decide(in).Get(MarkEvictionRefused)
	if !ok || a.ForUserTaint {
		t.Fatalf("tolerated user taint: MarkEvictionRefused %v, ForUserTaint %v; want a refused eviction", ok, a.ForUserTaint)
	}
}
