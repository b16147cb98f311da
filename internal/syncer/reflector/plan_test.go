package reflector

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// copyLabels are the labels of a copy (as podsync's Owner makes them).
func copyLabels(uid string, from map[string]string) map[string]string {
	l := map[string]string{"leafsync.io/managed": "true", "leafsync.io/cluster": "member-a", "leafsync.io/host": "host-a", "leafsync.io/host-uid": uid}
	for k, v := range from {
		l[k] = v
	}
	return l
}

func wantedConfigMap(hostRV string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "web-config", Namespace: "apps",
			Labels:      copyLabels("cm-uid", map[string]string{"app": "web"}),
			Annotations: map[string]string{AnnotationHostResourceVersion: hostRV}},
		Data: data,
	}
}

func wantedSecret(hostRV string, data string, typ corev1.SecretType) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "web-secret", Namespace: "apps",
			Labels:      copyLabels("s-uid", nil),
			Annotations: map[string]string{AnnotationHostResourceVersion: hostRV}},
		Data: map[string][]byte{"password": []byte(data)}, Type: typ,
	}
}

// TestPlanCopy: the member copy is compared by content with the host's, not
// trusted from memory: a copy deleted or edited in the member is restored,
// and a copy whose host object is gone goes unless a pod needs it.
func TestPlanCopy(t *testing.T) {
	cm := wantedConfigMap("10", map[string]string{"app.conf": "v1"})
	edited := cm.DeepCopy()
	edited.Data["app.conf"] = "edited in the member"
	relabelled := cm.DeepCopy()
	relabelled.Labels["team"] = "x"
	frozen := cm.DeepCopy()
	frozen.Immutable = ptr.To(true)
	frozenEdited := edited.DeepCopy()
	frozenEdited.Immutable = ptr.To(true)
	secret := wantedSecret("7", "s3cret", corev1.SecretTypeOpaque)
	tampered := wantedSecret("7", "tampered", corev1.SecretTypeOpaque)
	otherType := wantedSecret("7", "s3cret", corev1.SecretTypeBasicAuth)
	foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web-config", Namespace: "apps"}}

	for _, tc := range []struct {
		name          string
		cur, want     metav1.Object
		owned, needed bool
		step          copyStep
	}{
		{"deleted in the member", nil, cm, true, true, copyCreate},
		{"deleted in the member, optional", nil, cm, true, false, copyCreate},
		{"up to date", cm.DeepCopy(), cm, true, true, copyKeep},
		{"data edited in the member", edited, cm, true, true, copyUpdate},
		{"a label added in the member", relabelled, cm, true, true, copyUpdate},
		{"a newer host version", cm.DeepCopy(), wantedConfigMap("11", map[string]string{"app.conf": "v2"}), true, true, copyUpdate},
		{"the host made it immutable", cm.DeepCopy(), frozen, true, true, copyUpdate},
		{"an immutable copy behind", frozenEdited, frozen, true, true, copyReplace},
		{"secret up to date", secret.DeepCopy(), secret, true, true, copyKeep},
		{"secret edited in the member", tampered, secret, true, true, copyUpdate},
		{"secret of another type", otherType, secret, true, true, copyReplace},
		{"a member object leafsync did not create", foreign, cm, false, true, copyRefuse},
		{"a member object leafsync did not create, host object gone", foreign, nil, false, false, copyRefuse},
		{"host object gone, a pod needs it", cm.DeepCopy(), nil, true, true, copyWait},
		{"host object gone, no copy, a pod needs it", nil, nil, true, true, copyWait},
		{"host object gone, optional", cm.DeepCopy(), nil, true, false, copyDelete},
		{"host object gone, optional, no copy", nil, nil, true, false, copyKeep},
	} {
		var kind Kind = configMaps{}
		if _, ok := tc.want.(*corev1.Secret); ok {
			kind = secrets{}
		}
		if got := planCopy(kind, tc.cur, tc.want, tc.owned, tc.needed); got != tc.step {
			t.Errorf("%s: step %d, want %d", tc.name, got, tc.step)
		}
	}
}
