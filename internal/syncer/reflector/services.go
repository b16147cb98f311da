package reflector

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	acorev1 "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
)

// Services: the member copy of a host Service is a Service of the same
// name, ports and selector, of type ClusterIP; a headless Service stays
// headless, any other gets a clusterIP of the member's own (a host
// clusterIP means nothing in the member). A NodePort or LoadBalancer
// Service is copied as ClusterIP: node ports and load balancers of the
// member are its owner's, never allocated for the host. An ExternalName
// Service is not copied (podsync does not ask for it): a kubelet injects
// no environment for it.
//
// The selector is the host's: the member pods leafsync creates carry their
// host pod's labels, so the member's endpoints controller makes the
// Service's EndpointSlices from the pods of this Service that run in this
// member, and in-member clients reach in-member backends by the Service's
// name. Endpoints in the host or in other members are not reachable
// through the copy (#30: that needs a network between clusters).
type services struct {
	calls[*corev1.Service, *corev1.ServiceList, *acorev1.ServiceApplyConfiguration]
}

var serviceCalls = calls[*corev1.Service, *corev1.ServiceList, *acorev1.ServiceApplyConfiguration]{
	api: func(c kubernetes.Interface, ns string) api[*corev1.Service, *corev1.ServiceList, *acorev1.ServiceApplyConfiguration] {
		return c.CoreV1().Services(ns)
	},
	items: func(l *corev1.ServiceList) []metav1.Object { return itemsOf(l.Items) },
	applyConfig: func(s *corev1.Service, rv string) *acorev1.ServiceApplyConfiguration {
		spec := acorev1.ServiceSpec().WithType(s.Spec.Type).WithSelector(s.Spec.Selector).
			WithPublishNotReadyAddresses(s.Spec.PublishNotReadyAddresses)
		if s.Spec.ClusterIP == corev1.ClusterIPNone {
			spec.WithClusterIP(corev1.ClusterIPNone)
		}
		for _, p := range s.Spec.Ports {
			port := acorev1.ServicePort().WithName(p.Name).WithProtocol(p.Protocol).WithPort(p.Port).WithTargetPort(p.TargetPort)
			if p.AppProtocol != nil {
				port.WithAppProtocol(*p.AppProtocol)
			}
			spec.WithPorts(port)
		}
		return acorev1.Service(s.Name, s.Namespace).WithLabels(s.Labels).WithAnnotations(s.Annotations).
			WithResourceVersion(rv).WithSpec(spec)
	},
}

func (services) Name() string { return "Service" }

func (services) copyOf(o metav1.Object, meta metav1.ObjectMeta) (metav1.Object, string) {
	return &corev1.Service{ObjectMeta: meta, Spec: serviceSpecOf(o.(*corev1.Service))}, ""
}

// serviceSpecOf is the spec of the member copy of host Service s.
func serviceSpecOf(s *corev1.Service) corev1.ServiceSpec {
	spec := corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Selector: s.Spec.Selector,
		PublishNotReadyAddresses: s.Spec.PublishNotReadyAddresses}
	if s.Spec.ClusterIP == corev1.ClusterIPNone {
		spec.ClusterIP = corev1.ClusterIPNone
	}
	for _, p := range s.Spec.Ports {
		spec.Ports = append(spec.Ports, corev1.ServicePort{Name: p.Name, Protocol: p.Protocol, Port: p.Port,
			TargetPort: p.TargetPort, AppProtocol: p.AppProtocol})
	}
	return spec
}

// sameContents compares what the copy takes from the host; the member
// assigns the rest (its clusterIP, defaults).
func (services) sameContents(cur, want metav1.Object) bool {
	c, w := cur.(*corev1.Service), want.(*corev1.Service)
	return c.Spec.Type == w.Spec.Type && headless(c) == headless(w) &&
		semanticEqual(c.Spec.Selector, w.Spec.Selector) &&
		c.Spec.PublishNotReadyAddresses == w.Spec.PublishNotReadyAddresses &&
		semanticEqual(serviceSpecOf(c).Ports, w.Spec.Ports)
}

// updatable: a clusterIP is immutable, so a Service that turns headless,
// or stops being so, is replaced.
func (services) updatable(cur, want metav1.Object) bool {
	return headless(cur.(*corev1.Service)) == headless(want.(*corev1.Service))
}

func headless(s *corev1.Service) bool { return s.Spec.ClusterIP == corev1.ClusterIPNone }
