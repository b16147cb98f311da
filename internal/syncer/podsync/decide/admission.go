package decide

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
	"github.com/leafsync/leafsync/internal/syncer/podsync/translate"
)

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
func notAdmitted(a podmeta.Admission, hp *corev1.Pod, cluster string) (reason, msg string) {
	if podmeta.KubeNamespace(hp.Namespace) {
		return "NotSyncedNamespace", fmt.Sprintf(
			"host pods never run in the member's %s namespaces: %s belongs to member %s's control plane; run the pod in another namespace",
			"kube-*", hp.Namespace, cluster)
	}
	if sa := hp.Annotations[podmeta.AnnotationMemberServiceAccount]; sa != "" && !a.AllowsServiceAccount(hp.Namespace, sa) {
		return "NotSyncedServiceAccount", fmt.Sprintf(
			"the pod asks to run as ServiceAccount %s/%s in member %s, which its registration does not allow; the member's owner can list it in the Secret's annotation %s",
			hp.Namespace, sa, cluster, podmeta.AnnotationMemberServiceAccounts)
	}
	spec := translate.MemberSpec(hp)
	for _, v := range spec.Volumes {
		if v.PersistentVolumeClaim != nil && !a.Provisioned(hp.Namespace, v.PersistentVolumeClaim.ClaimName) {
			return "NotSyncedVolumeClaim", fmt.Sprintf(
				"volume %s uses PersistentVolumeClaim %s, which leafsync did not provision into member %s (a claim of another volume is not supported yet): the member's PVC of that name would be used, so the pod is not run there; use a StorageClass of provisioner %s mapped by the Secret's annotation %s",
				v.Name, v.PersistentVolumeClaim.ClaimName, cluster, "leafsync.io/member", "leafsync.io/storage-classes")
		}
	}
	if len(spec.ResourceClaims) > 0 {
		return "NotSyncedVolumeClaim", fmt.Sprintf(
			"the pod uses resource claim %s: not supported yet: the member's ResourceClaim (or template) of that name would be used, so the pod is not run in member %s",
			spec.ResourceClaims[0].Name, cluster)
	}
	mp, _ := translate.MemberPod(hp, cluster, "", "")
	if v := podSecurityViolations(a.Level(), mp); v != "" {
		return "NotSyncedPodSecurity", fmt.Sprintf(
			"violates PodSecurity %q: %s; member %s's registration holds its pods to %s, the member's owner can set %s on the Secret",
			string(a.Level())+":latest", v, cluster, a.Level(), podmeta.AnnotationPodSecurity)
	}
	return "", ""
}
