package decide

import (
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/utils/ptr"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/syncer/podsync/deletes"
	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
)

func wantActions(t *testing.T, p Plan, want ...ActionType) {
	t.Helper()
	got := types_(p)
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("actions = %v, want %v", got, want)
	}
}

func TestCauseOf(t *testing.T) {
	for cause, eviction := range map[string]bool{
		podmeta.CauseNone: false, podmeta.CauseEvictionAPI: false, podmeta.CausePreemption: false, "TerminationByKubelet": false, "SomethingNew": false,
		podmeta.CauseTaintManager: true, podmeta.CausePodGC: true, podmeta.CauseOrphan: true,
	} {
		p := deleted(hostPod("h1"), t0, 30, cause)
		if got := podmeta.CauseOf(p); got != cause {
			t.Errorf("CauseOf = %q, want %q", got, cause)
		}
		if podmeta.IsEvictionCause(cause) != eviction {
			t.Errorf("isEvictionCause(%q) = %v, want %v", cause, !eviction, eviction)
		}
	}
	// A DisruptionTarget that is not True is no cause.
	p := hostPod("h1")
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionFalse, Reason: podmeta.CauseTaintManager})
	if got := podmeta.CauseOf(p); got != podmeta.CauseNone {
		t.Errorf("CauseOf with DisruptionTarget=False = %q, want none", got)
	}
}

func TestLive(t *testing.T) {
	t.Run("new host pod: finalizer first, then the member pod", func(t *testing.T) {
		wantActions(t, Decide(newInput(hysteresis.Ready, hostPod("h1"), nil)), AddFinalizer, CreateMember)
		wantActions(t, Decide(newInput(hysteresis.Suspect, withFinalizer(hostPod("h1")), nil)), CreateMember)
	})
	t.Run("running: record the member UID and mirror status", func(t *testing.T) {
		hp := withFinalizer(hostPod("h1"))
		wantActions(t, Decide(newInput(hysteresis.Ready, hp, memberOf(hp, "m1"))), SetMemberUID, SyncStatus)
		withMemberUID(hp, "m1")
		wantActions(t, Decide(newInput(hysteresis.Ready, hp, memberOf(hp, "m1"))), SyncStatus)
	})
	t.Run("member confirmed down: no member writes, no status from a stale cache", func(t *testing.T) {
		for _, s := range []hysteresis.State{hysteresis.NotReady, hysteresis.Recovering} {
			hp := withMemberUID(withFinalizer(hostPod("h1")), "m1")
			wantActions(t, Decide(newInput(s, hp, memberOf(hp, "m1"))))
			wantActions(t, Decide(newInput(s, hostPod("h2"), nil)))
		}
	})
	t.Run("member pod deleted in the member: host pod fails", func(t *testing.T) {
		hp := withMemberUID(withFinalizer(hostPod("h1")), "m1")
		p := Decide(newInput(hysteresis.Ready, hp, nil))
		wantActions(t, p, FailHost, RemoveFinalizer, Event)
		// Not while the member is Suspect: the cache may be behind.
		p = Decide(newInput(hysteresis.Suspect, hp, nil))
		wantActions(t, p)
		if p.RequeueAfter == 0 {
			t.Error("no requeue while Suspect")
		}
	})
	t.Run("a member pod leafsync did not create is left alone", func(t *testing.T) {
		hp := hostPod("h1")
		foreign := memberOf(hp, "x")
		foreign.Labels = map[string]string{"app": "web"}
		wantActions(t, Decide(newInput(hysteresis.Ready, hp, foreign)), Event)
	})
	t.Run("terminal host pod without member pod loses the finalizer", func(t *testing.T) {
		hp := withFinalizer(hostPod("h1"))
		hp.Status.Phase = "Failed"
		wantActions(t, Decide(newInput(hysteresis.Ready, hp, nil)), RemoveFinalizer)
	})
}

