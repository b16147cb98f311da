//go:build e2e

package flapbench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/leafsync/leafsync/test/harness"
)

// TestDenyPolicy: the re-implemented Kyverno rule denies a pod DELETE
// exactly when its three preconditions hold, with Kyverno's message, on a
// real API server (no controllers: node conditions stay as written).
func TestDenyPolicy(t *testing.T) {
	ctx := context.Background()
	host := harness.StartCluster(t, harness.ClusterOptions{Name: "host"})
	admin := host.Client()
	policy, binding := DenyPolicy()
	if _, err := admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// No KCM here: the pods' ServiceAccount is made by hand.
	if _, err := admin.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	nodeController := impersonate(t, host, "system:serviceaccount:kube-system:node-controller")

	type node struct {
		name, kosmosLabel string // kosmosLabel "-": no label
		ready             corev1.ConditionStatus
	}
	nodes := []node{
		{"kosmos-notready", "true", corev1.ConditionFalse},
		{"kosmos-unknown", "true", corev1.ConditionUnknown},
		{"kosmos-nocondition", "true", ""},
		{"kosmos-ready", "true", corev1.ConditionTrue},
		{"plain-notready", "-", corev1.ConditionFalse},
		{"kosmos-emptylabel", "", corev1.ConditionFalse},
	}
	for _, n := range nodes {
		obj := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name}}
		if n.kosmosLabel != "-" {
			obj.Labels = map[string]string{"kosmos.io/node": n.kosmosLabel}
		}
		created, err := admin.CoreV1().Nodes().Create(ctx, obj, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n.ready != "" {
			created.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: n.ready}}
			if _, err := admin.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	pod := func(name, node string) {
		t.Helper()
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
		}
		if _, err := admin.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	del := func(c kubernetes.Interface, name string) error {
		return c.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	}

	// The policy takes effect once the API server has compiled it and
	// synced its params: until the first denial, a delete may pass.
	i := 0
	harness.Eventually(t, 30*time.Second, "the policy denies node-controller on a NotReady Kosmos node", func() error {
		name := fmt.Sprintf("p-%d", i)
		pod(name, "kosmos-notready")
		err := del(nodeController, name)
		if err == nil {
			i++
			return fmt.Errorf("deleted")
		}
		return nil
	})
	err := del(nodeController, fmt.Sprintf("p-%d", i))
	if !apierrors.IsForbidden(err) {
		t.Fatalf("want Forbidden, got %v", err)
	}
	// Kyverno's message after the API server's prefix; the API server
	// trims the spaces Kyverno's template has around it.
	kyverno := fmt.Sprintf(" system:serviceaccount:kube-system:node-controller delete pod p-%d of NotReady Kosmos kosmos-notready Node is not allowed. ", i)
	if !strings.HasSuffix(err.Error(), "denied request: "+strings.TrimSpace(kyverno)) {
		t.Errorf("message %q, want it to end with %q", err.Error(), kyverno)
	}

	cases := []struct {
		node   string
		client kubernetes.Interface
		who    string
		denied bool
	}{
		{"kosmos-unknown", nodeController, "node-controller", true},
		{"kosmos-nocondition", nodeController, "node-controller", true},
		{"kosmos-notready", admin, "admin", false},
		{"kosmos-ready", nodeController, "node-controller", false},
		{"plain-notready", nodeController, "node-controller", false},
		{"kosmos-emptylabel", nodeController, "node-controller", false},
	}
	for j, c := range cases {
		name := fmt.Sprintf("q-%d", j)
		pod(name, c.node)
		err := del(c.client, name)
		if denied := err != nil; denied != c.denied {
			t.Errorf("%s deletes a pod on %s: err %v, want denied=%t", c.who, c.node, err, c.denied)
		}
	}
}

// impersonate is an admin client acting as user.
func impersonate(t *testing.T, c *harness.Cluster, user string) kubernetes.Interface {
	cfg := c.RESTConfig()
	cfg.Impersonate.UserName = user
	cfg.Impersonate.Groups = []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}
