package podsync

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

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
		case kubeNamespace(ns):
			return a, fmt.Errorf("%s: %q is a kube-* namespace, where host pods never run", AnnotationMemberNamespaces, ns)
		}
		a.Namespaces = append(a.Namespaces, ns)
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

// lists reports whether the registration lists member namespace ns.
func (a Admission) lists(ns string) bool {
	for _, n := range a.Namespaces {
		if n == ns {
			return true
		}
	}
	return false
}

// level is the Pod Security level member pods are held to.
func (a Admission) level() psapi.Level {
	if a.PodSecurity == "" {
		return psapi.LevelBaseline
	}
	return a.PodSecurity
}

// kubeNamespace: kube-system, kube-public, kube-node-lease and every other
// kube-* namespace belong to the member's control plane.
func kubeNamespace(ns string) bool { return strings.HasPrefix(ns, "kube-") }

// podSecurity is the upstream Pod Security Admission's evaluator, with the
// checks of the Kubernetes version leafsync was built with.
var podSecurity = func() policy.Evaluator {
	e, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		panic(err) // the library's own checks are valid
	}
	return e
}()

// podSecurityViolations evaluates a member pod at level as the member's
// Pod Security admission would: "" if allowed, else the failed checks in
// the library's words, e.g. `host namespaces (hostNetwork=true), hostPort
// (container "app" uses hostPort 80)`.
func podSecurityViolations(level psapi.Level, mp *corev1.Pod) string {
	r := policy.AggregateCheckResults(podSecurity.EvaluatePod(psapi.LevelVersion{Level: level, Version: psapi.LatestVersion()}, &mp.ObjectMeta, &mp.Spec))
	if r.Allowed {
		return ""
	}
	return r.ForbiddenDetail()
}

// notAdmitted says why the member's owner has not agreed to run hp ("" if
// it has). Only what can be told from the pod and the registration; the
// namespace's and the referenced objects' owners are checked on create.
func (a Admission) notAdmitted(hp *corev1.Pod, cluster string) (reason, msg string) {
	if kubeNamespace(hp.Namespace) {
		return "NotSyncedNamespace", fmt.Sprintf(
			"host pods never run in the member's %s namespaces: %s belongs to member %s's control plane; run the pod in another namespace",
			"kube-*", hp.Namespace, cluster)
	}
	if sa := hp.Annotations[AnnotationMemberServiceAccount]; sa != "" && !a.allowsServiceAccount(hp.Namespace, sa) {
		return "NotSyncedServiceAccount", fmt.Sprintf(
			"the pod asks to run as ServiceAccount %s/%s in member %s, which its registration does not allow; the member's owner can list it in the Secret's annotation %s",
			hp.Namespace, sa, cluster, AnnotationMemberServiceAccounts)
	}
	spec := memberSpec(hp)
	for _, v := range spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			return "NotSyncedVolumeClaim", fmt.Sprintf(
				"volume %s uses PersistentVolumeClaim %s: not supported yet: the member's PVC of that name would be used, so the pod is not run in member %s",
				v.Name, v.PersistentVolumeClaim.ClaimName, cluster)
		}
	}
	if len(spec.ResourceClaims) > 0 {
		return "NotSyncedVolumeClaim", fmt.Sprintf(
			"the pod uses resource claim %s: not supported yet: the member's ResourceClaim (or template) of that name would be used, so the pod is not run in member %s",
			spec.ResourceClaims[0].Name, cluster)
	}
	mp, _ := memberPod(hp, cluster, "", "")
	if v := podSecurityViolations(a.level(), mp); v != "" {
		return "NotSyncedPodSecurity", fmt.Sprintf(
			"violates PodSecurity %q: %s; member %s's registration holds its pods to %s, the member's owner can set %s on the Secret",
			string(a.level())+":latest", v, cluster, a.level(), AnnotationPodSecurity)
	}
	return "", ""
}
