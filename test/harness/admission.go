package harness

import (
	"context"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// brokenPodPolicy names the webhook FailPodCreates installs.
const brokenPodPolicy = "broken-pod-policy"

// FailPodCreates installs a validating webhook for pod creates in
// namespace ns whose endpoint is down, with failurePolicy Fail: the API
// server answers every such create with HTTP 500 ("failed calling
// webhook"), while /readyz and every other call stay healthy — a member
// whose own admission is broken, not an outage. HealPodCreates removes it.
func (c *Cluster) FailPodCreates(ctx context.Context, ns string) error {
	url := "https://127.0.0.1:1/validate" // nothing listens on port 1
	none, fail := admissionregistrationv1.SideEffectClassNone, admissionregistrationv1.Fail
	wh := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: brokenPodPolicy},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "pods.broken.example.com",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url},
			FailurePolicy:           &fail,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](1),
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
			}},
		}},
	}
	_, err := c.client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, wh, metav1.CreateOptions{})
	return err
}

// HealPodCreates removes what FailPodCreates installed.
func (c *Cluster) HealPodCreates(ctx context.Context) error {
	return c.client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, brokenPodPolicy, metav1.DeleteOptions{})
}
