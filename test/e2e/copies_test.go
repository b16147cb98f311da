//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
	"github.com/leafsync/leafsync/test/harness"
)

// TestCopiesHeal: leafsync's copies of host ConfigMaps and Secrets in a
// member follow the host objects, not leafsync's memory of them. A copy
// deleted or edited by hand in the member is restored within a resync; a
// new pod that needs a copy deleted by hand runs within a resync; a host
// object deleted goes from the member when no synced pod needs it (an
// optional reference), and stays while one does. The member refuses pods
// whose ConfigMap is missing, as a kubelet would never start them (kwok
// runs any pod).
func TestCopiesHeal(t *testing.T) {
	f := newPodSyncFleet(t, "member-a")
	member := f.members["member-a"]
	hc, mc := f.host.Client(), member.Client()
	ctx := context.Background()
	const leaf = "leaf-member-a"
	refusePodsWithoutConfigMap(t, mc, "web-config", appsNS, "default")
	f.startLeafsync(t, "leafsync")
	f.register(t, "member-a", nil)
	f.waitLeafReady(t, leaf, time.Minute)

	for _, o := range []struct {
		name string
		data map[string]string
	}{{"web-config", map[string]string{"app.conf": "v1"}}, {"web-extra", map[string]string{"EXTRA": "1"}}} {
		if _, err := hc.CoreV1().ConfigMaps(appsNS).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: o.name, Namespace: appsNS}, Data: o.data,
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := hc.CoreV1().Secrets(appsNS).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "web-secret", Namespace: appsNS}, Data: map[string][]byte{"password": []byte("s3cret")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	web := leafWorkload("web", 1, leaf)
	web.ConfigMap, web.Secret = "web-config", "web-secret"
	d := web.Deployment()
	c := &d.Spec.Template.Spec.Containers[0]
	c.EnvFrom = append(c.EnvFrom, corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "web-extra"}, Optional: ptr.To(true)}})
	if _, err := hc.AppsV1().Deployments(appsNS).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitHostPodsReady(t, f, "app=web", 1, 90*time.Second, leaf)
	for _, name := range []string{"web-config", "web-extra"} {
		if _, err := mc.CoreV1().ConfigMaps(appsNS).Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Fatalf("member copy of ConfigMap %s: %v", name, err)
		}
	}

	// copyRestored: the member copy of web-config holds the host's data.
	configRestored := func() error {
		cm, err := mc.CoreV1().ConfigMaps(appsNS).Get(ctx, "web-config", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cm.Data["app.conf"] != "v1" || cm.Labels[podmeta.LabelManaged] != "true" {
			return fmt.Errorf("member ConfigMap data %v labels %v", cm.Data, cm.Labels)
		}
		return nil
	}

	t.Run("a copy deleted or edited in the member is restored within a resync", func(t *testing.T) {
		if err := mc.CoreV1().ConfigMaps(appsNS).Delete(ctx, "web-config", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		patch := `{"data":{"password":"` + "dGFtcGVyZWQ=" + `"}}` // "tampered"
		if _, err := mc.CoreV1().Secrets(appsNS).Patch(ctx, "web-secret", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		changed := time.Now()
		harness.Eventually(t, 2*podSyncResync+5*time.Second, "member copies restored", func() error {
			if err := configRestored(); err != nil {
				return err
			}
			s, err := mc.CoreV1().Secrets(appsNS).Get(ctx, "web-secret", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if string(s.Data["password"]) != "s3cret" {
				return fmt.Errorf("member Secret password %q", s.Data["password"])
			}
			return nil
		})
		t.Logf("ConfigMap deleted and Secret edited in the member: both restored %s later (resync %s)", time.Since(changed).Round(time.Millisecond), podSyncResync)
	})

	t.Run("a new pod that needs a copy deleted by hand runs within a resync", func(t *testing.T) {
		// (NotFound: the copy was never restored above.)
		if err := mc.CoreV1().ConfigMaps(appsNS).Delete(ctx, "web-config", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		scale, err := hc.AppsV1().Deployments(appsNS).GetScale(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		scale.Spec.Replicas = 2
		if _, err := hc.AppsV1().Deployments(appsNS).UpdateScale(ctx, "web", scale, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		scaled := time.Now()
		waitHostPodsReady(t, f, "app=web", 2, 2*podSyncResync+5*time.Second, leaf)
		t.Logf("the new pod Running and Ready %s after the scale-up (resync %s)", time.Since(scaled).Round(time.Millisecond), podSyncResync)
		if err := configRestored(); err != nil {
			t.Error(err)
		}
	})

	t.Run("a host object deleted goes from the member when no synced pod needs it", func(t *testing.T) {
		if err := hc.CoreV1().ConfigMaps(appsNS).Delete(ctx, "web-extra", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := hc.CoreV1().Secrets(appsNS).Delete(ctx, "web-secret", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		deleted := time.Now()
		harness.Eventually(t, 2*podSyncResync+5*time.Second, "member copy of the optional ConfigMap deleted", func() error {
			_, err := mc.CoreV1().ConfigMaps(appsNS).Get(ctx, "web-extra", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("still there (%v)", err)
		})
		t.Logf("optional ConfigMap's copy deleted %s after the host object (resync %s)", time.Since(deleted).Round(time.Millisecond), podSyncResync)
		// The Secret is needed by both pods (not optional): its copy stays
		// through another resync, and so do the pods.
		time.Sleep(podSyncResync + time.Second)
		if _, err := mc.CoreV1().Secrets(appsNS).Get(ctx, "web-secret", metav1.GetOptions{}); err != nil {
			t.Errorf("member copy of the needed Secret: %v", err)
		}
		waitHostPodsReady(t, f, "app=web", 2, 5*time.Second, leaf)
	})
}

// refusePodsWithoutConfigMap makes the member refuse every pod created in
// the given namespaces while the namespace has no ConfigMap cm (a
// ValidatingAdmissionPolicy whose parameter is that ConfigMap, Deny when it
// is missing), and waits until the policy is in force.
func refusePodsWithoutConfigMap(t *testing.T, c kubernetes.Interface, cm string, namespaces ...string) {
	t.Helper()
	ctx := context.Background()
	api := c.AdmissionregistrationV1()
	const name = "pods-need-their-configmap"
	fail := admissionregistrationv1.Fail
	if _, err := api.ValidatingAdmissionPolicies().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			ParamKind:     &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"},
			FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "params != null"}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.ValidatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: name,
			// No namespace: the ConfigMap is looked up in the pod's own.
			ParamRef:          &admissionregistrationv1.ParamRef{Name: cm, ParameterNotFoundAction: ptr.To(admissionregistrationv1.DenyAction)},
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{
					Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpIn, Values: namespaces,
				}},
			}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// In force once a pod in "default" (which has no such ConfigMap) is
	// refused for it.
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "policy-probe", Namespace: "default"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/app:1"}}},
	}
	harness.Eventually(t, 30*time.Second, "member refuses pods without ConfigMap "+cm, func() error {
		_, err := c.CoreV1().Pods("default").Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil && strings.Contains(err.Error(), "no params found") {
			return nil
		}
		return fmt.Errorf("dry-run create of a pod without the ConfigMap: %v", err)
	})
}
