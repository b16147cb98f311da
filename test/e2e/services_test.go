//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
	"github.com/leafsync/leafsync/test/harness"
)

// TestServicesReflected: the host Services of a pod's namespace are in its
// member namespace before the member pod is created (so the member's
// kubelet injects their environment variables):
//   - in the member's watch, each copy is added at a lower resourceVersion
//     than the pod; a ClusterIP Service is a ClusterIP copy with the
//     member's own clusterIP, a headless one stays headless, an
//     ExternalName Service is not copied;
//   - a port added in the host reaches the copy, a host Service deleted
//     goes from the member, within a resync;
//   - a member Service leafsync did not create, of a host Service's name:
//     a new pod is not run (MemberObjectConflict), the member's Service is
//     unchanged;
//   - after the last pod, the copies go; the member's own Service stays.
func TestServicesReflected(t *testing.T) {
	f := newPodSyncFleet(t, "member-a")
	member := f.members["member-a"]
	hc, mc := f.host.Client(), member.Client()
	ctx := context.Background()
	const leaf = "leaf-member-a"
	f.startLeafsync(t, "leafsync")
	f.register(t, "member-a", nil)
	f.waitLeafReady(t, leaf, time.Minute)

	port := func(name string, p int32) corev1.ServicePort {
		return corev1.ServicePort{Name: name, Protocol: corev1.ProtocolTCP, Port: p, TargetPort: intstr.FromInt32(8080)}
	}
	hostSvcs := map[string]*corev1.Service{}
	for _, s := range []*corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Name: "api", Labels: map[string]string{"tier": "api"}},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{port("http", 80)}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "api-peers"},
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{port("peer", 7000)}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "mail"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "mail.example.com"}},
	} {
		out, err := hc.CoreV1().Services(appsNS).Create(ctx, s, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		hostSvcs[s.Name] = out
	}

	svcAdded := watchAdded(t, member.Cluster, func(ctx context.Context, c kubernetes.Interface, o metav1.ListOptions) (watch.Interface, error) {
		return c.CoreV1().Services(appsNS).Watch(ctx, o)
	})
	podAdded := watchAdded(t, member.Cluster, func(ctx context.Context, c kubernetes.Interface, o metav1.ListOptions) (watch.Interface, error) {
		return c.CoreV1().Pods(appsNS).Watch(ctx, o)
	})
	web := leafWorkload("web", 1, leaf)
	if _, err := hc.AppsV1().Deployments(appsNS).Create(ctx, web.Deployment(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := waitHostPodsReady(t, f, "app=web", 1, 90*time.Second, leaf)

	t.Run("the Services are in the member before the pod", func(t *testing.T) {
		podRV, ok := podAdded(pods[0].Name)
		if !ok {
			t.Fatalf("member pod %s never seen added", pods[0].Name)
		}
		for _, name := range []string{"api", "api-peers"} {
			rv, ok := svcAdded(name)
			if !ok {
				t.Errorf("member Service %s never added", name)
			} else if rv >= podRV {
				t.Errorf("member Service %s added at resourceVersion %d, the pod at %d: after it", name, rv, podRV)
			}
		}
		api, err := mc.CoreV1().Services(appsNS).Get(ctx, "api", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if api.Spec.Type != corev1.ServiceTypeClusterIP || api.Spec.ClusterIP == "" || api.Spec.ClusterIP == corev1.ClusterIPNone ||
			api.Spec.Selector["app"] != "web" || len(api.Spec.Ports) != 1 || api.Spec.Ports[0].Port != 80 {
			t.Errorf("member Service api: %+v", api.Spec)
		}
		if api.Labels[podmeta.LabelManaged] != "true" || api.Labels[podmeta.LabelHostUID] != string(hostSvcs["api"].UID) || api.Labels["tier"] != "api" {
			t.Errorf("member Service api labels %v", api.Labels)
		}
		peers, err := mc.CoreV1().Services(appsNS).Get(ctx, "api-peers", metav1.GetOptions{})
		if err != nil || peers.Spec.ClusterIP != corev1.ClusterIPNone {
			t.Errorf("member Service api-peers: %v, want headless", err)
		}
		if _, err := mc.CoreV1().Services(appsNS).Get(ctx, "mail", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("ExternalName Service mail in the member: %v, want not found", err)
		}
	})

	t.Run("host changes follow within a resync", func(t *testing.T) {
		api, err := hc.CoreV1().Services(appsNS).Get(ctx, "api", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		api.Spec.Ports = append(api.Spec.Ports, port("metrics", 9090))
		if _, err := hc.CoreV1().Services(appsNS).Update(ctx, api, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := hc.CoreV1().Services(appsNS).Delete(ctx, "api-peers", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		changed := time.Now()
		harness.Eventually(t, 2*podSyncResync+5*time.Second, "the port in the member, api-peers gone", func() error {
			m, err := mc.CoreV1().Services(appsNS).Get(ctx, "api", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if len(m.Spec.Ports) != 2 {
				return fmt.Errorf("member Service api ports %v", m.Spec.Ports)
			}
			if _, err := mc.CoreV1().Services(appsNS).Get(ctx, "api-peers", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("member Service api-peers still there (%v)", err)
			}
			return nil
		})
		t.Logf("a port added and a Service deleted in the host: in the member %s later (resync %s)", time.Since(changed).Round(time.Millisecond), podSyncResync)
	})

	t.Run("a member Service leafsync did not create refuses the pod", func(t *testing.T) {
		own, err := mc.CoreV1().Services(appsNS).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "db"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{port("sql", 5432)}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := hc.CoreV1().Services(appsNS).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "db"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{port("sql", 5432)}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tmpl := leafWorkload("late", 1, leaf).PodTemplate()
		late := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "late", Namespace: appsNS, Labels: tmpl.Labels}, Spec: tmpl.Spec}
		if _, err := hc.CoreV1().Pods(appsNS).Create(ctx, late, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, 30*time.Second, "a MemberObjectConflict Event on apps/late", func() error {
			note := hostEvents(t, f, "MemberObjectConflict")["late"]
			for _, want := range []string{"Service apps/db", "member-a", "did not create"} {
				if !strings.Contains(note, want) {
					return fmt.Errorf("Event %q does not say %q", note, want)
				}
			}
			return nil
		})
		if p, err := mc.CoreV1().Pods(appsNS).Get(ctx, "late", metav1.GetOptions{}); err == nil {
			t.Errorf("member pod apps/late created (uid %s)", p.UID)
		}
		if s, err := mc.CoreV1().Services(appsNS).Get(ctx, "db", metav1.GetOptions{}); err != nil || s.ResourceVersion != own.ResourceVersion {
			t.Errorf("the member's Service db changed: %v", err)
		}
		if err := hc.CoreV1().Pods(appsNS).Delete(ctx, "late", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("the copies go after the last pod", func(t *testing.T) {
		if err := hc.AppsV1().Deployments(appsNS).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		gone := time.Now()
		harness.Eventually(t, 60*time.Second, "member Service api deleted", func() error {
			if _, err := mc.CoreV1().Services(appsNS).Get(ctx, "api", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there (%v)", err)
			}
			return nil
		})
		t.Logf("member Service api deleted %s after the Deployment", time.Since(gone).Round(time.Millisecond))
		if _, err := mc.CoreV1().Services(appsNS).Get(ctx, "db", metav1.GetOptions{}); err != nil {
			t.Errorf("the member's own Service db: %v", err)
		}
	})
}

// watchAdded watches the member from now (watchFrom: re-watched, no event
// missed), and returns a lookup of the resourceVersion at which an object
// of that name was first added.
func watchAdded(t *testing.T, c *harness.Cluster, open func(context.Context, kubernetes.Interface, metav1.ListOptions) (watch.Interface, error)) func(name string) (int64, bool) {
	t.Helper()
	cfg := c.RESTConfig()
	cfg.Timeout = 0
	cs := kubernetes.NewForConfigOrDie(cfg)
	// Any list gives the store's current resourceVersion to watch from.
	now, err := cs.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	added := map[string]int64{}
	var watchErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		watchFrom(ctx, now.ResourceVersion, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return open(ctx, cs, o) },
			func(ev watch.Event) {
				o, ok := ev.Object.(metav1.Object)
				if !ok || ev.Type != watch.Added {
					return
				}
				rv, err := strconv.ParseInt(o.GetResourceVersion(), 10, 64)
				mu.Lock()
				defer mu.Unlock()
				if _, seen := added[o.GetName()]; !seen && err == nil {
					added[o.GetName()] = rv
				}
			},
			func(err error) { mu.Lock(); watchErr = err; mu.Unlock() })
	}()
	t.Cleanup(func() { cancel(); <-done })
	return func(name string) (int64, bool) {
		mu.Lock()
		defer mu.Unlock()
		if watchErr != nil {
			t.Errorf("member watch: %v", watchErr)
		}
		rv, ok := added[name]
		return rv, ok
	}
}
