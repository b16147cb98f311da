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

// TestOneClockPerComparison: with leafsync's clock 60s behind or ahead of
// the host's, every decision that measures a duration decides as with
// the clocks in step. Host times (conditions, taints, deletionTimestamp)
// are on the host's clock (HostNow = t0), the member's outage times on
// leafsync's (Now = t0 + skew).
func TestOneClockPerComparison(t *testing.T) {
	for _, skew := range []time.Duration{-time.Minute, 0, time.Minute} {
		host := func(d time.Duration) time.Time { return t0.Add(d) }
		local := func(d time.Duration) time.Time { return t0.Add(skew + d) }
		at := func(st hysteresis.State, hp, mp *corev1.Pod) Input {
			in := newInput(st, hp, mp)
			in.Now, in.HostNow = local(0), host(0)
			return in
		}
		t.Run("leafsync "+skew.String(), func(t *testing.T) {
			// A refusal is reported 5s after the taint manager's
			// condition, not before.
			hp := withMemberUID(withFinalizer(hostPod("h1")), "m1")
			markedByTaintManager(hp, host(-time.Second))
			p := Decide(at(hysteresis.Ready, hp, memberOf(hp, "m1")))
			if p.Has(MarkEvictionRefused) || p.RequeueAfter != refusedAfter-time.Second {
				t.Errorf("condition 1s old: plan %v requeue %s, want a look again in 4s", types_(p), p.RequeueAfter)
			}
			hp.Status.Conditions[0].LastTransitionTime = metav1.NewTime(host(-6 * time.Second))
			if p := Decide(at(hysteresis.Ready, hp, memberOf(hp, "m1"))); !p.Has(MarkEvictionRefused) {
				t.Errorf("condition 6s old: plan %v, want the refusal reported", types_(p))
			}

			// An eviction leafsync completes is stamped with the host's
			// time; its delete is that eviction, not a user's.
			ev := withMemberUID(withFinalizer(hostPod("h2")), "m2")
			markedByTaintManager(ev, host(0))
			deleted(ev, host(0), 30, podmeta.CauseNone)
			if got := podmeta.CauseOf(ev); got != podmeta.CauseTaintManager {
				t.Errorf("delete right after the condition: cause %q, want the taint manager", got)
			}

			// A user's NoExecute taint added 1s ago, not tolerated:
			// completed 5s after, not at once.
			user := withMemberUID(withFinalizer(hostPod("h3")), "m3")
			in := at(hysteresis.Ready, user, memberOf(user, "m3"))
			in.LeafTaints = []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoExecute, TimeAdded: ptr.To(metav1.NewTime(host(-time.Second)))}}
			if p := Decide(in); p.Has(EvictHost) || p.RequeueAfter != completeAfter-time.Second {
				t.Errorf("user taint 1s old: plan %v requeue %s, want a look again in 4s", types_(p), p.RequeueAfter)
			}

			// A confirmed outage: toleration 30s counted from the
			// member's first failure (leafsync's clock) or the taint
			// (the host's), whichever ends first.
			tol := tolerating(withMemberUID(withFinalizer(hostPod("h4")), "m4"), ptr.To[int64](30))
			in = at(hysteresis.NotReady, tol, nil)
			in.LeafTaints = unreachableSince(host(-10 * time.Second))
			in.State.OutageSince, in.State.UnreachableSince = local(-12*time.Second), local(-42*time.Second)
			if p := Decide(in); !p.Has(EvictHost) {
				t.Errorf("toleration ran out 12s ago counted from the outage: plan %v requeue %s, want EvictHost", types_(p), p.RequeueAfter)
			}
			in.State.UnreachableSince = local(-20 * time.Second)
			if p := Decide(in); p.Has(EvictHost) || p.RequeueAfter != 15*time.Second {
				t.Errorf("toleration runs out in 10s (+5s): plan %v requeue %s", types_(p), p.RequeueAfter)
			}

			// Reaping: reapAfter (40s) after the termination (10s ago,
			// host) and after the confirmation (30s ago, leafsync).
			reaped := withMemberUID(withFinalizer(deleted(hostPod("h5"), host(-10*time.Second), 30, podmeta.CauseTaintManager)), "m5")
			in = at(hysteresis.NotReady, reaped, memberOf(reaped, "m5"))
			in.ReapAfter = 40 * time.Second
			in.State.OutageSince = local(-30 * time.Second)
			if p := Decide(in); p.Has(FinishHost) || p.RequeueAfter != 30*time.Second {
				t.Errorf("reap: plan %v requeue %s, want a look again in 30s", types_(p), p.RequeueAfter)
			}
		})
	}
}