func TestForwardedDeletes(t *testing.T) {
	for _, cause := range []string{podmeta.CauseNone, podmeta.CauseEvictionAPI, podmeta.CausePreemption, "TerminationByKubelet"} {
		t.Run(causeText(cause), func(t *testing.T) {
			hp := withMemberUID(withFinalizer(deleted(hostPod("h1"), t0.Add(-time.Second), 30, cause)), "m1")
			mp := memberOf(hp, "m1")
			p := Decide(newInput(hysteresis.Ready, hp, mp))
			wantActions(t, p, DeleteMember)
			a, _ := p.Get(DeleteMember)
			if a.MemberUID != "m1" || a.Grace == nil || *a.Grace != 30 {
				t.Errorf("DeleteMember uid=%s grace=%v, want m1 and 30", a.MemberUID, a.Grace)
			}
			// Suspect: still forwarded (it may fail; retried).
			wantActions(t, Decide(newInput(hysteresis.Suspect, hp, mp)), DeleteMember)
			// Once the member pod is gone, the host pod is finished.
			wantActions(t, Decide(newInput(hysteresis.Ready, hp, nil)), FinishHost)
		})
	}
}

func TestStaleEviction(t *testing.T) {
	for _, cause := range []string{podmeta.CauseTaintManager, podmeta.CausePodGC} {
		hp := withMemberUID(withFinalizer(deleted(hostPod("h1"), t0.Add(-5*time.Second), 30, cause)), "m1")
		mp := memberOf(hp, "m1")
		t.Run(cause+"/DeferUntilReplaced", func(t *testing.T) {
			p := Decide(newInput(hysteresis.Ready, hp, mp))
			wantActions(t, p, Record, Event, FinishHost)
			r, _ := p.Get(Record)
			if r.Record.Kind != deletes.Deferred || r.Record.Cause != cause || r.Record.HostUID != "h1" ||
				r.Record.Owner != "StatefulSet/web" || !r.Record.Since.Equal(t0) || !r.Record.HostDeletedAt.Equal(t0.Add(-5*time.Second)) {
				t.Errorf("record = %+v", r.Record)
			}
			if f, _ := p.Get(FinishHost); !f.Persist {
				t.Error("FinishHost without Persist: the deferred delete could be lost")
			}
		})
		t.Run(cause+"/Retain", func(t *testing.T) {
			in := newInput(hysteresis.Ready, hp, mp)
			in.Policy = podmeta.Retain
			p := Decide(in)
			wantActions(t, p, Record, Event, MarkRetained, FinishHost)
			if r, _ := p.Get(Record); r.Record.Kind != deletes.Retained {
				t.Errorf("record kind %s", r.Record.Kind)
			}
		})
		t.Run(cause+"/Forward", func(t *testing.T) {
			in := newInput(hysteresis.Ready, hp, mp)
			in.Policy = podmeta.Forward
			wantActions(t, Decide(in), DeleteMember)
		})
		t.Run(cause+"/Suspect waits for a decision", func(t *testing.T) {
			p := Decide(newInput(hysteresis.Suspect, hp, mp))
			wantActions(t, p)
			if p.RequeueAfter == 0 {
				t.Error("no requeue")
			}
		})
	}
}

