package podsync

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leafsync/leafsync/internal/syncer/reflector"
)

// TestServiceRefs: every Service of the namespace is copied, never needed
// (a pod does not wait for one), except ExternalName Services and the host
// API server's default/kubernetes, whose member namesake is the member's.
func TestServiceRefs(t *testing.T) {
	svc := func(ns, name string, typ corev1.ServiceType) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{Type: typ}}
	}
	got := serviceRefs([]*corev1.Service{
		svc("default", "web", corev1.ServiceTypeClusterIP),
		svc("default", "kubernetes", corev1.ServiceTypeClusterIP),
		svc("default", "db", corev1.ServiceTypeNodePort),
		svc("default", "mail", corev1.ServiceTypeExternalName),
	})
	want := []reflector.Ref{{Kind: "Service", Name: "db", Optional: true}, {Kind: "Service", Name: "web", Optional: true}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("serviceRefs = %+v, want %+v", got, want)
	}
	if got := serviceRefs([]*corev1.Service{svc("apps", "kubernetes", corev1.ServiceTypeClusterIP)}); len(got) != 1 {
		t.Errorf("a Service named kubernetes outside default is the user's: %+v, want it copied", got)
	}
}
