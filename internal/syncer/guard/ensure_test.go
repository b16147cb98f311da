package guard

import (
	"context"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestEnsure: the first call creates the policy and binding, the second
// finds them unchanged, and a spec changed by hand is put back.
func TestEnsure(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset()
	ids := []string{"system:serviceaccount:kube-system:node-controller"}
	step := func(want ...string) {
		t.Helper()
		got, err := Ensure(ctx, c, ids, "leafsync-system")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("Ensure did %q, want %q", got, want)
		}
	}
	step("policy created", "binding created")
	step("policy unchanged", "binding unchanged")

	api := c.AdmissionregistrationV1()
	b, err := api.ValidatingAdmissionPolicyBindings().Get(ctx, Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.Spec.ParamRef.Namespace = "elsewhere"
	if _, err := api.ValidatingAdmissionPolicyBindings().Update(ctx, b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	step("policy unchanged", "binding updated")
	b, err = api.ValidatingAdmissionPolicyBindings().Get(ctx, Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Spec.ParamRef.Namespace != "leafsync-system" {
		t.Errorf("binding's params in %q after Ensure", b.Spec.ParamRef.Namespace)
	}
}
