//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leafsync/leafsync/test/harness"
)

// auditSA records the requests of the pod's host ServiceAccount: who the
// host's API server took them for.
const auditSA = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  users: ["system:serviceaccount:apps:builder"]
- level: None
`

// TestHostTokenRealNode: a pod on a leaf whose member runs a real kubelet
// node (containerd) runs an in-cluster client (agnhost inclusterclient:
// rest.InClusterConfig, so KUBERNETES_SERVICE_HOST/PORT, the mounted token
// and ca.crt, TLS verified) that calls the API server every second; the
// host's API server answers it, and its audit log shows the requests
// authenticated as system:serviceaccount:apps:builder: the pod runs as its
// host ServiceAccount from the member's node (#30).
func TestHostTokenRealNode(t *testing.T) {
	archive := filepath.Join(filepath.Dir(harness.Bin(t, "e2e.test")), "conformance-images", "agnhost-2-63-0.tar")
	image, err := harness.ImageRef(archive)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	network := harness.StartNodeNetwork(t)
	host := harness.StartCluster(t, harness.ClusterOptions{Name: "host", Controllers: harness.HostControllers, Scheduler: true, Address: network.Gateway,
		Audit: true, AuditPolicy: auditSA})
	member := harness.StartCluster(t, harness.ClusterOptions{
		Name: "member", Controllers: append(harness.MemberControllers, "nodelifecycle"), Scheduler: true, KubeletClientCert: true, Address: network.Gateway,
	})
	harness.StartNode(t, member, harness.NodeOptions{Name: "member-node", Network: network, Images: []string{archive}})
	if err := host.EnsureNamespace(ctx, appsNS); err != nil {
		t.Fatal(err)
	}
	// The pod is bound to the leaf by name: its taints do not matter.
	serveMember(t, host, member, `
hysteresis: {probeInterval: 1s, cordonAfter: 2s, notReadyAfter: 10s, readyAfter: 4s, window: 60s}
leaves: {leaseRenewInterval: 1s, leaseDuration: 40s, leaseRenewTimeout: 8s}
members: {probeTimeout: 1s}
verification: {retryMin: 1s, retryMax: 2s, canary: false}
`, nil, "--host-api-server="+host.Addr())

	hc := host.Client()
	if _, err := hc.CoreV1().ServiceAccounts(appsNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "builder"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "whoami", Namespace: appsNS}, Spec: corev1.PodSpec{
		NodeName: "leaf-member", ServiceAccountName: "builder", TerminationGracePeriodSeconds: new(int64),
		Containers: []corev1.Container{{Name: "client", Image: image, ImagePullPolicy: corev1.PullIfNotPresent, Args: []string{"inclusterclient", "--poll-interval=1"}}},
	}}
	harness.Eventually(t, time.Minute, "the host ServiceAccount's token in the namespace", func() error {
		_, err := hc.CoreV1().Pods(appsNS).Create(ctx, pod, metav1.CreateOptions{}) // the admission needs the ServiceAccount in its cache
		return err
	})
	created := time.Now()
	var answered []harness.AuditEvent
	harness.Eventually(t, 3*time.Minute, "requests of system:serviceaccount:apps:builder answered by the host", func() error {
		evs, err := host.AuditEvents(func(e harness.AuditEvent) bool {
			return e.User.Username == "system:serviceaccount:apps:builder" && e.ResponseStatus.Code == 200
		})
		if err != nil {
			return err
		}
		if answered = evs; len(evs) < 2 {
			return fmt.Errorf("%d answered", len(evs))
		}
		return nil
	})
	t.Logf("the pod's first request answered %s after its creation (%s %s from %v, %q)", answered[0].RequestReceived.Sub(created).Round(time.Millisecond),
		answered[0].Verb, answered[0].User.Username, answered[0].SourceIPs, answered[0].UserAgent)
	// Whom the member's pod talks to: the host's address, from the Secret.
	mp, err := member.Client().CoreV1().Pods(appsNS).Get(ctx, "whoami", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if mp.Status.Phase != corev1.PodRunning || len(mp.Status.ContainerStatuses) != 1 || mp.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("member pod %s, statuses %+v: want Running, never restarted (the client exits without a token or the address)", mp.Status.Phase, mp.Status.ContainerStatuses)
	}
	if err := hc.CoreV1().Pods(appsNS).Delete(ctx, "whoami", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}
