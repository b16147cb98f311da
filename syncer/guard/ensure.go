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
	var done []string
	p, err := ensure(ctx, Policy(identities),
		func(ctx context.Context) (*admissionv1.ValidatingAdmissionPolicy, error) {
			return api.ValidatingAdmissionPolicies().Get(ctx, Name, metav1.GetOptions{})
		},
		func(ctx context.Context, o *admissionv1.ValidatingAdmissionPolicy) error {
			_, err := api.ValidatingAdmissionPolicies().Create(ctx, o, metav1.CreateOptions{})
			return err
		},
		func(ctx context.Context, o *admissionv1.ValidatingAdmissionPolicy) error {
			_, err := api.ValidatingAdmissionPolicies().Update(ctx, o, metav1.UpdateOptions{})
			return err
		},
		func(cur, want *admissionv1.ValidatingAdmissionPolicy) bool {
			if equality.Semantic.DeepDerivative(want.Spec, cur.Spec) {
				return false
			}
			cur.Spec = want.Spec
			return true
		})
	if err != nil {
		return done, fmt.Errorf("ValidatingAdmissionPolicy %s: %w", Name, err)
	}
	done = append(done, "policy "+p)
	b, err := ensure(ctx, Binding(namespace),
		func(ctx context.Context) (*admissionv1.ValidatingAdmissionPolicyBinding, error) {
			return api.ValidatingAdmissionPolicyBindings().Get(ctx, Name, metav1.GetOptions{})
		},
		func(ctx context.Context, o *admissionv1.ValidatingAdmissionPolicyBinding) error {
			_, err := api.ValidatingAdmissionPolicyBindings().Create(ctx, o, metav1.CreateOptions{})
			return err
		},
		func(ctx context.Context, o *admissionv1.ValidatingAdmissionPolicyBinding) error {
			_, err := api.ValidatingAdmissionPolicyBindings().Update(ctx, o, metav1.UpdateOptions{})
			return err
		},
		func(cur, want *admissionv1.ValidatingAdmissionPolicyBinding) bool {
			if equality.Semantic.DeepDerivative(want.Spec, cur.Spec) {
				return false
			}
			cur.Spec = want.Spec
			return true
		})
	if err != nil {
		return done, fmt.Errorf("ValidatingAdmissionPolicyBinding %s: %w", Name, err)
	}
	return append(done, "binding "+b), nil
}

// ensure is get, then create or (if differs updates cur) update.
func ensure[T any](ctx context.Context, want *T,
	get func(context.Context) (*T, error),
	create, update func(context.Context, *T) error,
	differs func(cur, want *T) bool,
) (string, error) {
	cur, err := get(ctx)
	switch {
	case apierrors.IsNotFound(err):
		if err := create(ctx, want); err != nil {
			return "", err
		}
		return "created", nil
	case err != nil:
		return "", err
	}
	if !differs(cur, want) {
		return "unchanged", nil
	}
	if err := update(ctx, cur); err != nil {
		return "", err
	}
	return "updated", nil
}
