package guard

import (
	"context"
	"fmt"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Ensure creates the policy and its binding, or updates them when their
// spec differs from this version's. It returns what it did ("created",
// "updated", "unchanged" for each object). An error that is Forbidden
// means leafsync lacks the rights: the caller says so, and runs unguarded.
func Ensure(ctx context.Context, c kubernetes.Interface, identities []string, namespace string) ([]string, error) {
	api := c.AdmissionregistrationV1()
	p, err := ensure(ctx, api.ValidatingAdmissionPolicies(), Policy(identities),
		func(o *admissionv1.ValidatingAdmissionPolicy) *admissionv1.ValidatingAdmissionPolicySpec {
			return &o.Spec
		})
	if err != nil {
		return nil, fmt.Errorf("ValidatingAdmissionPolicy %s: %w", Name, err)
	}
	done := []string{"policy " + p}
	b, err := ensure(ctx, api.ValidatingAdmissionPolicyBindings(), Binding(namespace),
		func(o *admissionv1.ValidatingAdmissionPolicyBinding) *admissionv1.ValidatingAdmissionPolicyBindingSpec {
			return &o.Spec
		})
	if err != nil {
		return done, fmt.Errorf("ValidatingAdmissionPolicyBinding %s: %w", Name, err)
	}
	return append(done, "binding "+b), nil
}

// objects is what ensure needs of a typed client of cluster-scoped objects.
type objects[T any] interface {
	Get(ctx context.Context, name string, o metav1.GetOptions) (*T, error)
	Create(ctx context.Context, obj *T, o metav1.CreateOptions) (*T, error)
	Update(ctx context.Context, obj *T, o metav1.UpdateOptions) (*T, error)
}

// ensure gets want's object by name, then creates it, or updates the
// current one with want's spec when that differs (fields the server
// defaults do not count as a difference).
func ensure[T any, S any, PT interface {
	*T
	metav1.Object
}](ctx context.Context, c objects[T], want PT, spec func(*T) *S) (string, error) {
	cur, err := c.Get(ctx, want.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if _, err := c.Create(ctx, want, metav1.CreateOptions{}); err != nil {
			return "", err
		}
		return "created", nil
	case err != nil:
		return "", err
	}
	if equality.Semantic.DeepDerivative(*spec(want), *spec(cur)) {
		return "unchanged", nil
	}
	*spec(cur) = *spec(want)
	if _, err := c.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return "", err
	}
	return "updated", nil
}
