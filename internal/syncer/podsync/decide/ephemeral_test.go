package decide

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/utils/ptr"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
	"github.com/leafsync/leafsync/internal/syncer/podsync/translate"
)

func debugContainer(name string) corev1.EphemeralContainer {
	return corev1.EphemeralContainer{TargetContainerName: "app", EphemeralContainerCommon: corev1.EphemeralContainerCommon{
		Name: name, Image: "busybox", Stdin: true, TTY: true,
	}}
}

// synced is a running host pod with its member pod, as decideLive's
// relSame branch sees them.
func synced() (hp, mp *corev1.Pod) {
	hp = withMemberUID(withFinalizer(hostPod("h1")), "m1")
	return hp, memberOf(hp, "m1")
}

func TestEphemeralAdded(t *testing.T) {
	hp, mp := synced()
	if p := Decide(newInput(hysteresis.Ready, hp, mp)); p.Has(UpdateEphemeral) {
		t.Fatalf("no ephemeral containers: %v", types_(p))
	}
	hp.Spec.EphemeralContainers = []corev1.EphemeralContainer{debugContainer("debugger")}
	p := Decide(newInput(hysteresis.Ready, hp, mp))
	a, ok := p.Get(UpdateEphemeral)
	if !ok {
		t.Fatalf("host pod has ephemeral container debugger, the member pod not: %v", types_(p))
	}
	if a.MemberUID != "m1" || !reflect.DeepEqual(a.Ephemeral, translate.MemberEphemeralContainers(hp)) {
		t.Errorf("UpdateEphemeral %s %+v", a.MemberUID, a.Ephemeral)
	}
	if !p.Has(SyncStatus) {
		t.Errorf("status still mirrored: %v", types_(p))
	}

	mp.Spec.EphemeralContainers = translate.MemberEphemeralContainers(hp)
	if p := Decide(newInput(hysteresis.Ready, hp, mp)); p.Has(UpdateEphemeral) {
		t.Errorf("already added: %v", types_(p))
	}
	// Only the missing ones, never one the member pod has (they cannot change).
	hp.Spec.EphemeralContainers = append(hp.Spec.EphemeralContainers, debugContainer("debugger2"))
	a, _ = Decide(newInput(hysteresis.Ready, hp, mp)).Get(UpdateEphemeral)
	if len(a.Ephemeral) != 1 || a.Ephemeral[0].Name != "debugger2" {
		t.Errorf("sent %+v, want only debugger2", a.Ephemeral)
	}
}

func TestEphemeralNotToAGoingMemberPod(t *testing.T) {
	hp, mp := synced()
	hp.Spec.EphemeralContainers = []corev1.EphemeralContainer{debugContainer("debugger")}
	mp.Status.Phase = corev1.PodSucceeded
	if p := Decide(newInput(hysteresis.Ready, hp, mp)); p.Has(UpdateEphemeral) {
		t.Errorf("member pod finished: %v", types_(p))
	}
}

// The member owner's boundary covers ephemeral containers: a privileged
// one on a baseline registration is never sent, the pod keeps running, and
// the host pod says why; an allowed one beside it still goes.
func TestEphemeralPodSecurity(t *testing.T) {
	hp, mp := synced()
	bad := debugContainer("root-shell")
	bad.SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	hp.Spec.EphemeralContainers = []corev1.EphemeralContainer{bad, debugContainer("debugger")}
	in := newInput(hysteresis.Ready, hp, mp)
	in.Admission = podmeta.Admission{PodSecurity: psapi.LevelBaseline}
	p := Decide(in)
	if p.Has(DeleteMember) || p.Has(RemoveFinalizer) {
		t.Fatalf("a refused ephemeral container must not stop the pod: %v", types_(p))
	}
	a, _ := p.Get(UpdateEphemeral)
	if len(a.Ephemeral) != 1 || a.Ephemeral[0].Name != "debugger" {
		t.Errorf("sent %+v, want only debugger", a.Ephemeral)
	}
	ev, ok := p.Get(Event)
	if !ok || !ev.Warning || ev.Reason != "EphemeralContainerNotSynced" ||
		!strings.Contains(ev.Message, `violates PodSecurity "baseline:latest": privileged (container "root-shell"`) ||
		!strings.Contains(ev.Message, podmeta.AnnotationPodSecurity) {
		t.Errorf("event %+v", ev)
	}
	if p.RequeueAfter != 0 {
		t.Errorf("a refusal is looked at again on change only, requeue %s", p.RequeueAfter)
	}

	in.Admission = podmeta.Admission{PodSecurity: psapi.LevelPrivileged}
	a, _ = Decide(in).Get(UpdateEphemeral)
	if len(a.Ephemeral) != 2 {
		t.Errorf("at privileged: sent %+v", a.Ephemeral)
	}
}
