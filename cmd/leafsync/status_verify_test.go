package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/leafsync/leafsync/internal/syncer/registration"
)

// `leafsync status` says whether each member is verified, and why not.
func TestStatusShowsVerification(t *testing.T) {
	secret := func(name, cluster string, ann map[string]string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "leafsync-system",
			Labels: map[string]string{registration.LabelCluster: cluster}, Annotations: ann}}
	}
	host := fake.NewClientset(
		secret("member-a", "a", map[string]string{registration.AnnotationStatus: "Connected", registration.AnnotationVerified: "true"}),
		secret("member-b", "b", map[string]string{registration.AnnotationStatus: "Connected", registration.AnnotationVerified: "false",
			registration.AnnotationVerifyFailed: "rights: member credentials lack create pods in all namespaces"}),
		secret("member-c", "c", nil),
	)
	rows, err := statusReader{host: host, namespace: "leafsync-system"}.read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range rows {
		got[r.Cluster] = r.Verified + " " + r.VerifyFailed
	}
	if got["a"] != "true " || got["b"] != "false rights: member credentials lack create pods in all namespaces" || got["c"] != "- " {
		t.Fatalf("verification per member: %q", got)
	}
	var out bytes.Buffer
	if err := printStatus(&out, rows, ""); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "VERIFIED") || !strings.Contains(out.String(), "verification: rights: member credentials lack create pods") {
		t.Fatalf("the table does not say why b is not verified:\n%s", out.String())
	}
}
