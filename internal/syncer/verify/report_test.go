package verify

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/leafsync/leafsync/internal/syncer/clusters"
	"github.com/leafsync/leafsync/internal/syncer/registration"
)

// A pass read from a cache that has not yet seen the last failure's write
// still removes that failure from the Secret: the write says what to
// remove, it does not diff against what was read.
func TestPassRemovesAFailureTheReadMissed(t *testing.T) {
	key := types.NamespacedName{Namespace: "leafsync-system", Name: "member-eu-1"}
	api := fake.NewClientBuilder().WithObjects(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Namespace: key.Namespace, Name: key.Name, UID: "secret-uid", Annotations: map[string]string{
			registration.AnnotationVerified:     "false",
			registration.AnnotationVerifyFailed: "rights: member credentials lack create pods in all namespaces"}}}).Build()
	// The cache: the Secret as it was before the failure was written.
	lagging := interceptor.NewClient(api, interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, k client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if err := c.Get(ctx, k, obj, opts...); err != nil {
			return err
		}
		delete(obj.GetAnnotations(), registration.AnnotationVerified)
		delete(obj.GetAnnotations(), registration.AnnotationVerifyFailed)
		return nil
	}})
	c := New(Options{Secrets: lagging})
	m := clusters.Member{Spec: &registration.Spec{Cluster: "eu-1", Secret: key}}
	if err := c.report(t.Context(), &state{}, m, Verdict{Phase: Verified}, "fp"); err != nil {
		t.Fatal(err)
	}
	var s corev1.Secret
	if err := api.Get(t.Context(), key, &s); err != nil {
		t.Fatal(err)
	}
	a := s.Annotations
	if a[registration.AnnotationVerified] != "true" || a[registration.AnnotationVerifiedFor] != "fp" {
		t.Errorf("verified=%q for %q, want true for fp", a[registration.AnnotationVerified], a[registration.AnnotationVerifiedFor])
	}
	if f, ok := a[registration.AnnotationVerifyFailed]; ok {
		t.Errorf("verified, and still %s=%q", registration.AnnotationVerifyFailed, f)
	}
}
