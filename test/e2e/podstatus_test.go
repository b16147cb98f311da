//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"

	"github.com/leafsync/leafsync/test/harness"
)

// leafInternalIP is the leaf's first InternalIP ("" when it has none): the
// host IP a kubelet on the leaf would give its pods.
func leafInternalIP(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}

// TestPodStatusTruth: the host pod's status says what a kubelet on the
// leaf would. A pod with a readiness gate is never Ready in the host (over
// every watched version) until its gate condition is True on the host
// pod, although its member pod is Ready; its host IP is the leaf's
// address, not the member node's; and conditions written on the host pod
// by others survive the status mirrors that follow.
func TestPodStatusTruth(t *testing.T) {
	const (
		leaf  = "leaf-member-a"
		gate  = corev1.PodConditionType("example.com/lb-ready")
		audit = corev1.PodConditionType("example.com/audited")
		name  = "gated"
	)
	ctx := context.Background()
	f := newPodSyncFleet(t, "member-a")
	hc, mc := f.host.Client(), f.members["member-a"].Client()
	port, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	// The kubelet API gives the leaf an address (leafsync's, 127.0.0.1).
	cfg := testConfig + fmt.Sprintf("kubeletAPI:\n  enabled: true\n  port: %d\n  advertiseAddress: 127.0.0.1\n", port)
	if err := os.WriteFile(f.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	f.startLeafsync(t, "leafsync")
	f.register(t, "member-a", nil)
	f.waitLeafReady(t, leaf, time.Minute)
	harness.Eventually(t, 30*time.Second, "the leaf has an address", func() error {
		if leafInternalIP(f.node(t, leaf)) == "" {
			return fmt.Errorf("addresses %v", f.node(t, leaf).Status.Addresses)
		}
		return nil
	})
	leafIP := leafInternalIP(f.node(t, leaf))

	// Every version of the host pod, from before its creation.
	w, err := hc.CoreV1().Pods(appsNS).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu         sync.Mutex
		violations []string
		versions   int
	)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			mu.Lock()
			versions++
			if g := podCondition(p, gate); podReady(p) && (g == nil || g.Status != corev1.ConditionTrue) {
				violations = append(violations, fmt.Sprintf("rv %s Ready with gate %+v", p.ResourceVersion, g))
			}
			mu.Unlock()
		}
	}()

	tmpl := leafWorkload(name, 1, leaf).PodTemplate()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: appsNS, Labels: tmpl.Labels}, Spec: tmpl.Spec}
	pod.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: gate}}
	if _, err := hc.CoreV1().Pods(appsNS).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var hp *corev1.Pod
	harness.Eventually(t, 90*time.Second, "the member pod is Ready and the host pod mirrors it", func() error {
		mp, err := mc.CoreV1().Pods(appsNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !podReady(mp) {
			return fmt.Errorf("member pod not Ready")
		}
		if hp, err = hc.CoreV1().Pods(appsNS).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return err
		}
		if c := podCondition(hp, corev1.ContainersReady); hp.Status.Phase != corev1.PodRunning || c == nil || c.Status != corev1.ConditionTrue {
			return fmt.Errorf("host pod %s, ContainersReady %+v", hp.Status.Phase, c)
		}
		return nil
	})
	if c := podCondition(hp, corev1.PodReady); c == nil || c.Status != corev1.ConditionFalse || c.Reason != "ReadinessGatesNotReady" {
		t.Errorf("host pod Ready %+v with its gate unset, want False/ReadinessGatesNotReady", c)
	}
	if hp.Status.HostIP != leafIP || len(hp.Status.HostIPs) != 1 || hp.Status.HostIPs[0].IP != leafIP {
		t.Errorf("host pod hostIP %q hostIPs %v, want the leaf's %s", hp.Status.HostIP, hp.Status.HostIPs, leafIP)
	}

	// Others write conditions on the host pod: an audit mark, then the gate.
	setCondition := func(c corev1.PodCondition) {
		t.Helper()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			p, err := hc.CoreV1().Pods(appsNS).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			c.LastTransitionTime = metav1.Now()
			p.Status.Conditions = append(p.Status.Conditions, c)
			_, err = hc.CoreV1().Pods(appsNS).UpdateStatus(ctx, p, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	setCondition(corev1.PodCondition{Type: audit, Status: corev1.ConditionTrue, Reason: "Audited"})
	time.Sleep(2 * time.Second) // the gate's absence holds a while longer
	mu.Lock()
	if len(violations) > 0 {
		t.Errorf("host pod Ready before its gate was set: %v", violations)
	}
	mu.Unlock()
	setCondition(corev1.PodCondition{Type: gate, Status: corev1.ConditionTrue, Reason: "LoadBalancerReady"})
	gateSet := time.Now()
	harness.Eventually(t, 30*time.Second, "the host pod turns Ready once its gate is True", func() error {
		p, err := hc.CoreV1().Pods(appsNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !podReady(p) {
			return fmt.Errorf("Ready %+v", podCondition(p, corev1.PodReady))
		}
		return nil
	})
	t.Logf("host pod Ready %s after its gate was set", time.Since(gateSet).Round(time.Millisecond))

	// The member reports new status (a condition of its own): leafsync
	// mirrors it, and the host's own conditions stay.
	mp, err := mc.CoreV1().Pods(appsNS).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mp.Status.Conditions = append(mp.Status.Conditions, corev1.PodCondition{Type: "example.com/member-side", Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()})
	if _, err := mc.CoreV1().Pods(appsNS).UpdateStatus(ctx, mp, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 30*time.Second, "the member's new condition is mirrored", func() error {
		p, err := hc.CoreV1().Pods(appsNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if podCondition(p, "example.com/member-side") == nil {
			return fmt.Errorf("conditions %v", p.Status.Conditions)
		}
		hp = p
		return nil
	})
	time.Sleep(2 * podSyncResync) // and the resyncs after it
	hp, err = hc.CoreV1().Pods(appsNS).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []corev1.PodConditionType{audit, gate} {
		if c := podCondition(hp, want); c == nil || c.Status != corev1.ConditionTrue {
			t.Errorf("host condition %s is %+v after the status mirrors, want the True written on the host", want, c)
		}
	}
	if !podReady(hp) {
		t.Errorf("host pod not Ready after the mirrors: %+v", podCondition(hp, corev1.PodReady))
	}
	w.Stop()
	<-watched
	mu.Lock()
	defer mu.Unlock()
	if len(violations) > 0 {
		t.Errorf("host pod Ready while its gate was not True: %v", violations)
	}
	t.Logf("%d versions of the host pod watched", versions)
}
