//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/leafsync/leafsync/test/harness"
)

// TestEphemeralContainers: `kubectl debug` on a pod on a leaf. An
// ephemeral container added to the host pod (its ephemeralcontainers
// subresource) appears in the member pod, with the copy of the ConfigMap
// its env uses; one the member's registration does not allow (privileged,
// at the default baseline) is never sent, the host pod says why, and the
// pod keeps running. kwok reports no status for ephemeral containers, so
// only the spec is checked here; the conformance spec "Ephemeral
// Containers" runs one on a real kubelet.
func TestEphemeralContainers(t *testing.T) {
	f, member := podOnLeaf(t, "target", func(*corev1.Pod) {})
	hc, mc := f.host.Client(), f.members["member-a"].Client()
	ctx := context.Background()
	if _, err := hc.CoreV1().ConfigMaps(appsNS).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "debug-env", Namespace: appsNS}, Data: map[string]string{"MODE": "debug"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	app := member.Spec.Containers[0].Name

	addEphemeral := func(ec corev1.EphemeralContainer) {
		t.Helper()
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			hp, err := hc.CoreV1().Pods(appsNS).Get(ctx, "target", metav1.GetOptions{})
			if err != nil {
				return err
			}
			hp.Spec.EphemeralContainers = append(hp.Spec.EphemeralContainers, ec)
			_, err = hc.CoreV1().Pods(appsNS).UpdateEphemeralContainers(ctx, "target", hp, metav1.UpdateOptions{})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	memberEphemeral := func() (map[string]corev1.EphemeralContainer, error) {
		mp, err := mc.CoreV1().Pods(appsNS).Get(ctx, "target", metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if mp.UID != member.UID {
			return nil, fmt.Errorf("member pod replaced: uid %s, was %s", mp.UID, member.UID)
		}
		out := map[string]corev1.EphemeralContainer{}
		for _, c := range mp.Spec.EphemeralContainers {
			out[c.Name] = c
		}
		return out, nil
	}

	t.Run("an ephemeral container reaches the member pod, with its ConfigMap", func(t *testing.T) {
		added := time.Now()
		addEphemeral(corev1.EphemeralContainer{TargetContainerName: app, EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: "debugger", Image: "registry.example/busybox:1", Stdin: true, TTY: true,
			EnvFrom:                  []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "debug-env"}}}},
			TerminationMessagePolicy: corev1.TerminationMessageReadFile, ImagePullPolicy: corev1.PullIfNotPresent,
		}})
		harness.Eventually(t, 30*time.Second, "ephemeral container debugger in the member pod", func() error {
			ecs, err := memberEphemeral()
			if err != nil {
				return err
			}
			c, ok := ecs["debugger"]
			if !ok {
				return fmt.Errorf("member pod's ephemeral containers: %v", ecs)
			}
			if c.TargetContainerName != app || c.Image != "registry.example/busybox:1" || !c.Stdin || !c.TTY {
				return fmt.Errorf("member's debugger: %+v", c)
			}
			return nil
		})
		t.Logf("ephemeral container in the member pod %s after the host's update", time.Since(added).Round(time.Millisecond))
		cm, err := mc.CoreV1().ConfigMaps(appsNS).Get(ctx, "debug-env", metav1.GetOptions{})
		if err != nil || cm.Data["MODE"] != "debug" {
			t.Fatalf("member copy of ConfigMap debug-env: %v %v", cm, err)
		}
	})

	t.Run("a privileged ephemeral container at baseline is refused with an Event, never sent", func(t *testing.T) {
		addEphemeral(corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: "root-shell", Image: "registry.example/busybox:1", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
			TerminationMessagePolicy: corev1.TerminationMessageReadFile, ImagePullPolicy: corev1.PullIfNotPresent,
		}})
		harness.Eventually(t, 30*time.Second, "an EphemeralContainerNotSynced Event on the host pod", func() error {
			msg, ok := hostEvents(t, f, "EphemeralContainerNotSynced")["target"]
			if !ok {
				return fmt.Errorf("no Event")
			}
			if !strings.Contains(msg, `container "root-shell"`) || !strings.Contains(msg, "privileged") {
				return fmt.Errorf("Event %q does not name the container and the check", msg)
			}
			return nil
		})
		time.Sleep(2 * podSyncResync)
		ecs, err := memberEphemeral()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := ecs["root-shell"]; ok {
			t.Error("the privileged ephemeral container reached the member")
		}
		if _, ok := ecs["debugger"]; !ok {
			t.Error("the member pod lost its debugger")
		}
		hp, err := hc.CoreV1().Pods(appsNS).Get(ctx, "target", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !podReady(hp) || hp.DeletionTimestamp != nil {
			t.Errorf("host pod no longer running: phase %s, deleting %v", hp.Status.Phase, hp.DeletionTimestamp)
		}
	})
}
