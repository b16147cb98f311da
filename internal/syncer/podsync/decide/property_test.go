package decide

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"pgregory.net/rapid"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/syncer/podsync/deletes"
	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
)

// genInput draws any situation decide can meet for one pod name.
func genInput(t *rapid.T) Input {
	state := hysteresis.State(rapid.IntRange(0, hysteresis.NumStates-1).Draw(t, "state"))
	policy := rapid.SampledFrom(podmeta.Policies).Draw(t, "policy")
	causes := []string{podmeta.CauseNone, podmeta.CauseEvictionAPI, podmeta.CausePreemption, podmeta.CauseTaintManager, podmeta.CausePodGC}

	var hp *corev1.Pod
	switch rapid.IntRange(0, 2).Draw(t, "host") {
	case 1:
		hp = hostPod("h2")
	case 2:
		hp = deleted(hostPod("h2"), t0.Add(-time.Duration(rapid.IntRange(0, 300).Draw(t, "termAgo"))*time.Second),
			int64(rapid.IntRange(0, 30).Draw(t, "grace")), rapid.SampledFrom(causes).Draw(t, "cause"))
	}
	if hp != nil {
		if rapid.Bool().Draw(t, "finalizer") {
			withFinalizer(hp)
		}
		// The member UID the host pod recorded: its own member pod's
		// ("m-h2"), an adopted one's ("m-h1"), or none yet.
		switch rapid.IntRange(0, 2).Draw(t, "memberUIDAnn") {
		case 1:
			withMemberUID(hp, "m-h2")
		case 2:
			withMemberUID(hp, "m-h1")
		}
		if rapid.IntRange(0, 5).Draw(t, "terminal") == 0 {
			hp.Status.Phase = corev1.PodFailed
		}
	}
	var mp *corev1.Pod
	memberHost := ""
	switch rapid.IntRange(0, 3).Draw(t, "member") {
	case 1: // for this host pod
		memberHost = "h2"
	case 2: // for a previous host pod of this name
		memberHost = "h1"
	case 3: // not leafsync's
		mp = memberOf(hostPod("x"), "foreign")
		mp.Labels = map[string]string{"app": "web"}
	}
	if memberHost != "" {
		src := hostPod(memberHost)
		if rapid.IntRange(0, 3).Draw(t, "incompatible") == 0 {
			src.Spec.Containers[0].Image = "registry.example/app:old"
		}
		mp = memberOf(src, "m-"+memberHost)
		if rapid.IntRange(0, 4).Draw(t, "memberTerminating") == 0 {
			mp.DeletionTimestamp = hostPod("y").CreationTimestamp.DeepCopy()
		}
	}
	var recs []deletes.PendingDelete
	for _, uid := range []string{"h1", "h2"} {
		if rapid.Bool().Draw(t, "record-"+uid) {
			recs = append(recs, deletes.PendingDelete{
				Kind:      rapid.SampledFrom([]deletes.DeleteKind{deletes.Owed, deletes.Deferred, deletes.Retained}).Draw(t, "kind-"+uid),
				Namespace: "apps", Name: "web-0", HostUID: uid, Owner: "StatefulSet/web",
				Cause: rapid.SampledFrom(append(causes, podmeta.CauseOrphan)).Draw(t, "rcause-"+uid),
				Since: t0.Add(-time.Duration(rapid.IntRange(0, 1200).Draw(t, "since-"+uid)) * time.Second),
			})
		}
	}
	in := newInput(state, hp, mp, recs...)
	in.Policy = policy
	if rapid.Bool().Draw(t, "replacementsKnown") {
		in.Replacements = &Replacements{}
		if rapid.Bool().Draw(t, "replaced") {
			in.Replacements.Pods = []*corev1.Pod{ownedPod("web-0", "new0", "StatefulSet", "web", t0, true)}
		}
	}
	for _, r := range recs {
		if rapid.Bool().Draw(t, "moved-"+r.HostUID) {
			if in.IdentityMoved == nil {
				in.IdentityMoved = map[string]string{}
			}
			in.IdentityMoved[r.HostUID] = "leaf-member-b"
		}
	}
	if rapid.Bool().Draw(t, "otherCopy") {
		in.OtherCopies = []OtherCopy{{Cluster: "member-b", HostUID: "h0"}}
	}
	return in
}

// TestDecideGuard checks the guard's invariants over generated situations:
//
//  1. Nothing is written to a member confirmed down (NotReady or
//     Recovering): no create, delete, adoption or relabel.
//  2. Outside policy Forward, a member pod is deleted for a stale eviction
//     only when its deferral is over (replacement Ready or maxDeferral
//     expired), when a new host pod of the same name needs the name and
//     cannot adopt it, or when the pod has a stable identity whose new host
//     pod is bound to another node (never under Retain). An eviction is
//     never forwarded while the member is merely Suspect.
//  3. A host pod with a member pod is never finished without either the
//     member pod being gone or a pending delete recorded, which must then
//     be persisted first.
//  4. The same input always gives the same plan.
//  5. A host pod with a stable identity is never created in its member
//     while another member holds a copy of its name.
func TestDecideGuard(t *testing.T) {
	// The situations that matter are a small share of all drawn; run
	// more than rapid's default 100 (about 0.1s).
	for i := 0; i < 30; i++ {
		rapid.Check(t, guardProperty)
		if t.Failed() {
			return
		}
	}
}