func TestOwedAndReaper(t *testing.T) {
	for _, cause := range []string{podmeta.CauseTaintManager, podmeta.CauseNone} {
		for _, s := range []hysteresis.State{hysteresis.NotReady, hysteresis.Recovering} {
			t.Run(causeText(cause)+"/"+s.String(), func(t *testing.T) {
				// Evicted 10s ago, 30s into an outage: reaping at
				// max(termination, outage) + reapAfter = t0+50s.
				hp := withMemberUID(withFinalizer(deleted(hostPod("h1"), t0.Add(-10*time.Second), 30, cause)), "m1")
				mp := memberOf(hp, "m1")
				in := newInput(s, hp, mp)
				in.State.OutageSince = t0.Add(-30 * time.Second)
				p := Decide(in)
				wantActions(t, p, Record, Event)
				r, _ := p.Get(Record)
				if r.Record.Kind != deletes.Owed || r.Record.Cause != cause || *r.Record.GracePeriodSeconds != 30 {
					t.Errorf("record = %+v", r.Record)
				}
				if p.RequeueAfter != 50*time.Second {
					t.Errorf("requeue %s, want 50s (reapAfter from the later of termination and outage)", p.RequeueAfter)
				}
				// Recorded already: nothing until reap time.
				in.Records = []deletes.PendingDelete{r.Record}
				wantActions(t, Decide(in))
				// Same without a member pod in the (untrusted) cache.
				in.Member = nil
				wantActions(t, Decide(in))
				in.Member = mp
				in.Now, in.HostNow = t0.Add(50*time.Second), t0.Add(50*time.Second)
				p = Decide(in)
				wantActions(t, p, FinishHost, Event)
				if f, _ := p.Get(FinishHost); !f.Persist {
					t.Error("reaped without waiting for the owed delete to be written")
				}
			})
		}
	}
	t.Run("reapWait counts from the later of termination and outage", func(t *testing.T) {
		hp := deleted(hostPod("h1"), t0, 30, podmeta.CauseTaintManager)
		st := hysteresis.Status{State: hysteresis.NotReady, OutageSince: t0.Add(-time.Hour)}
		if got := reapWait(hp, st, time.Minute, t0, t0); got != time.Minute {
			t.Errorf("reapWait = %s", got)
		}
		st.OutageSince = t0.Add(time.Hour)
		if got := reapWait(hp, st, time.Minute, t0, t0); got != time.Hour+time.Minute {
			t.Errorf("reapWait = %s", got)
		}
	})
}

func owed(cause string) deletes.PendingDelete {
	return deletes.PendingDelete{Kind: deletes.Owed, Namespace: "apps", Name: "web-0", HostUID: "h1", Cause: cause,
		Owner: "StatefulSet/web", Since: t0.Add(-time.Minute), HostDeletedAt: t0.Add(-time.Minute)}
}

func TestRecords(t *testing.T) {
	gone := hostPod("h1")
	mp := memberOf(gone, "m1")
	t.Run("owed deletes wait for a Ready member", func(t *testing.T) {
		for _, s := range []hysteresis.State{hysteresis.Suspect, hysteresis.NotReady, hysteresis.Recovering} {
			wantActions(t, Decide(newInput(s, nil, mp, owed(podmeta.CauseTaintManager))))
			wantActions(t, Decide(newInput(s, nil, nil, owed(podmeta.CauseNone))))
		}
	})
	t.Run("owed user delete is forwarded when the member is back", func(t *testing.T) {
		wantActions(t, Decide(newInput(hysteresis.Ready, nil, mp, owed(podmeta.CauseNone))), DeleteMember)
	})
	t.Run("owed eviction is stale when the member is back: deferred", func(t *testing.T) {
		p := Decide(newInput(hysteresis.Ready, nil, mp, owed(podmeta.CauseTaintManager)))
		wantActions(t, p, Record, Event)
		r, _ := p.Get(Record)
		if r.Record.Kind != deletes.Deferred || !r.Record.Since.Equal(t0) || !r.Record.HostDeletedAt.Equal(t0.Add(-time.Minute)) {
			t.Errorf("deferred record %+v: Since must restart now, HostDeletedAt must stay", r.Record)
		}
	})
	t.Run("owed eviction under Retain and Forward", func(t *testing.T) {
		in := newInput(hysteresis.Ready, nil, mp, owed(podmeta.CauseTaintManager))
		in.Policy = podmeta.Retain
		wantActions(t, Decide(in), Record, MarkRetained, Event)
		in.Policy = podmeta.Forward
		wantActions(t, Decide(in), DeleteMember)
	})
	t.Run("deferred: deleted once replaced or expired, not before", func(t *testing.T) {
		d := owed(podmeta.CauseTaintManager)
		d.Kind, d.Since = deletes.Deferred, t0.Add(-time.Minute)
		in := newInput(hysteresis.Ready, nil, mp, d)
		in.Replacements = &Replacements{}
		p := Decide(in)
		wantActions(t, p)
		if p.RequeueAfter != replacementPoll {
			t.Errorf("requeue %s, want %s", p.RequeueAfter, replacementPoll)
		}
		in.Replacements.Pods = []*corev1.Pod{ownedPod("web-0", "new0", "StatefulSet", "web", t0, true)}
		p = Decide(in)
		wantActions(t, p, DeleteMember)
		if a, _ := p.Get(DeleteMember); a.Reason != "DeferredDeleteReplaced" {
			t.Errorf("reason %s", a.Reason)
		}
		in.Replacements.Pods[0] = ownedPod("web-0", "new0", "StatefulSet", "web", t0, false)
		p = Decide(in)
		wantActions(t, p)
		in.Now = d.Since.Add(in.MaxDeferral)
		p = Decide(in)
		wantActions(t, p, DeleteMember)
		if a, _ := p.Get(DeleteMember); a.Reason != "DeferredDeleteExpired" {
			t.Errorf("reason %s", a.Reason)
		}
	})
	t.Run("a record whose member pod is gone or re-owned is dropped", func(t *testing.T) {
		wantActions(t, Decide(newInput(hysteresis.Ready, nil, nil, owed(podmeta.CauseTaintManager))), DropRecord)
		other := memberOf(hostPod("h9"), "m9")
		o9 := owed(podmeta.CauseTaintManager)
		o9.HostUID, o9.Kind, o9.Since = "h9", deletes.Deferred, t0
		p := Decide(newInput(hysteresis.Ready, nil, other, owed(podmeta.CauseTaintManager), o9))
		wantActions(t, p, DropRecord)
		if a, _ := p.Get(DropRecord); a.HostUID != "h1" {
			t.Errorf("dropped %s, want h1", a.HostUID)
		}
	})
}

