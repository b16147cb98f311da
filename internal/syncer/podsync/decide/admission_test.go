package decide

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/utils/ptr"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
)

// baselineViolations are host pods, one per check the upstream library
// makes at baseline, with the reason it gives.
func baselineViolations() map[string]struct {
	pod    *corev1.Pod
	reason string
} {
	pod := func(mutate func(*corev1.Pod)) *corev1.Pod {
		hp := hostPod("h1")
		mutate(hp)
		return hp
	}
	sc := func(p *corev1.Pod) *corev1.SecurityContext {
		if p.Spec.Containers[0].SecurityContext == nil {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{}
		}
		return p.Spec.Containers[0].SecurityContext
	}
	type v = struct {
		pod    *corev1.Pod
		reason string
	}
	return map[string]v{
		"capabilities add SYS_ADMIN": {pod(func(p *corev1.Pod) {
			sc(p).Capabilities = &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}
		}), "non-default capabilities"},
		"hostPort": {pod(func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 80}}
		}), "hostPort"},
		"seccomp Unconfined": {pod(func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}
		}), "seccompProfile"},
		"AppArmor Unconfined": {pod(func(p *corev1.Pod) {
			sc(p).AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
		}), "forbidden AppArmor profile"},
		"AppArmor unconfined annotation": {pod(func(p *corev1.Pod) {
			p.Annotations = map[string]string{corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix + "app": "unconfined"}
		}), "forbidden AppArmor profile"},
		"unsafe sysctl": {pod(func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "kernel.msgmax", Value: "65536"}}}
		}), "forbidden sysctls"},
		"hostPath": {pod(func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
		}), "hostPath volumes"},
		"hostNetwork": {pod(func(p *corev1.Pod) { p.Spec.HostNetwork = true }), "host namespaces"},
		"hostPID":     {pod(func(p *corev1.Pod) { p.Spec.HostPID = true }), "host namespaces"},
		"hostIPC":     {pod(func(p *corev1.Pod) { p.Spec.HostIPC = true }), "host namespaces"},
		"privileged": {pod(func(p *corev1.Pod) {
			sc(p).Privileged = ptr.To(true)
		}), "privileged"},
		"privileged init container": {pod(func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "registry.example/init:1", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}}
		}), "privileged"},
		"procMount Unmasked (host user namespace)": {pod(func(p *corev1.Pod) {
			sc(p).ProcMount = ptr.To(corev1.UnmaskedProcMount)
		}), "procMount"},
		"windows hostProcess": {pod(func(p *corev1.Pod) {
			sc(p).WindowsOptions = &corev1.WindowsSecurityContextOptions{HostProcess: ptr.To(true)}
		}), "hostProcess"},
		"SELinux type": {pod(func(p *corev1.Pod) {
			sc(p).SELinuxOptions = &corev1.SELinuxOptions{Type: "spc_t"}
		}), "seLinuxOptions"},
		"probe host": {pod(func(p *corev1.Pod) {
			p.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
				HTTPGet: &corev1.HTTPGetAction{Host: "169.254.169.254", Port: intstr.FromInt32(80)},
			}}
		}), "probe or lifecycle host"},
	}
}

// Each baseline check of the upstream Pod Security library refuses its pod
// at baseline, with the library's words in the Event; at privileged every
// one is created.
func TestPodSecurityBaseline(t *testing.T) {
	for name, c := range baselineViolations() {
		in := newInput(hysteresis.Ready, c.pod, nil)
		in.Admission = podmeta.Admission{PodSecurity: psapi.LevelBaseline}
		p := Decide(in)
		wantActions(t, p, Event)
		a, _ := p.Get(Event)
		if a.Reason != "NotSyncedPodSecurity" || !a.Warning || !strings.Contains(a.Message, `violates PodSecurity "baseline:latest": `+c.reason) ||
			!strings.Contains(a.Message, podmeta.AnnotationPodSecurity) {
			t.Errorf("%s: event %s %q, want the library's %q", name, a.Reason, a.Message, c.reason)
		}
		in.Admission = podmeta.Admission{PodSecurity: psapi.LevelPrivileged}
		if p := Decide(in); !p.Has(CreateMember) {
			t.Errorf("%s at privileged: %v", name, types_(p))
		}
	}
}

// What the library allows is allowed: a plain pod at baseline, procMount
// Unmasked in a user namespace (v1.35+). Restricted asks for more.
func TestPodSecurityAllowed(t *testing.T) {
	plain := hostPod("h1")
	userns := hostPod("h1")
	userns.Spec.HostUsers = ptr.To(false)
	userns.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{ProcMount: ptr.To(corev1.UnmaskedProcMount)}
	for name, hp := range map[string]*corev1.Pod{"plain": plain, "procMount Unmasked, hostUsers false": userns} {
		if v := podSecurityViolations(psapi.LevelBaseline, hp); v != "" {
			t.Errorf("%s refused at baseline: %s", name, v)
		}
	}
	if v := podSecurityViolations(psapi.LevelRestricted, plain); !strings.Contains(v, "allowPrivilegeEscalation != false") || !strings.Contains(v, "runAsNonRoot != true") {
		t.Errorf("a plain pod at restricted: %q", v)
	}
	restricted := hostPod("h1")
	restricted.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	restricted.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	in := newInput(hysteresis.Ready, restricted, nil)
	in.Admission = podmeta.Admission{PodSecurity: psapi.LevelRestricted}
	wantActions(t, Decide(in), AddFinalizer, CreateMember)
}