func guardProperty(t *rapid.T) {
	{
		in := genInput(t)
		p := Decide(in)
		if q := Decide(in); fmt.Sprint(p) != fmt.Sprint(q) {
			t.Fatalf("not deterministic: %v vs %v", p, q)
		}
		st := in.State.State
		down := st == hysteresis.NotReady || st == hysteresis.Recovering
		rel := relate(in)
		recorded := map[string]deletes.PendingDelete{}
		for _, r := range in.Records {
			recorded[r.HostUID] = r
		}
		for _, a := range p.Actions {
			if a.Type == Record {
				recorded[a.Record.HostUID] = a.Record
			}
		}
		for _, a := range p.Actions {
			switch a.Type {
			case CreateMember, DeleteMember, Adopt, MarkRetained:
				if down {
					t.Fatalf("%s while the member is %s: %+v", a.Type, st, p.Actions)
				}
			}
			if a.Type == DropRecord && a.Reason == "MemberPodGone" && a.ConfirmNoPodFor != a.HostUID {
				t.Fatalf("record dropped on the member cache's word that its member pod is gone: %+v", p.Actions)
			}
			if a.Type == FailHost && a.ConfirmGone == "" {
				t.Fatalf("host pod failed on the member cache's word alone: %+v", p.Actions)
			}
			if _, owed := recorded[hostUID(in)]; a.Type == FinishHost && rel == relNone && !owed &&
				in.Host.Annotations[podmeta.AnnotationMemberUID] != "" && a.ConfirmGone == "" {
				t.Fatalf("host pod finished on the member cache's word that its member pod is gone: %+v", p.Actions)
			}
			if a.Type == CreateMember && len(in.OtherCopies) > 0 && StableIdentity(podmeta.OwnerOf(in.Host), &in.Host.Spec) {
				t.Fatalf("created while member %s holds a copy of the name: %+v", in.OtherCopies[0].Cluster, p.Actions)
			}
			if a.Type == DeleteMember && in.Policy != podmeta.Forward {
				checkDelete(t, in, rel, a)
			}
			if a.Type == FinishHost && rel == relSame {
				r, ok := recorded[string(in.Host.UID)]
				if !ok {
					t.Fatalf("host pod finished while its member pod runs, with no pending delete: %+v", p.Actions)
				}
				if !a.Persist {
					t.Fatalf("host pod finished before its pending delete (%s) is persisted", r.Kind)
				}
			}
		}
	}
}

func hostUID(in Input) string {
	if in.Host == nil {
		return ""
	}
	return string(in.Host.UID)
}

func checkDelete(t *rapid.T, in Input, rel relation, a Action) {
	mp := in.Member
	owner := mp.Labels[podmeta.LabelHostUID]
	if in.Host != nil && (owner == string(in.Host.UID) || in.Host.Annotations[podmeta.AnnotationMemberUID] == string(mp.UID)) {
		// This host pod's own member pod: only for a delete someone asked for.
		if c := podmeta.CauseOf(in.Host); podmeta.IsEvictionCause(c) || in.Host.DeletionTimestamp == nil {
			t.Fatalf("deleted the member pod of host pod being evicted (%q) under %s: %s", c, in.Policy, a.Reason)
		}
		return
	}
	if in.State.State != hysteresis.Ready {
		t.Fatalf("deleted a previous pod's member pod while %s: %s", in.State.State, a.Reason)
	}
	r := recordFor(in.Records, owner)
	if in.Host != nil && rel == relOther {
		// The name is needed: allowed unless the pod could be adopted.
		if (r == nil || podmeta.IsEvictionCause(r.Cause)) && mp.Annotations[podmeta.AnnotationSpecHash] == in.DesiredHash && !podmeta.IsTerminal(mp) {
			t.Fatalf("deleted an adoptable member pod: %s", a.Reason)
		}
		return
	}
	if r == nil {
		t.Fatalf("deleted an orphan without a record (%s)", a.Reason)
	}
	if !podmeta.IsEvictionCause(r.Cause) {
		return // an owed user delete
	}
	if in.Policy != podmeta.Retain && movedAway(in, *r, mp) {
		return // a stable identity's old copy goes before its replacement starts
	}
	if r.Kind != deletes.Deferred {
		t.Fatalf("deleted a %s stale eviction under %s: %s", r.Kind, in.Policy, a.Reason)
	}
	if _, replaced := in.replacementOf(*r); !replaced && in.Now.Before(r.Since.Add(in.MaxDeferral)) {
		t.Fatalf("deleted a deferred member pod before its replacement is Ready or maxDeferral: %s", a.Reason)
	}
}