func TestAdoption(t *testing.T) {
	old := hostPod("h1")
	mp := memberOf(old, "m1")
	recreated := hostPod("h2") // same name, new UID, same template
	t.Run("compatible: adopted, not restarted", func(t *testing.T) {
		for _, r := range []*deletes.PendingDelete{ptrTo(owed(podmeta.CauseTaintManager)), nil} {
			var recs []deletes.PendingDelete
			if r != nil {
				recs = append(recs, *r)
			}
			p := Decide(newInput(hysteresis.Ready, recreated, mp, recs...))
			want := []ActionType{AddFinalizer, Adopt, DropRecord, SetMemberUID, Event}
			if r == nil {
				want = []ActionType{AddFinalizer, Adopt, SetMemberUID, Event}
			}
			wantActions(t, p, want...)
			if a, _ := p.Get(Adopt); a.MemberUID != "m1" {
				t.Errorf("adopts %s", a.MemberUID)
			}
		}
	})
	t.Run("once adopted, a cache that still shows the old label changes nothing", func(t *testing.T) {
		h := withMemberUID(withFinalizer(hostPod("h2")), "m1")
		wantActions(t, Decide(newInput(hysteresis.Ready, h, mp)), SyncStatus)
	})
	t.Run("changed spec: the old member pod is deleted", func(t *testing.T) {
		changed := hostPod("h2")
		changed.Spec.Containers[0].Image = "registry.example/app:2"
		wantActions(t, Decide(newInput(hysteresis.Ready, changed, mp, owed(podmeta.CauseTaintManager))), DeleteMember)
	})
	t.Run("the previous pod was deleted on purpose: no adoption", func(t *testing.T) {
		wantActions(t, Decide(newInput(hysteresis.Ready, recreated, mp, owed(podmeta.CauseNone))), DeleteMember)
	})
	t.Run("policy Forward never adopts", func(t *testing.T) {
		in := newInput(hysteresis.Ready, recreated, mp, owed(podmeta.CauseTaintManager))
		in.Policy = podmeta.Forward
		wantActions(t, Decide(in), DeleteMember)
	})
	t.Run("not while the member is not Ready", func(t *testing.T) {
		wantActions(t, Decide(newInput(hysteresis.Suspect, recreated, mp, owed(podmeta.CauseTaintManager))))
		wantActions(t, Decide(newInput(hysteresis.Recovering, recreated, mp, owed(podmeta.CauseTaintManager))))
	})
}

