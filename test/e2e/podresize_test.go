//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/leafsync/leafsync/test/harness"
)

func cpuResources(req, limit string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(req), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(limit), corev1.ResourceMemory: resource.MustParse("128Mi")},
	}
}

// TestPodResize: `kubectl patch --subresource resize` on a pod on a leaf.
// The host accepts the resize (its API server requires the running
// containers' status to report resources, which the member's kubelet
// does and the status mirror brings back), and the member pod's spec
// follows, in place (same UID). A resize the member refuses (its
// ResourceQuota) leaves a Warning Event on the host pod with the member's
// message and the member pod as it was. kwok neither reports
// containerStatuses[].resources nor actuates a resize, so the test writes
// what a v1.36 kubelet reports at start; the actuation itself (status
// resources, PodResizeInProgress) is a real kubelet's.
func TestPodResize(t *testing.T) {
	const name = "resizable"
	f, member := podOnLeaf(t, name, func(p *corev1.Pod) { p.Spec.Containers[0].Resources = cpuResources("100m", "200m") })
	hc, mc := f.host.Client(), f.members["member-a"].Client()
	ctx := context.Background()
	reportResources(t, mc, name)
	harness.Eventually(t, 30*time.Second, "host pod's container status reports resources", func() error {
		hp, err := hc.CoreV1().Pods(appsNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cs := hp.Status.ContainerStatuses; len(cs) == 0 || cs[0].Resources == nil {
			return fmt.Errorf("container statuses %+v", cs)
		}
		return nil
	})

	resize := func(r corev1.ResourceRequirements) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			hp, err := hc.CoreV1().Pods(appsNS).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			hp.Spec.Containers[0].Resources = r
			_, err = hc.CoreV1().Pods(appsNS).UpdateResize(ctx, name, hp, metav1.UpdateOptions{})
			return err
		})
	}
	memberResources := func() (corev1.ResourceRequirements, error) {
		mp, err := mc.CoreV1().Pods(appsNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return corev1.ResourceRequirements{}, err
		}
		if mp.UID != member.UID {
			return corev1.ResourceRequirements{}, fmt.Errorf("member pod replaced: uid %s, was %s", mp.UID, member.UID)
		}
		return mp.Spec.Containers[0].Resources, nil
	}

	grown := cpuResources("150m", "300m")
	t.Run("the host accepts a resize and the member pod follows in place", func(t *testing.T) {
		if err := resize(grown); err != nil {
			t.Fatalf("host refused the resize of a pod on a leaf: %v", err)
		}
		start := time.Now()
		harness.Eventually(t, 30*time.Second, "member pod resized", func() error {
			got, err := memberResources()
			if err != nil {
				return err
			}
			if !equality.Semantic.DeepEqual(got, grown) {
				return fmt.Errorf("member pod resources %v", got)
			}
			return nil
		})
		t.Logf("member pod resized %s after the host's resize", time.Since(start).Round(time.Millisecond))
	})

	t.Run("a resize the member refuses is a Warning Event; the member pod stays", func(t *testing.T) {
		// The member runs no quota controller: its status, what quota
		// admission reads, is written here as that controller would.
		hard := corev1.ResourceList{corev1.ResourceLimitsCPU: resource.MustParse("400m")}
		q, err := mc.CoreV1().ResourceQuotas(appsNS).Create(ctx, &corev1.ResourceQuota{
			ObjectMeta: metav1.ObjectMeta{Name: "cpu", Namespace: appsNS},
			Spec:       corev1.ResourceQuotaSpec{Hard: hard},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		q.Status = corev1.ResourceQuotaStatus{Hard: hard, Used: corev1.ResourceList{corev1.ResourceLimitsCPU: resource.MustParse("300m")}}
		if _, err := mc.CoreV1().ResourceQuotas(appsNS).UpdateStatus(ctx, q, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := resize(cpuResources("500m", "800m")); err != nil {
			t.Fatalf("host refused the resize: %v", err)
		}
		harness.Eventually(t, 30*time.Second, "a MemberResizeRefused Event on the host pod", func() error {
			msg, ok := hostEvents(t, f, "MemberResizeRefused")[name]
			if !ok {
				return fmt.Errorf("no Event")
			}
			if !strings.Contains(msg, "exceeded quota") {
				return fmt.Errorf("Event %q does not carry the member's message", msg)
			}
			return nil
		})
		got, err := memberResources()
		if err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(got, grown) {
			t.Errorf("member pod resources %v after a refused resize, want %v", got, grown)
		}
		hp, err := hc.CoreV1().Pods(appsNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !podReady(hp) || hp.DeletionTimestamp != nil {
			t.Errorf("host pod no longer running: phase %s, deleting %v", hp.Status.Phase, hp.DeletionTimestamp)
		}
	})
}

// reportResources writes, on the member pod's running containers, the
// status resources a kubelet with in-place resize reports (kwok does not).
func reportResources(t *testing.T, mc kubernetes.Interface, name string) {
	t.Helper()
	ctx := context.Background()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		mp, err := mc.CoreV1().Pods(appsNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for i := range mp.Status.ContainerStatuses {
			cs := &mp.Status.ContainerStatuses[i]
			for _, c := range mp.Spec.Containers {
				if c.Name == cs.Name {
					cs.Resources = c.Resources.DeepCopy()
					cs.AllocatedResources = c.Resources.Requests.DeepCopy()
				}
			}
		}
		_, err = mc.CoreV1().Pods(appsNS).UpdateStatus(ctx, mp, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
}
