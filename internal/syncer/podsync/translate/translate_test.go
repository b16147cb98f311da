package translate

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

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
	for _, v := range s.Volumes {
		if v.Projected != nil {
			t.Errorf("projected token volume %s went down", v.Name)
		}
	}
	if got := s.Containers[0].VolumeMounts; len(got) != 1 || got[0].Name != "config" {
		t.Errorf("mounts = %+v, want only config", got)
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
	if got := References(spec); !reflect.DeepEqual(got, want) {
		t.Errorf("References =\n%v\nwant\n%v", got, want)
	}
}
