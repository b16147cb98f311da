//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/leafsync/leafsync/test/harness"
)

// TestServiceDNSRealNode: a Deployment `web` calls the Service `api` of its
// namespace, both on one leaf whose member runs a real kubelet node with
// the member's own cluster DNS (the harness's CoreDNS). The host's Service
// is reflected into the member, the member's endpoints controller lists
// the member's api pods, and web resolves `api` by its short name and
// connects to it; the kubelet gave web the Service's environment variables
// (#30).
func TestServiceDNSRealNode(t *testing.T) {
	agnhost := filepath.Join(filepath.Dir(harness.Bin(t, "e2e.test")), "conformance-images", "agnhost-2-63-0.tar")
	agnhostRef, err := harness.ImageRef(agnhost)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	network := harness.StartNodeNetwork(t)
	host := harness.StartCluster(t, harness.ClusterOptions{Name: "host", Controllers: harness.HostControllers, Scheduler: true})
	// The member runs its endpointslice controller, as every cluster does:
	// the Service copy's endpoints are the member's.
	member := harness.StartCluster(t, harness.ClusterOptions{
		Name: "member", Controllers: append(slices.Clone(harness.MemberControllers), "nodelifecycle", "endpointslice"), Scheduler: true, KubeletClientCert: true, Address: network.Gateway,
	})
	harness.StartNode(t, member, harness.NodeOptions{Name: "member-node", Network: network, Images: []string{agnhost}})
	hc, mc := host.Client(), member.Client()
	if err := host.EnsureNamespace(ctx, appsNS); err != nil {
		t.Fatal(err)
	}
	serveMember(t, host, member, testConfig, nil)
	const leaf = realNodeLeaf

	if _, err := hc.CoreV1().Services(appsNS).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "api"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "api"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// web prints its environment once, then connects to api:80 by the
	// Service's short name every 2 seconds. agnhost's Go resolver, not the
	// image's static busybox: its wget crashes here (exit 139).
	webScript := `env; while true; do /agnhost connect api:80 --timeout=3s && echo "connected to api:80"; sleep 2; done`
	for _, d := range []*appsv1.Deployment{
		onLeaf("api", leaf, agnhostRef, nil, []string{"netexec", "--http-port=8080"}),
		onLeaf("web", leaf, agnhostRef, []string{"sh", "-c", webScript}, nil),
	} {
		if _, err := hc.AppsV1().Deployments(appsNS).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	created := time.Now()

	var log string
	harness.Eventually(t, 4*time.Minute, "web connected to api through the Service's short name", func() error {
		pods, err := mc.CoreV1().Pods(appsNS).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return err
		}
		if len(pods.Items) != 1 || pods.Items[0].Status.Phase != corev1.PodRunning {
			return fmt.Errorf("%d member pods of web, none running yet", len(pods.Items))
		}
		out, err := mc.CoreV1().Pods(appsNS).GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			return err
		}
		if log = string(out); !strings.Contains(log, "connected to api:80\n") {
			return fmt.Errorf("web not connected yet; its log ends %q", tail(log, 200))
		}
		return nil
	})
	t.Logf("web connected to api %s after the Deployments' creation", time.Since(created).Round(time.Second))
	svc, err := mc.CoreV1().Services(appsNS).Get(ctx, "api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"API_SERVICE_HOST=" + svc.Spec.ClusterIP + "\n", "API_SERVICE_PORT=80\n", "API_SERVICE_PORT_HTTP=80\n"} {
		if !strings.Contains(log, want) {
			t.Errorf("web's environment lacks %q (the kubelet injects it for the member's Service api)", strings.TrimSpace(want))
		}
	}
}

// onLeaf is a Deployment of one pod of image on the leaf, labelled app=name.
func onLeaf(name, leaf, image string, command, args []string) *appsv1.Deployment {
	w := leafWorkload(name, 1, leaf)
	w.Image = image
	d := w.Deployment()
	c := &d.Spec.Template.Spec.Containers[0]
	c.ImagePullPolicy, c.Command, c.Args = corev1.PullIfNotPresent, command, args
	return d
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
