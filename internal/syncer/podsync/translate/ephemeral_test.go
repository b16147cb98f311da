package translate

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
	"github.com/leafsync/leafsync/internal/syncer/reflector"
)

func debugger(name string, mounts ...corev1.VolumeMount) corev1.EphemeralContainer {
	return corev1.EphemeralContainer{TargetContainerName: "app", EphemeralContainerCommon: corev1.EphemeralContainerCommon{
		Name: name, Image: "busybox", Stdin: true, TTY: true, VolumeMounts: mounts,
	}}
}

func TestMemberEphemeralContainers(t *testing.T) {
	hp := admitted("h1", "kube-api-access-abcde")
	hp.Spec.EphemeralContainers = []corev1.EphemeralContainer{debugger("debugger",
		corev1.VolumeMount{Name: "config", MountPath: "/etc/web"},
		corev1.VolumeMount{Name: "kube-api-access-abcde", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"})}
	// The member pod has the token volume (the host token from its Secret):
	// the mount stays.
	got := MemberEphemeralContainers(hp)
	if !reflect.DeepEqual(got, hp.Spec.EphemeralContainers) {
		t.Errorf("MemberEphemeralContainers =\n%+v\nwant (the mounts and target kept)\n%+v", got, hp.Spec.EphemeralContainers)
	}
	// A pod run as a member ServiceAccount has no kube-api-access volume
	// in the member: the mount goes.
	hp.Annotations[podmeta.AnnotationMemberServiceAccount] = "web-reader"
	got = MemberEphemeralContainers(hp)
	want := []corev1.EphemeralContainer{debugger("debugger", corev1.VolumeMount{Name: "config", MountPath: "/etc/web"})}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("MemberEphemeralContainers =\n%+v\nwant (the token volume's mount dropped, target kept)\n%+v", got, want)
	}
	if hp.Spec.EphemeralContainers[0].VolumeMounts[1].Name != "kube-api-access-abcde" {
		t.Error("the host pod was changed")
	}
}

// A pod is created without ephemeral containers (the API refuses them on
// create), and adding one changes neither the member spec nor its hash:
// adoption compares that hash, and the member pod only ever gains them.
func TestEphemeralNotInCreatedSpec(t *testing.T) {
	hp := hostPod("h1")
	before := HostSpecHash(hp)
	hp.Spec.EphemeralContainers = []corev1.EphemeralContainer{debugger("debugger")}
	if mp, hash := MemberPod(hp, testCluster, testLeaf, testHost); len(mp.Spec.EphemeralContainers) != 0 || hash != before {
		t.Errorf("created with %d ephemeral containers, hash %s (was %s)", len(mp.Spec.EphemeralContainers), hash, before)
	}
}

func TestMissingEphemeral(t *testing.T) {
	hp := hostPod("h1")
	mp, _ := MemberPod(hp, testCluster, testLeaf, testHost)
	if got := MissingEphemeral(hp, mp); len(got) != 0 {
		t.Errorf("no ephemeral containers: missing %+v", got)
	}
	hp.Spec.EphemeralContainers = []corev1.EphemeralContainer{debugger("one"), debugger("two"), debugger("three")}
	mp.Spec.EphemeralContainers = []corev1.EphemeralContainer{debugger("two")}
	var names []string
	for _, c := range MissingEphemeral(hp, mp) {
		names = append(names, c.Name)
	}
	if !reflect.DeepEqual(names, []string{"one", "three"}) {
		t.Errorf("missing %v, want [one three] in the host's order", names)
	}
}

func TestReferencesOfEphemeralContainers(t *testing.T) {
	ec := debugger("debugger")
	ec.Env = []corev1.EnvVar{{Name: "A", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s-debug"}, Key: "a"}}}}
	ec.EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm-debug"}}}}
	want := []reflector.Ref{{Kind: "ConfigMap", Name: "cm-debug"}, {Kind: "Secret", Name: "s-debug"}}
	if got := References("web-0", &corev1.PodSpec{EphemeralContainers: []corev1.EphemeralContainer{ec}}); !reflect.DeepEqual(got, want) {
		t.Errorf("References = %v, want %v", got, want)
	}
	hp := hostPod("h1")
	hp.Spec.EphemeralContainers = []corev1.EphemeralContainer{ec}
	spec := MemberSpecWithEphemeral(hp)
	if got := References("web-0", &spec); !reflect.DeepEqual(got, want) {
		t.Errorf("References(MemberSpecWithEphemeral) = %v, want %v", got, want)
	}
}