func TestOrphans(t *testing.T) {
	mp := memberOf(hostPod("h1"), "m1")
	p := Decide(newInput(hysteresis.Ready, nil, mp))
	wantActions(t, p, Record, Event)
	r, _ := p.Get(Record)
	if r.Record.Kind != deletes.Deferred || r.Record.Cause != podmeta.CauseOrphan || r.Record.Owner != "StatefulSet/web" {
		t.Errorf("orphan record %+v", r.Record)
	}
	wantActions(t, Decide(newInput(hysteresis.Suspect, nil, mp)))
	in := newInput(hysteresis.Ready, nil, mp)
	in.Policy = podmeta.Retain
	wantActions(t, Decide(in), Record, MarkRetained, Event)
}

func ptrTo[T any](v T) *T { return &v }

func daemonSetPod(hp *corev1.Pod) *corev1.Pod {
	hp.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "kube-proxy", UID: "ds1", Controller: ptr.To(true)}}
	return hp
}

// A tolerate-all DaemonSet lands on every leaf; its pods (CNI agents,
// kube-proxy, log shippers: hostNetwork, privileged, the host's Secrets)
// are never run in a member and never get leafsync's finalizer.
func TestDaemonSetPodsAreNotSynced(t *testing.T) {
	for _, s := range []hysteresis.State{hysteresis.Ready, hysteresis.Suspect} {
		p := Decide(newInput(s, daemonSetPod(hostPod("h1")), nil))
		wantActions(t, p, Event)
		if a, _ := p.Get(Event); a.Reason != "NotSyncedDaemonSetPod" || !a.Warning {
			t.Errorf("event %+v", a)
		}
	}
	// One synced before this rule: its member pod goes, its finalizer too.
	hp := withMemberUID(withFinalizer(daemonSetPod(hostPod("h1"))), "m1")
	wantActions(t, Decide(newInput(hysteresis.Ready, hp, memberOf(hp, "m1"))), DeleteMember, RemoveFinalizer, Event)
	// Deleted in the host (the DaemonSet went): finished, nothing owed.
	wantActions(t, Decide(newInput(hysteresis.Ready, deleted(daemonSetPod(hostPod("h2")), t0, 30, podmeta.CauseNone), nil)), FinishHost)
}

// A taint-manager delete is stale only if what caused it has passed. A
// NoExecute taint on the leaf that node lifecycle did not set (a user's
// maintenance taint, node.kubernetes.io/out-of-service) still holds: the
// delete is the user's intent and is forwarded.
func TestTaintManagerDeleteClassifiedByTaintsNow(t *testing.T) {
	hp := deleted(withMemberUID(withFinalizer(hostPod("h1")), "m1"), t0, 30, podmeta.CauseTaintManager)
	for _, taint := range []corev1.Taint{
		{Key: "maintenance", Value: "true", Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute},
	} {
		in := newInput(hysteresis.Ready, hp, memberOf(hp, "m1"))
		in.LeafTaints = []corev1.Taint{{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}, taint}
		p := Decide(in)
		wantActions(t, p, DeleteMember)
		if a, _ := p.Get(DeleteMember); a.Reason != "DeleteForwarded" {
			t.Errorf("taint %s: %+v", taint.Key, a)
		}
	}
	// Only node lifecycle's taints (a leftover of the outage, or none): stale.
	for _, taints := range [][]corev1.Taint{nil, {{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}, {Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute}}} {
		in := newInput(hysteresis.Ready, hp, memberOf(hp, "m1"))
		in.LeafTaints = taints
		wantActions(t, Decide(in), Record, Event, FinishHost)
	}
	// A user taint the pod tolerates did not evict it.
	tol := deleted(withMemberUID(withFinalizer(hostPod("h2")), "m2"), t0, 30, podmeta.CauseTaintManager)
	tol.Spec.Tolerations = append(tol.Spec.Tolerations, corev1.Toleration{Key: "maintenance", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute})
	in := newInput(hysteresis.Ready, tol, memberOf(tol, "m2"))
	in.LeafTaints = []corev1.Taint{{Key: "maintenance", Value: "true", Effect: corev1.TaintEffectNoExecute}}
	wantActions(t, Decide(in), Record, Event, FinishHost)
}

