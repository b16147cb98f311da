package verify

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/leafsync/leafsync/internal/syncer/clusters"
	"github.com/leafsync/leafsync/internal/syncer/registration"
)

// After a restart a leaf stays untainted only if its Secret records a pass
// for the same credentials and identity; anything else starts pending.
func TestRestartTrustsOnlyTheSameCredentials(t *testing.T) {
	key := types.NamespacedName{Namespace: "leafsync-system", Name: "member-eu-1"}
	member := func(hash string) clusters.Member {
		return clusters.Member{Spec: &registration.Spec{Cluster: "eu-1", Secret: key, ConnectionHash: hash}}
	}
	cases := []struct {
		name        string
		annotations map[string]string
		hash        string
		want        string
	}{
		{"verified for these credentials", map[string]string{
			registration.AnnotationMemberIdentity: "uid-1", registration.AnnotationVerified: "true",
			registration.AnnotationVerifiedFor: fingerprint("h1", "uid-1")}, "h1", ""},
		{"verified for other credentials", map[string]string{
			registration.AnnotationMemberIdentity: "uid-1", registration.AnnotationVerified: "true",
			registration.AnnotationVerifiedFor: fingerprint("h0", "uid-1")}, "h1", "pending"},
		{"verified for another member", map[string]string{
			registration.AnnotationMemberIdentity: "uid-2", registration.AnnotationVerified: "true",
			registration.AnnotationVerifiedFor: fingerprint("h1", "uid-1")}, "h1", "pending"},
		{"failed for these credentials", map[string]string{
			registration.AnnotationMemberIdentity: "uid-1", registration.AnnotationVerified: "false",
			registration.AnnotationVerifiedFor: fingerprint("h1", "uid-1")}, "h1", "pending"},
		{"never verified", nil, "h1", "pending"},
	}
	for _, tc := range cases {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Annotations: tc.annotations}}
		c := New(Options{Secrets: fake.NewClientBuilder().WithObjects(s).Build()})
		if got := c.Unverified(member(tc.hash)); got != tc.want {
			t.Errorf("%s: taint %q, want %q", tc.name, got, tc.want)
		}
	}
}

// A change of credentials taints a verified leaf at once, and tells the
// leaves.
func TestCredentialChangeTaintsAtOnce(t *testing.T) {
	key := types.NamespacedName{Namespace: "leafsync-system", Name: "member-eu-1"}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Annotations: map[string]string{
		registration.AnnotationMemberIdentity: "uid-1", registration.AnnotationVerified: "true",
		registration.AnnotationVerifiedFor: fingerprint("h1", "uid-1")}}}
	var told []string
	c := New(Options{Secrets: fake.NewClientBuilder().WithObjects(s).Build(), OnChange: func(cluster string) { told = append(told, cluster) }})
	m := clusters.Member{Spec: &registration.Spec{Cluster: "eu-1", Secret: key, ConnectionHash: "h1"}}
	c.Engage(t.Context(), m)
	if got := c.Unverified(m); got != "" || len(told) != 0 {
		t.Fatalf("same credentials: taint %q, leaves told %v", got, told)
	}
	m.Spec = &registration.Spec{Cluster: "eu-1", Secret: key, ConnectionHash: "h2"}
	c.Engage(t.Context(), m)
	if got := c.Unverified(m); got != "pending" || len(told) != 1 {
		t.Fatalf("new credentials: taint %q, leaves told %v; want pending, told once", got, told)
	}
}
