package reflector

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func hostService(clusterIP string, typ corev1.ServiceType, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: "apps", UID: "svc-uid", ResourceVersion: "5", Labels: map[string]string{"app": "api"}},
		Spec:       corev1.ServiceSpec{Type: typ, ClusterIP: clusterIP, Selector: map[string]string{"app": "api"}, Ports: ports},
	}
}

func httpPort(port int32) corev1.ServicePort {
	return corev1.ServicePort{Name: "http", Protocol: corev1.ProtocolTCP, Port: port, TargetPort: intstr.FromInt32(8080)}
}

func wantedService(s *corev1.Service) *corev1.Service {
	meta := metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, Labels: copyLabels(string(s.UID), s.Labels),
		Annotations: map[string]string{AnnotationHostResourceVersion: s.ResourceVersion}}
	want, notCopied := services{}.copyOf(s, meta)
	if notCopied != "" {
		panic(notCopied)
	}
	return want.(*corev1.Service)
}

// asMemberMadeIt is the copy as the member's API server stores it: a
// clusterIP of its own, defaults filled in.
func asMemberMadeIt(s *corev1.Service) *corev1.Service {
	m := s.DeepCopy()
	if m.Spec.ClusterIP == "" {
		m.Spec.ClusterIP = "10.96.7.7"
	}
	m.Spec.ClusterIPs = []string{m.Spec.ClusterIP}
	m.Spec.SessionAffinity = corev1.ServiceAffinityNone
	return m
}

// TestServiceCopy: the member copy keeps the host's name, ports and
// selector, is a ClusterIP Service whose clusterIP the member assigns (a
// headless one stays headless), and takes no node port or load balancer
// of the member.
func TestServiceCopy(t *testing.T) {
	lb := hostService("10.0.0.9", corev1.ServiceTypeLoadBalancer, corev1.ServicePort{
		Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080), NodePort: 30080})
	got := wantedService(lb)
	if got.Spec.Type != corev1.ServiceTypeClusterIP || got.Spec.ClusterIP != "" || got.Spec.Ports[0].NodePort != 0 {
		t.Errorf("copy of a LoadBalancer Service: type %s, clusterIP %q, nodePort %d; want ClusterIP, none, 0",
			got.Spec.Type, got.Spec.ClusterIP, got.Spec.Ports[0].NodePort)
	}
	if got.Spec.Selector["app"] != "api" || got.Spec.Ports[0].Port != 80 || got.Spec.Ports[0].TargetPort.IntVal != 8080 {
		t.Errorf("copy lost the selector or ports: %+v", got.Spec)
	}
	if h := wantedService(hostService(corev1.ClusterIPNone, corev1.ServiceTypeClusterIP, httpPort(80))); h.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("copy of a headless Service has clusterIP %q, want None", h.Spec.ClusterIP)
	}
}

// TestPlanServiceCopy: a copy the member gave its own clusterIP is up to
// date; a host change of ports or selector updates it; turning headless
// (a clusterIP is immutable) replaces it.
func TestPlanServiceCopy(t *testing.T) {
	host := hostService("10.0.0.9", corev1.ServiceTypeClusterIP, httpPort(80))
	want := wantedService(host)
	cur := asMemberMadeIt(want)

	morePorts := host.DeepCopy()
	morePorts.ResourceVersion = "6"
	morePorts.Spec.Ports = append(morePorts.Spec.Ports, corev1.ServicePort{Name: "grpc", Protocol: corev1.ProtocolTCP, Port: 9090, TargetPort: intstr.FromInt32(9090)})
	reselected := host.DeepCopy()
	reselected.Spec.Selector = map[string]string{"app": "api", "tier": "v2"}
	nowHeadless := host.DeepCopy()
	nowHeadless.ResourceVersion = "7"
	nowHeadless.Spec.ClusterIP = corev1.ClusterIPNone
	nodePortInMember := cur.DeepCopy()
	nodePortInMember.Spec.Type = corev1.ServiceTypeNodePort
	nodePortInMember.Spec.Ports[0].NodePort = 31000
	foreign := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: "apps"}}

	for _, tc := range []struct {
		name  string
		cur   metav1.Object
		want  metav1.Object
		owned bool
		step  copyStep
	}{
		{"missing in the member", nil, want, true, copyCreate},
		{"up to date, with the member's clusterIP", cur, want, true, copyKeep},
		{"a port added in the host", cur, wantedService(morePorts), true, copyUpdate},
		{"the selector changed in the host", cur, wantedService(reselected), true, copyUpdate},
		{"made a NodePort in the member", nodePortInMember, want, true, copyUpdate},
		{"turned headless in the host", cur, wantedService(nowHeadless), true, copyReplace},
		{"the member's own Service of that name", foreign, want, false, copyRefuse},
		{"gone in the host", cur, nil, true, copyDelete},
	} {
		if got := planCopy(services{}, tc.cur, tc.want, tc.owned, false); got != tc.step {
			t.Errorf("%s: step %d, want %d", tc.name, got, tc.step)
		}
	}
}