// A Job's pod under a stale eviction is not kept: the Job controller has
// already made its replacement, so keeping it would run the work twice and
// then kill it mid-run. The delete is forwarded at once, whatever the
// policy; the table is in docs/pod-sync.md.
func TestStaleEvictionOfAJobPodIsForwarded(t *testing.T) {
	for _, pol := range []podmeta.Policy{podmeta.DeferUntilReplaced, podmeta.Retain} {
		hp := deleted(withMemberUID(withFinalizer(hostPod("h1")), "m1"), t0, 30, podmeta.CauseTaintManager)
		hp.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "report", UID: "j1", Controller: ptr.To(true)}}
		in := newInput(hysteresis.Ready, hp, memberOf(hp, "m1"))
		in.Policy = pol
		p := Decide(in)
		wantActions(t, p, DeleteMember)
		if a, _ := p.Get(DeleteMember); a.Reason != "StaleEvictionForwarded" || !strings.Contains(a.Message, "Job") {
			t.Errorf("%s: %+v", pol, a)
		}
		// An owed delete of a Job pod, once the member is back: forwarded too.
		r := deletes.PendingDelete{Kind: deletes.Owed, Namespace: hp.Namespace, Name: hp.Name, HostUID: "h1", Cause: podmeta.CauseTaintManager, Owner: "Job/report", Since: t0}
		in = newInput(hysteresis.Ready, nil, memberOf(hp, "m1"), r)
		in.Policy = pol
		wantActions(t, Decide(in), DeleteMember)
	}
}

// What the member's owner has not agreed to is not run: a member
// ServiceAccount the registration does not list, what fails the Pod
// Security level (baseline by default), a PVC or resource claim, a kube-*
// namespace. The pod gets a Warning Event; nothing is created.
func TestPodsTheMemberDidNotAllow(t *testing.T) {
	withSA := func(ns, sa string) *corev1.Pod {
		hp := hostPod("h1")
		hp.Namespace = ns
		hp.Annotations = map[string]string{podmeta.AnnotationMemberServiceAccount: sa}
		return hp
	}
	privileged := func(mutate func(*corev1.Pod)) *corev1.Pod {
		hp := hostPod("h1")
		mutate(hp)
		return hp
	}
	refused := map[string]*corev1.Pod{
		"service account": withSA("apps", "deployer"),
		"privileged": privileged(func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		}),
		"hostNetwork": privileged(func(p *corev1.Pod) { p.Spec.HostNetwork = true }),
		"hostPID":     privileged(func(p *corev1.Pod) { p.Spec.HostPID = true }),
		"hostPath": privileged(func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
		}),
		"privileged init container": privileged(func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "init", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}}
		}),
	}
	for name, hp := range refused {
		p := Decide(newInput(hysteresis.Ready, hp, nil))
		wantActions(t, p, Event)
		if a, _ := p.Get(Event); !a.Warning || !strings.HasPrefix(a.Reason, "NotSynced") || !strings.Contains(a.Message, "leafsync.io/") {
			t.Errorf("%s: event %+v does not say which annotation allows it", name, a)
		}
	}
	// Allowed by the registration: synced.
	allowed := podmeta.Admission{ServiceAccounts: []string{"apps/deployer"}, PodSecurity: psapi.LevelPrivileged}
	for _, hp := range refused {
		in := newInput(hysteresis.Ready, hp, nil)
		in.Admission = allowed
		wantActions(t, Decide(in), AddFinalizer, CreateMember)
	}
	// "namespace/name" allows that one only; "*" any ServiceAccount
	// outside kube-system.
	in := newInput(hysteresis.Ready, withSA("ops", "deployer"), nil)
	in.Admission = podmeta.Admission{ServiceAccounts: []string{"apps/deployer"}}
	wantActions(t, Decide(in), Event)
	in = newInput(hysteresis.Ready, withSA("apps", "deployer"), nil)
	in.Admission = podmeta.Admission{ServiceAccounts: []string{"*"}}
	wantActions(t, Decide(in), AddFinalizer, CreateMember)
}

