package podmeta

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	psapi "k8s.io/pod-security-admission/api"

	"github.com/leafsync/leafsync/internal/syncer/registration"
)

// Registration Secret annotations: what a member's owner agrees to run.
const (
	// AnnotationMemberServiceAccounts lists the member ServiceAccounts that
	// host pods may run as (leafsync.io/member-service-account on the pod):
	// "namespace/name" entries, comma-separated; "*" allows any
	// ServiceAccount outside kube-system.
	AnnotationMemberServiceAccounts = registration.AnnotationMemberServiceAccounts
	// AnnotationPodSecurity is the Pod Security level (privileged,
	// baseline, restricted) member pods are held to; default the fleet's
	// podSync.memberPodSecurity.
	AnnotationPodSecurity = registration.AnnotationPodSecurity
	// AnnotationAllowPrivilegedPods "true" is the older spelling of
	// AnnotationPodSecurity=privileged (read only when that is absent).
	AnnotationAllowPrivilegedPods = registration.AnnotationAllowPrivilegedPods
	// AnnotationMemberNamespaces lists member namespaces leafsync did not
	// create that host pods may run in (comma-separated; never kube-*).
	AnnotationMemberNamespaces = registration.AnnotationMemberNamespaces
)

// Admission is what a member's owner agreed to run, from its registration.
type Admission struct {
	// ServiceAccounts host pods may run as in the member ("namespace/name",
	// or "*": any outside kube-system).
	ServiceAccounts []string
	// PodSecurity is the level member pods are evaluated at ("": the
	// fleet's default, filled in by the Controller; baseline if none).
	PodSecurity psapi.Level
	// Namespaces are member namespaces leafsync did not create that host
	// pods may run in. Those it created for this member are always fine.
	Namespaces []string
	// ClaimProvisioned reports whether host claim namespace/name is one
	// leafsync provisioned into this member (internal/syncer/volumes): a
	// pod may use only such claims, never the member's own (nil: none is).
	ClaimProvisioned func(namespace, name string) bool
}

// ParseAdmission reads a registration's annotations; an error names the
// annotation and what it accepts (the words registration uses to refuse
// the Secret).
func ParseAdmission(annotations map[string]string) (Admission, error) {
	var a Admission
	if v, ok := annotations[AnnotationAllowPrivilegedPods]; ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return a, fmt.Errorf("%s: %q is not true or false", AnnotationAllowPrivilegedPods, v)
		}
		if b {
			a.PodSecurity = psapi.LevelPrivileged
		}
	}
	if v, ok := annotations[AnnotationPodSecurity]; ok {
		l, err := psapi.ParseLevel(v)
		if err != nil {
			return a, fmt.Errorf("%s: %q is not privileged, baseline or restricted", AnnotationPodSecurity, v)
		}
		a.PodSecurity = l
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
	for _, ns := range strings.Split(annotations[AnnotationMemberNamespaces], ",") {
		ns = strings.TrimSpace(ns)
		switch {
		case ns == "":
			continue
		case len(validation.IsDNS1123Label(ns)) > 0:
			return a, fmt.Errorf("%s: %q is not a namespace name", AnnotationMemberNamespaces, ns)
		case KubeNamespace(ns):
			return a, fmt.Errorf("%s: %q is a kube-* namespace, where host pods never run", AnnotationMemberNamespaces, ns)
		}
		a.Namespaces = append(a.Namespaces, ns)
	}
	return a, nil
}

// AllowsServiceAccount reports whether the registration lets host pods of
// namespace ns run as member ServiceAccount name.
func (a Admission) AllowsServiceAccount(ns, name string) bool {
	for _, e := range a.ServiceAccounts {
		if e == ns+"/"+name || (e == "*" && ns != "kube-system") {
			return true
		}
	}
	return false
}

// Lists reports whether the registration Lists member namespace ns.
func (a Admission) Lists(ns string) bool {
	for _, n := range a.Namespaces {
		if n == ns {
			return true
		}
	}
	return false
}

// Provisioned reports whether host claim name of namespace ns was
// provisioned into the member, so the member's claim of that name is its.
func (a Admission) Provisioned(ns, name string) bool {
	return a.ClaimProvisioned != nil && a.ClaimProvisioned(ns, name)
}

// Level is the Pod Security Level member pods are held to.
func (a Admission) Level() psapi.Level {
	if a.PodSecurity == "" {
		return psapi.LevelBaseline
	}
	return a.PodSecurity
}

// KubeNamespace: kube-system, kube-public, kube-node-lease and every other
// kube-* namespace belong to the member's control plane.
func KubeNamespace(ns string) bool { return strings.HasPrefix(ns, "kube-") }
