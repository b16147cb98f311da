package translate

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/leafsync/leafsync/internal/syncer/podsync/hosttoken"
	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
	"github.com/leafsync/leafsync/internal/syncer/reflector"
)

// admitted is a host pod as the host's admission leaves it: a projected
// service-account token volume mounted in every container, a priority, a
// node selector and affinity to the leaf, leafsync's tolerations.
func admitted(uid, tokenVolume string) *corev1.Pod {
	hp := hostPod(uid)
	hp.Spec.ServiceAccountName = "builder"
	hp.Spec.DeprecatedServiceAccount = "builder"
	hp.Spec.Priority = ptr.To[int32](1000)
	hp.Spec.PriorityClassName = "high"
	hp.Spec.SchedulerName = "default-scheduler"
	hp.Spec.NodeSelector = map[string]string{"leafsync.io/cluster": "member-a"}
	hp.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}}
	hp.Spec.Tolerations = []corev1.Toleration{
		{Key: "leafsync.io/leaf", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](2)},
	}
	hp.Spec.Volumes = []corev1.Volume{
		{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "web-config"}}}},
		{Name: tokenVolume, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: kubeRootCA}}},
		}}}},
	}
	hp.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{
		{Name: "config", MountPath: "/etc/web"},
		{Name: tokenVolume, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true},
	}
	hp.Annotations = map[string]string{corev1.LastAppliedConfigAnnotation: "{}", "team": "web", podmeta.AnnotationMemberUID: "m0"}
	return hp
}

func TestMemberPodNoHostToken(t *testing.T) {
	mp, hash := MemberPod(admitted("h1", "kube-api-access-abcde"), testCluster, testLeaf, testHost)
	s := mp.Spec
	if s.ServiceAccountName != "" || s.DeprecatedServiceAccount != "" {
		t.Errorf("service account %q/%q, want the member's default", s.ServiceAccountName, s.DeprecatedServiceAccount)
	}
	if s.AutomountServiceAccountToken == nil || *s.AutomountServiceAccountToken {
		t.Error("automountServiceAccountToken must be false")
	}
	// No token is projected in the member: the host ServiceAccount's comes
	// from the pod's token Secret (TestMemberPodHostTokenVolume).
	for _, v := range s.Volumes {
		if v.Projected != nil && projectsToken(v.Projected) {
			t.Errorf("volume %s projects a token in the member", v.Name)
		}
	}
	if got := s.Containers[0].VolumeMounts; len(got) != 2 || got[0].Name != "config" || got[1].Name != "kube-api-access-abcde" {
		t.Errorf("mounts = %+v, want config and the token volume", got)
	}
	if mp.Annotations[podmeta.AnnotationSpecHash] != hash || hash == "" {
		t.Errorf("spec hash annotation %q, returned %q", mp.Annotations[podmeta.AnnotationSpecHash], hash)
	}

	opted := admitted("h1", "kube-api-access-abcde")
	opted.Annotations[podmeta.AnnotationMemberServiceAccount] = "web-reader"
	mp, _ = MemberPod(opted, testCluster, testLeaf, testHost)
	if mp.Spec.ServiceAccountName != "web-reader" || mp.Spec.AutomountServiceAccountToken != nil {
		t.Errorf("opt-in: sa=%q automount=%v, want web-reader and the member's default", mp.Spec.ServiceAccountName, mp.Spec.AutomountServiceAccountToken)
	}
	for _, v := range mp.Spec.Volumes {
		if v.Projected != nil {
			t.Error("opt-in: the host's token volume must still not go down (the member mounts its own)")
		}
	}
	if got := mp.Spec.Containers[0].VolumeMounts; len(got) != 1 || got[0].Name != "config" {
		t.Errorf("opt-in: mounts = %+v, want only config", got)
	}
	if env := mp.Spec.Containers[0].Env; len(env) != 0 {
		t.Errorf("opt-in: env = %+v, want none (the member's kubelet gives its own API address)", env)
	}
}

// tokenPlus is a host pod whose one projected volume holds a
// ServiceAccount token (audience, lifetime), a ConfigMap, a Secret, the
// host's kube-root-ca.crt and downward API files (#30's first bug).
func tokenPlus() *corev1.Pod {
	hp := hostPod("h1")
	hp.Spec.ServiceAccountName = "builder"
	hp.Spec.Volumes = []corev1.Volume{{Name: "all-in-one", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
		{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "vault-token", Audience: "vault", ExpirationSeconds: ptr.To[int64](600)}},
		{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}}},
		{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "app-secret"}}},
		{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: kubeRootCA}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
		{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
	}}}}}
	hp.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "all-in-one", MountPath: "/var/run/app"}}
	hp.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "KUBERNETES_SERVICE_PORT", Value: "8443"}}
	return hp
}

