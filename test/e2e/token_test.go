//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/leafsync/leafsync/internal/syncer/podsync/hosttoken"
	"github.com/leafsync/leafsync/test/harness"
)

// TestHostServiceAccountToken: a pod on a leaf that mounts ServiceAccount
// tokens (the admission's kube-api-access-* volume, and a volume holding a
// token for audience "vault" next to a ConfigMap, a Secret and downward API
// files) gets, in the member, tokens of its HOST ServiceAccount:
//   - the member Secret <pod>-host-token holds a token the host's
//     TokenReview answers as system:serviceaccount:apps:builder, bound to
//     the host pod, a "vault" token the host accepts for that audience, the
//     host's CA and the host API address;
//   - the member pod mounts them at the same paths, keeps the volume's
//     other sources (#30's first bug: the whole volume was dropped), and
//     its containers get KUBERNETES_SERVICE_HOST/PORT from the Secret;
//   - the refresh is scheduled at 80% of the shortest lifetime (600 s,
//     the API's minimum: 480 s after issue); a Secret deleted in the member
//     is written again with a fresh token within a resync;
//   - the Secret is owned by the member pod and goes with it.
func TestHostServiceAccountToken(t *testing.T) {
	f := newPodSyncFleet(t, "member-a")
	mc, hc := f.members["member-a"].Client(), f.host.Client()
	ctx := context.Background()
	const leaf = "leaf-member-a"
	f.startLeafsync(t, "leafsync", "--host-api-server="+f.host.Addr())
	f.register(t, "member-a", nil)
	f.waitLeafReady(t, leaf, time.Minute)

	if _, err := hc.CoreV1().ServiceAccounts(appsNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "builder"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := hc.CoreV1().ConfigMaps(appsNS).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-config"}, Data: map[string]string{"mode": "fast"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := hc.CoreV1().Secrets(appsNS).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "app-secret"}, StringData: map[string]string{"password": "p"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tmpl := leafWorkload("tok", 1, leaf).PodTemplate()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "tok", Namespace: appsNS, Labels: tmpl.Labels}, Spec: tmpl.Spec}
	pod.Spec.ServiceAccountName = "builder"
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "all-in-one", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
		{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "vault-token", Audience: "vault", ExpirationSeconds: ptr.To[int64](600)}},
		{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}}},
		{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "app-secret"}}},
		{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
	}}}})
	pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "all-in-one", MountPath: "/var/run/app"})
	hp, err := hc.CoreV1().Pods(appsNS).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	secretName := hosttoken.SecretName("tok")
	// The Secret's key of each token volume: by the order of the host pod's
	// token sources (the admission appends kube-api-access-* last).
	keyOf := map[string]string{}
	var admissionVolume string
	for _, tok := range hosttoken.Wanted(hp) {
		keyOf[tok.Volume] = tok.Key
		if tok.Volume != "all-in-one" {
			admissionVolume = tok.Volume
		}
	}
	if len(keyOf) != 2 || admissionVolume == "" {
		t.Fatalf("host pod token volumes %v: want all-in-one and the admission's", keyOf)
	}

	var mp *corev1.Pod
	harness.Eventually(t, 90*time.Second, "member pod apps/tok", func() error {
		mp, err = mc.CoreV1().Pods(appsNS).Get(ctx, "tok", metav1.GetOptions{})
		return err
	})
	t.Logf("member pod created %s after the host pod", time.Since(created).Round(time.Millisecond))
	sec, err := mc.CoreV1().Secrets(appsNS).Get(ctx, secretName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("member token Secret %s: %v", secretName, err)
	}

	t.Run("the member Secret holds the host ServiceAccount's tokens", func(t *testing.T) {
		review := func(token string, audiences ...string) *authenticationv1.TokenReview {
			r, err := hc.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: audiences}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		r := review(string(sec.Data[keyOf[admissionVolume]]))
		if !r.Status.Authenticated || r.Status.User.Username != "system:serviceaccount:apps:builder" {
			t.Errorf("host TokenReview of the member's token: authenticated=%v user=%q (%s), want system:serviceaccount:apps:builder", r.Status.Authenticated, r.Status.User.Username, r.Status.Error)
		}
		if got := r.Status.User.Extra["authentication.kubernetes.io/pod-uid"]; len(got) != 1 || got[0] != string(hp.UID) {
			t.Errorf("token bound to pod uid %v, want the host pod's %s", got, hp.UID)
		}
		if r := review(string(sec.Data[keyOf["all-in-one"]]), "vault"); !r.Status.Authenticated || !slices.Contains(r.Status.Audiences, "vault") {
			t.Errorf("the vault token: authenticated=%v audiences=%v (%s)", r.Status.Authenticated, r.Status.Audiences, r.Status.Error)
		}
		if r := review(string(sec.Data[keyOf["all-in-one"]])); r.Status.Authenticated {
			t.Error("the vault token is accepted for the API server's own audience")
		}
		ca, err := hc.CoreV1().ConfigMaps(appsNS).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if string(sec.Data[hosttoken.KeyCA]) != ca.Data["ca.crt"] || ca.Data["ca.crt"] == "" {
			t.Error("ca.crt is not the host's")
		}
		if got := string(sec.Data[hosttoken.KeyServiceHost]) + ":" + string(sec.Data[hosttoken.KeyServicePort]); got != f.host.Addr() {
			t.Errorf("host API address %s, want %s", got, f.host.Addr())
		}
		harness.Eventually(t, 30*time.Second, "the token Secret owned by the member pod", func() error {
			s, err := mc.CoreV1().Secrets(appsNS).Get(ctx, secretName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != mp.UID {
				return fmt.Errorf("owners %v, want the member pod %s", s.OwnerReferences, mp.UID)
			}
			return nil
		})
	})

	t.Run("the member pod mounts them and keeps the other sources", func(t *testing.T) {
		if mp.Spec.AutomountServiceAccountToken == nil || *mp.Spec.AutomountServiceAccountToken || mp.Spec.ServiceAccountName != "default" {
			t.Errorf("service account %q automount %v: want the member's default, no member token", mp.Spec.ServiceAccountName, mp.Spec.AutomountServiceAccountToken)
		}
		fromSecret := func(src corev1.VolumeProjection, key, path string) bool {
			s := src.Secret
			return s != nil && s.Name == secretName && len(s.Items) == 1 && s.Items[0].Key == key && s.Items[0].Path == path
		}
		var admission, allInOne *corev1.Volume
		for i, v := range mp.Spec.Volumes {
			switch v.Name {
			case "all-in-one":
				allInOne = &mp.Spec.Volumes[i]
			case admissionVolume:
				admission = &mp.Spec.Volumes[i]
			}
		}
		if allInOne == nil || admission == nil {
			t.Fatalf("member volumes %+v: want all-in-one and kube-api-access-*", mp.Spec.Volumes)
		}
		s := allInOne.Projected.Sources
		if len(s) != 4 || !fromSecret(s[0], keyOf["all-in-one"], "vault-token") || s[1].ConfigMap == nil || s[1].ConfigMap.Name != "app-config" ||
			s[2].Secret == nil || s[2].Secret.Name != "app-secret" || s[3].DownwardAPI == nil {
			t.Errorf("all-in-one sources %+v: want the vault token from %s, app-config, app-secret, downward API", s, secretName)
		}
		s = admission.Projected.Sources
		if len(s) != 3 || !fromSecret(s[0], keyOf[admissionVolume], "token") || !fromSecret(s[1], hosttoken.KeyCA, "ca.crt") || s[2].DownwardAPI == nil {
			t.Errorf("%s sources %+v: want token and ca.crt from %s, the namespace file", admission.Name, s, secretName)
		}
		for _, c := range mp.Spec.Containers {
			for _, want := range []struct{ name, key string }{{"KUBERNETES_SERVICE_HOST", hosttoken.KeyServiceHost}, {"KUBERNETES_SERVICE_PORT", hosttoken.KeyServicePort}} {
				i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == want.name })
				if i < 0 || c.Env[i].ValueFrom == nil || c.Env[i].ValueFrom.SecretKeyRef == nil ||
					c.Env[i].ValueFrom.SecretKeyRef.Name != secretName || c.Env[i].ValueFrom.SecretKeyRef.Key != want.key {
					t.Errorf("container %s: %s not from %s/%s (env %+v)", c.Name, want.name, secretName, want.key, c.Env)
				}
			}
		}
		// The copies the volume needs are made as for any pod.
		for _, name := range []string{"app-secret"} {
			if _, err := mc.CoreV1().Secrets(appsNS).Get(ctx, name, metav1.GetOptions{}); err != nil {
				t.Errorf("copy of Secret %s: %v", name, err)
			}
		}
		if _, err := mc.CoreV1().ConfigMaps(appsNS).Get(ctx, "app-config", metav1.GetOptions{}); err != nil {
			t.Errorf("copy of ConfigMap app-config: %v", err)
		}
		waitHostPodsReady(t, f, "app=tok", 1, 60*time.Second, leaf)
	})

	t.Run("refreshed at 80% of the shortest lifetime; a deleted Secret is written again", func(t *testing.T) {
		refresh, err1 := time.Parse(time.RFC3339, sec.Annotations[hosttoken.AnnotationRefreshAt])
		expires, err2 := time.Parse(time.RFC3339, sec.Annotations[hosttoken.AnnotationExpiresAt])
		if err1 != nil || err2 != nil {
			t.Fatalf("annotations %v", sec.Annotations)
		}
		if lead := expires.Sub(refresh); lead != 120*time.Second {
			t.Errorf("refresh %s before expiry, want 120s (20%% of 600s)", lead)
		}
		if until := time.Until(refresh); until < 400*time.Second || until > 490*time.Second {
			t.Errorf("refresh in %s, want about 480s after issue", until)
		}
		key := keyOf[admissionVolume]
		old := string(sec.Data[key])
		if err := mc.CoreV1().Secrets(appsNS).Delete(ctx, secretName, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		deleted := time.Now()
		harness.Eventually(t, 2*podSyncResync+10*time.Second, "the token Secret written again", func() error {
			s, err := mc.CoreV1().Secrets(appsNS).Get(ctx, secretName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if string(s.Data[key]) == old || len(s.Data[key]) == 0 {
				return fmt.Errorf("the same token")
			}
			return nil
		})
		t.Logf("token Secret deleted in the member: written again with a fresh token %s later (resync %s)", time.Since(deleted).Round(time.Millisecond), podSyncResync)
	})

	t.Run("the Secret goes with the pod", func(t *testing.T) {
		if err := hc.CoreV1().Pods(appsNS).Delete(ctx, "tok", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		gone := time.Now()
		harness.Eventually(t, 90*time.Second, "the token Secret deleted", func() error {
			if _, err := mc.CoreV1().Secrets(appsNS).Get(ctx, secretName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there (%v)", err)
			}
			return nil
		})
		t.Logf("token Secret deleted %s after the host pod", time.Since(gone).Round(time.Millisecond))
	})
}

// projectedSources are a volume's projected sources (none if it is not
// projected).
func projectedSources(v corev1.Volume) []corev1.VolumeProjection {
	if v.Projected == nil {
		return nil
	}
	return v.Projected.Sources
}
