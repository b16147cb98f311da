package podsync

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/leafsync/leafsync/syncer/registration"
)

// Registration Secret annotations: what a member's owner agrees to run.
// Both default to nothing.
const (
	// AnnotationMemberServiceAccounts lists the member ServiceAccounts that
	// host pods may run as (leafsync.io/member-service-account on the pod):
	// "namespace/name" entries, comma-separated; "*" allows any
	// ServiceAccount outside kube-system.
	AnnotationMemberServiceAccounts = registration.AnnotationMemberServiceAccounts
	// AnnotationAllowPrivilegedPods "true" lets privileged containers, host
	// namespaces (network, PID, IPC) and hostPath volumes run in the member.
	AnnotationAllowPrivilegedPods = registration.AnnotationAllowPrivilegedPods
)

// Admission is what a member's owner agreed to run, from its registration.
type Admission struct {
	// ServiceAccounts host pods may run as in the member ("namespace/name",
	// or "*": any outside kube-system).
	ServiceAccounts []string
	// Privileged allows privileged containers, host namespaces and hostPath
	// volumes.
	Privileged bool
}

// ParseAdmission reads a registration's annotations; an error names the
// annotation and what it accepts.
func ParseAdmission(annotations map[string]string) (Admission, error) {
	var a Admission
	if v, ok := annotations[AnnotationAllowPrivilegedPods]; ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return a, fmt.Errorf("%s: %q is not true or false", AnnotationAllowPrivilegedPods, v)
		}
		a.Privileged = b
	}
	for _, e := range strings.Split(annotations[AnnotationMemberServiceAccounts], ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if e != "*" {
			ns, name, ok := strings.Cut(e, "/")
			if !ok || strings.Contains(name, "/") || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
				return a, fmt.Errorf("%s: %q is not namespace/name (or *)", AnnotationMemberServiceAccounts, e)
			}
		}
		a.ServiceAccounts = append(a.ServiceAccounts, e)
	}
	return a, nil
}

func (a Admission) allowsServiceAccount(ns, name string) bool {
	for _, e := range a.ServiceAccounts {
		if e == ns+"/"+name || (e == "*" && ns != "kube-system") {
			return true
		}
	}
	return false
}

// privilegedSpec names what in a pod spec needs AnnotationAllowPrivilegedPods
// ("" if nothing).
func privilegedSpec(s *corev1.PodSpec) string {
	switch {
	case s.HostNetwork:
		return "hostNetwork"
	case s.HostPID:
		return "hostPID"
	case s.HostIPC:
		return "hostIPC"
	}
	for _, v := range s.Volumes {
		if v.HostPath != nil {
			return "hostPath volume " + v.Name
		}
	}
	for _, cs := range [][]corev1.Container{s.InitContainers, s.Containers} {
		for _, c := range cs {
			if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
				return "privileged container " + c.Name
			}
		}
	}
	return ""
}

// notAdmitted says why the member's owner has not agreed to run hp ("" if
// it has).
func (a Admission) notAdmitted(hp *corev1.Pod, cluster string) (reason, msg string) {
	if sa := hp.Annotations[AnnotationMemberServiceAccount]; sa != "" && !a.allowsServiceAccount(hp.Namespace, sa) {
		return "NotSyncedServiceAccount", fmt.Sprintf(
			"the pod asks to run as ServiceAccount %s/%s in member %s, which its registration does not allow; the member's owner can list it in the Secret's annotation %s",
			hp.Namespace, sa, cluster, AnnotationMemberServiceAccounts)
	}
	if what := privilegedSpec(&hp.Spec); what != "" && !a.Privileged {
		return "NotSyncedPrivilegedPod", fmt.Sprintf(
			"the pod has a %s, which member %s's registration does not allow; the member's owner can set %s=true on the Secret",
			what, cluster, AnnotationAllowPrivilegedPods)
	}
	return "", ""
}