// TestMemberPodHostTokenVolume: a projected volume with a token keeps its
// other sources; the token and the CA come from the pod's token Secret at
// the same paths; the containers read the host API address from it.
func TestMemberPodHostTokenVolume(t *testing.T) {
	hp := tokenPlus()
	mp, _ := MemberPod(hp, testCluster, testLeaf, testHost)
	secret := hosttoken.SecretName(hp.Name)
	if len(mp.Spec.Volumes) != 1 || mp.Spec.Volumes[0].Projected == nil {
		t.Fatalf("volumes = %+v, want the projected volume", mp.Spec.Volumes)
	}
	fromSecret := func(key, path string) corev1.VolumeProjection {
		return corev1.VolumeProjection{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: secret},
			Items: []corev1.KeyToPath{{Key: key, Path: path}}, Optional: ptr.To(true)}}
	}
	want := []corev1.VolumeProjection{
		fromSecret(hosttoken.TokenKey(0), "vault-token"),
		hp.Spec.Volumes[0].Projected.Sources[1],
		hp.Spec.Volumes[0].Projected.Sources[2],
		fromSecret(hosttoken.KeyCA, "ca.crt"),
		hp.Spec.Volumes[0].Projected.Sources[4],
	}
	if got := mp.Spec.Volumes[0].Projected.Sources; !reflect.DeepEqual(got, want) {
		t.Errorf("sources =\n%+v\nwant\n%+v", got, want)
	}
	if got := mp.Spec.Containers[0].VolumeMounts; len(got) != 1 || got[0].Name != "all-in-one" {
		t.Errorf("mounts = %+v, want the volume's", got)
	}
	env := mp.Spec.Containers[0].Env
	wantEnv := []corev1.EnvVar{
		{Name: "KUBERNETES_SERVICE_HOST", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: hosttoken.KeyServiceHost, Optional: ptr.To(true)}}},
		{Name: "KUBERNETES_SERVICE_PORT", Value: "8443"}, // the container's own wins
	}
	if !reflect.DeepEqual(env, wantEnv) {
		t.Errorf("env =\n%+v\nwant\n%+v", env, wantEnv)
	}
	if got := hosttoken.Wanted(hp); len(got) != 1 || got[0].Audience != "vault" || got[0].ExpirationSeconds != 600 || got[0].Key != hosttoken.TokenKey(0) {
		t.Errorf("Wanted = %+v, want the vault token for 600s", got)
	}
	// The token Secret is leafsync's own, never a host object to copy;
	// the others are.
	refs := References(hp.Name, &mp.Spec)
	wantRefs := []reflector.Ref{{Kind: "ConfigMap", Name: "app-config"}, {Kind: "Secret", Name: "app-secret"}}
	if !reflect.DeepEqual(refs, wantRefs) {
		t.Errorf("References = %v, want %v", refs, wantRefs)
	}
	// The host pod is not modified.
	if !projectsToken(hp.Spec.Volumes[0].Projected) || len(hp.Spec.Containers[0].Env) != 1 {
		t.Error("MemberPod changed the host pod")
	}
}

// TestMemberPodMemberSAKeepsOtherSources: a pod that runs as a member
// ServiceAccount loses the token source alone from a volume of its own.
func TestMemberPodMemberSAKeepsOtherSources(t *testing.T) {
	hp := tokenPlus()
	hp.Annotations = map[string]string{podmeta.AnnotationMemberServiceAccount: "web-reader"}
	mp, _ := MemberPod(hp, testCluster, testLeaf, testHost)
	if len(mp.Spec.Volumes) != 1 {
		t.Fatalf("volumes = %+v", mp.Spec.Volumes)
	}
	want := hp.Spec.Volumes[0].Projected.Sources[1:]
	if got := mp.Spec.Volumes[0].Projected.Sources; !reflect.DeepEqual(got, want) {
		t.Errorf("sources = %+v, want all but the token", got)
	}
}