// kube-* namespaces never, whatever the registration says; PVCs and
// resource claims are refused (the member's object of that name would be
// used); generic ephemeral volumes are the pod's own and run.
func TestNamespacesAndClaimsNotRun(t *testing.T) {
	everything := podmeta.Admission{ServiceAccounts: []string{"*"}, PodSecurity: psapi.LevelPrivileged, Namespaces: []string{"apps", "default"}}
	for _, ns := range []string{"kube-system", "kube-public", "kube-node-lease", "kube-anything"} {
		hp := hostPod("h1")
		hp.Namespace = ns
		in := newInput(hysteresis.Ready, hp, nil)
		in.Admission = everything
		p := Decide(in)
		wantActions(t, p, Event)
		if a, _ := p.Get(Event); a.Reason != "NotSyncedNamespace" || !a.Warning || !strings.Contains(a.Message, ns) {
			t.Errorf("%s: %+v", ns, a)
		}
	}
	pvc := hostPod("h1")
	pvc.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
	claim := hostPod("h1")
	claim.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("gpu-0")}}
	for name, hp := range map[string]*corev1.Pod{"pvc": pvc, "resource claim": claim} {
		in := newInput(hysteresis.Ready, hp, nil)
		in.Admission = everything
		p := Decide(in)
		wantActions(t, p, Event)
		if a, _ := p.Get(Event); a.Reason != "NotSyncedVolumeClaim" || !strings.Contains(a.Message, "not supported yet") {
			t.Errorf("%s: %+v", name, a)
		}
	}
	eph := hostPod("h1")
	eph.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
		VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}}},
	}}}}
	wantActions(t, Decide(newInput(hysteresis.Ready, eph, nil)), AddFinalizer, CreateMember)
}

func TestParseAdmission(t *testing.T) {
	a, err := podmeta.ParseAdmission(map[string]string{
		podmeta.AnnotationMemberServiceAccounts: " apps/deployer, ops/backup ,*", podmeta.AnnotationAllowPrivilegedPods: "true",
		podmeta.AnnotationMemberNamespaces: "team-x, default",
	})
	if err != nil || strings.Join(a.ServiceAccounts, ",") != "apps/deployer,ops/backup,*" || a.PodSecurity != psapi.LevelPrivileged ||
		strings.Join(a.Namespaces, ",") != "team-x,default" {
		t.Fatalf("%+v %v", a, err)
	}
	// pod-security, when set, wins over the older allow-privileged-pods.
	if a, _ := podmeta.ParseAdmission(map[string]string{podmeta.AnnotationAllowPrivilegedPods: "true", podmeta.AnnotationPodSecurity: "restricted"}); a.PodSecurity != psapi.LevelRestricted {
		t.Errorf("pod-security restricted with allow-privileged-pods: %q", a.PodSecurity)
	}
	if a, _ := podmeta.ParseAdmission(nil); a.PodSecurity != "" || a.Level() != psapi.LevelBaseline {
		t.Errorf("no annotation: %q (level %q), want the fleet's (baseline)", a.PodSecurity, a.Level())
	}
	for _, bad := range []map[string]string{
		{podmeta.AnnotationAllowPrivilegedPods: "yes please"},
		{podmeta.AnnotationPodSecurity: "Baseline"},
		{podmeta.AnnotationPodSecurity: "none"},
		{podmeta.AnnotationMemberServiceAccounts: "a/b/c"},
		{podmeta.AnnotationMemberServiceAccounts: "deployer"},
		{podmeta.AnnotationMemberServiceAccounts: "apps/Not_A_Name"},
		{podmeta.AnnotationMemberNamespaces: "kube-system"},
		{podmeta.AnnotationMemberNamespaces: "apps, kube-public"},
		{podmeta.AnnotationMemberNamespaces: "Team_X"},
	} {
		if _, err := podmeta.ParseAdmission(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
