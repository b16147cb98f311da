//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
	"github.com/leafsync/leafsync/test/harness"
)

// TestPodUpdate: what a user changes on a pod on a leaf after it was
// created reaches the member pod, in place (same UID): `kubectl label`,
// `kubectl annotate` (a change and a removal), `kubectl set image`, and
// activeDeadlineSeconds set. An annotation the member side added to its
// pod (a webhook, a controller) survives every update, and the member pod
// records the host pod's generation it was last written from.
func TestPodUpdate(t *testing.T) {
	const name = "updatable"
	f, member := podOnLeaf(t, name, func(p *corev1.Pod) {
		p.Annotations = map[string]string{"example.com/keep": "1", "example.com/drop": "1"}
	})
	hc, mc := f.host.Client(), f.members["member-a"].Client()
	ctx := context.Background()
	// The member side annotates its pod, as a member webhook would.
	patchPod(t, mc, name, types.MergePatchType, map[string]any{"metadata": map[string]any{
		"annotations": map[string]any{"member.example/added": "yes"}}})

	// waitMember waits until the member pod (the same one) passes check,
	// and the host generation it records is the host pod's.
	waitMember := func(t *testing.T, what string, check func(mp *corev1.Pod) error) {
		t.Helper()
		start := time.Now()
		harness.Eventually(t, 30*time.Second, what, func() error {
			mp, err := mc.CoreV1().Pods(appsNS).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if mp.UID != member.UID {
				return fmt.Errorf("member pod replaced: uid %s, was %s", mp.UID, member.UID)
			}
			if err := check(mp); err != nil {
				return err
			}
			if mp.Annotations["member.example/added"] != "yes" {
				return fmt.Errorf("the member-added annotation is gone: %v", mp.Annotations)
			}
			hp, err := hc.CoreV1().Pods(appsNS).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if g := mp.Annotations[podmeta.AnnotationHostGeneration]; g != strconv.FormatInt(hp.Generation, 10) {
				return fmt.Errorf("member pod records host generation %q, host pod is at %d", g, hp.Generation)
			}
			return nil
		})
		t.Logf("%s %s after the host's change", what, time.Since(start).Round(time.Millisecond))
	}

	t.Run("labels and annotations", func(t *testing.T) {
		patchPod(t, hc, name, types.MergePatchType, map[string]any{"metadata": map[string]any{
			"labels":      map[string]any{"tier": "front"},
			"annotations": map[string]any{"example.com/keep": "2", "example.com/drop": nil},
		}})
		waitMember(t, "member pod relabelled", func(mp *corev1.Pod) error {
			if mp.Labels["tier"] != "front" || mp.Annotations["example.com/keep"] != "2" {
				return fmt.Errorf("labels %v annotations %v", mp.Labels, mp.Annotations)
			}
			if _, ok := mp.Annotations["example.com/drop"]; ok {
				return fmt.Errorf("annotation removed on the host still on the member pod")
			}
			return nil
		})
	})

	t.Run("image", func(t *testing.T) {
		patchPod(t, hc, name, types.StrategicMergePatchType, map[string]any{"spec": map[string]any{
			"containers": []map[string]any{{"name": member.Spec.Containers[0].Name, "image": "registry.example/app:2"}}}})
		waitMember(t, "member pod image updated", func(mp *corev1.Pod) error {
			if img := mp.Spec.Containers[0].Image; img != "registry.example/app:2" {
				return fmt.Errorf("image %s", img)
			}
			return nil
		})
	})

	t.Run("activeDeadlineSeconds", func(t *testing.T) {
		patchPod(t, hc, name, types.MergePatchType, map[string]any{"spec": map[string]any{"activeDeadlineSeconds": 3600}})
		waitMember(t, "member pod deadline set", func(mp *corev1.Pod) error {
			if ads := mp.Spec.ActiveDeadlineSeconds; ads == nil || *ads != 3600 {
				return fmt.Errorf("activeDeadlineSeconds %v", ads)
			}
			return nil
		})
	})

	t.Run("a change the member refuses is a Warning Event; the member pod stays", func(t *testing.T) {
		refuseLabel(t, mc, "refuse")
		patchPod(t, hc, name, types.MergePatchType, map[string]any{"metadata": map[string]any{
			"labels": map[string]any{"refuse": "yes"}}})
		harness.Eventually(t, 30*time.Second, "a MemberUpdateRefused Event on the host pod", func() error {
			msg, ok := hostEvents(t, f, "MemberUpdateRefused")[name]
			if !ok {
				return fmt.Errorf("no Event")
			}
			if !strings.Contains(msg, "label refuse is not allowed here") {
				return fmt.Errorf("Event %q does not carry the member's message", msg)
			}
			return nil
		})
		mp, err := mc.CoreV1().Pods(appsNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := mp.Labels["refuse"]; ok || mp.UID != member.UID {
			t.Errorf("member pod changed by a refused update: uid %s labels %v", mp.UID, mp.Labels)
		}
	})
}

// refuseLabel makes the member's API refuse a pod update that gives a pod
// the label key, as a member's admission policy may (a
// ValidatingAdmissionPolicy, in force once a pod update is refused).
func refuseLabel(t *testing.T, mc kubernetes.Interface, key string) {
	t.Helper()
	ctx := context.Background()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "refuse-" + key},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: fmt.Sprintf("!has(object.metadata.labels) || !(%q in object.metadata.labels)", key),
				Message:    fmt.Sprintf("label %s is not allowed here", key),
			}},
		},
	}
	if _, err := mc.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy.Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: policy.Name, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	if _, err := mc.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// In force: a dry-run update giving a pod the label is refused.
	harness.Eventually(t, 30*time.Second, "the member's policy in force", func() error {
		pods, err := mc.CoreV1().Pods(appsNS).List(ctx, metav1.ListOptions{})
		if err != nil || len(pods.Items) == 0 {
			return fmt.Errorf("no pod to try: %v", err)
		}
		p := pods.Items[0].DeepCopy()
		p.Labels[key] = "x"
		_, err = mc.CoreV1().Pods(appsNS).Update(ctx, p, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil {
			return fmt.Errorf("update accepted")
		}
		return nil
	})
}

// podOnLeaf is a host with one member (member-a) and leafsync running,
// and a pod name on its leaf, built from leafWorkload's template and edit,
// running; it returns the fleet and the member pod.
func podOnLeaf(t *testing.T, name string, edit func(*corev1.Pod)) (*fleet, *corev1.Pod) {
	t.Helper()
	const leaf = "leaf-member-a"
	f := newPodSyncFleet(t, "member-a")
	f.startLeafsync(t, "leafsync")
	f.register(t, "member-a", nil)
	f.waitLeafReady(t, leaf, time.Minute)
	tmpl := leafWorkload(name, 1, leaf).PodTemplate()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: appsNS, Labels: tmpl.Labels}, Spec: tmpl.Spec}
	edit(pod)
	ctx := context.Background()
	if _, err := f.host.Client().CoreV1().Pods(appsNS).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitHostPodsReady(t, f, "app="+name, 1, 90*time.Second, leaf)
	member, err := f.members["member-a"].Client().CoreV1().Pods(appsNS).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return f, member
}

// patchPod patches pod name of the test namespace.
func patchPod(t *testing.T, c kubernetes.Interface, name string, pt types.PatchType, body map[string]any) {
	t.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Pods(appsNS).Patch(context.Background(), name, pt, data, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}