func TestMemberPodHostOnlyFields(t *testing.T) {
	hp := admitted("h1", "kube-api-access-abcde")
	hp.Spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{}
	hp.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone"}}
	hp.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "example.com/lb"}}
	hp.Spec.Overhead = corev1.ResourceList{}
	hp.Spec.Hostname, hp.Spec.Subdomain = "web-0", "web"
	mp, _ := MemberPod(hp, testCluster, testLeaf, testHost)
	s := mp.Spec
	if s.NodeName != "" || s.NodeSelector != nil || s.Affinity.NodeAffinity != nil || s.TopologySpreadConstraints != nil ||
		s.SchedulerName != "" || s.Priority != nil || s.PriorityClassName != "" || s.ReadinessGates != nil || s.Overhead != nil {
		t.Errorf("host-only fields went down: %+v", s)
	}
	if s.Affinity.PodAntiAffinity == nil {
		t.Error("pod anti-affinity dropped")
	}
	if s.Hostname != "web-0" || s.Subdomain != "web" {
		t.Error("hostname/subdomain (StatefulSet identity) dropped")
	}
	if len(s.Tolerations) != 1 || s.Tolerations[0].Key != corev1.TaintNodeUnreachable {
		t.Errorf("tolerations = %+v, want only the non-leafsync one", s.Tolerations)
	}
	// Metadata ties the member pod to the host pod.
	for k, v := range map[string]string{podmeta.LabelManaged: "true", podmeta.LabelCluster: testCluster, podmeta.LabelHost: testHost, podmeta.LabelHostUID: "h1", "app": "web"} {
		if mp.Labels[k] != v {
			t.Errorf("label %s=%q, want %q", k, mp.Labels[k], v)
		}
	}
	if mp.Annotations[podmeta.AnnotationOwner] != "StatefulSet/web" || mp.Annotations[podmeta.AnnotationLeaf] != testLeaf || mp.Annotations["team"] != "web" {
		t.Errorf("annotations %v", mp.Annotations)
	}
	for _, k := range []string{corev1.LastAppliedConfigAnnotation, podmeta.AnnotationMemberUID} {
		if _, ok := mp.Annotations[k]; ok {
			t.Errorf("annotation %s went down", k)
		}
	}
	if mp.Name != hp.Name || mp.Namespace != hp.Namespace || len(mp.OwnerReferences) != 0 {
		t.Errorf("name %s/%s owners %v", mp.Namespace, mp.Name, mp.OwnerReferences)
	}
	// The host pod is not modified.
	if hp.Spec.NodeName != testLeaf || len(hp.Spec.Tolerations) != 2 {
		t.Error("MemberPod changed the host pod")
	}
}

func TestSpecHash(t *testing.T) {
	// A recreated StatefulSet pod: new UID, new token volume name, new
	// labels (revision), same template: same hash.
	a := admitted("h1", "kube-api-access-abcde")
	b := admitted("h2", "kube-api-access-zyxwv")
	b.Labels["controller-revision-hash"] = "web-7d9"
	if HostSpecHash(a) != HostSpecHash(b) {
		t.Error("same template, different hash: a recreated pod could not adopt")
	}
	c := admitted("h3", "kube-api-access-abcde")
	c.Spec.Containers[0].Image = "registry.example/app:2"
	if HostSpecHash(a) == HostSpecHash(c) {
		t.Error("image changed, same hash: an incompatible pod would be adopted")
	}
	d := admitted("h4", "kube-api-access-abcde")
	d.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", Value: "x"}}
	if HostSpecHash(a) == HostSpecHash(d) {
		t.Error("env changed, same hash")
	}
}

func TestReferences(t *testing.T) {
	spec := &corev1.PodSpec{
		Volumes: []corev1.Volume{
			{Name: "a", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm-vol"}}}},
			{Name: "b", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s-vol"}}},
			{Name: "c", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "cm-proj"}}},
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "s-proj"}}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: kubeRootCA}}},
			}}}},
		},
		InitContainers: []corev1.Container{{Name: "init", EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "s-envfrom"}}}}}},
		Containers: []corev1.Container{{Name: "app",
			Env: []corev1.EnvVar{
				{Name: "A", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cm-env"}, Key: "a", Optional: ptr.To(true)}}},
				{Name: "A2", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cm-vol"}, Key: "a", Optional: ptr.To(true)}}},
				{Name: "B", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s-env"}, Key: "b"}}},
				{Name: "C", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			},
			EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm-envfrom"}}}},
		}},
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "pull"}, {Name: "s-vol"}},
	}
	// Optional only when every use is: cm-env (an optional env), pull (a
	// kubelet only warns about a missing pull secret); s-vol is also a
	// volume, cm-vol also a required volume.
	want := []reflector.Ref{
		{Kind: "ConfigMap", Name: "cm-env", Optional: true}, {Kind: "ConfigMap", Name: "cm-envfrom", Optional: false}, {Kind: "ConfigMap", Name: "cm-proj", Optional: false}, {Kind: "ConfigMap", Name: "cm-vol", Optional: false},
		{Kind: "Secret", Name: "pull", Optional: true}, {Kind: "Secret", Name: "s-env", Optional: false}, {Kind: "Secret", Name: "s-envfrom", Optional: false}, {Kind: "Secret", Name: "s-proj", Optional: false}, {Kind: "Secret", Name: "s-vol", Optional: false},
	}
	if got := References("web-0", spec); !reflect.DeepEqual(got, want) {
		t.Errorf("References =\n%v\nwant\n%v", got, want)
	}
}
