package reflector

import (
	"context"
	"errors"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

type testOwner struct{}

func (testOwner) Owns(l map[string]string) bool {
	return l["leafsync.io/managed"] == "true" && l["leafsync.io/cluster"] == "member-a"
}

func (testOwner) Labels(uid types.UID, from map[string]string) map[string]string {
	return copyLabels(string(uid), from)
}

func (testOwner) Selector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{"leafsync.io/managed": "true", "leafsync.io/cluster": "member-a"})
}

func hostConfigMap(rv string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web-config", Namespace: "apps", UID: "cm-uid", ResourceVersion: rv}, Data: data}
}

func memberConfigMap(t *testing.T, r *Reflector) *corev1.ConfigMap {
	t.Helper()
	cm, err := r.Member.CoreV1().ConfigMaps("apps").Get(context.Background(), "web-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

// TestReflectorCopiesHeal: a copy is made, follows its host object (a key
// removed there goes in the member too), is restored after an edit by hand
// (fields another field manager holds), and goes once no pod uses it.
func TestReflectorCopiesHeal(t *testing.T) {
	ctx := context.Background()
	host := fake.NewClientset(hostConfigMap("1", map[string]string{"a": "1", "b": "2"}))
	r := &Reflector{Host: host, Member: fake.NewClientset(), Cluster: "member-a", Owner: testOwner{}, Log: logr.Discard()}
	refs := []Ref{{Kind: "ConfigMap", Name: "web-config"}}
	if err := r.Ensure(ctx, "apps", refs); err != nil {
		t.Fatal(err)
	}
	if cm := memberConfigMap(t, r); cm.Data["a"] != "1" || cm.Data["b"] != "2" || !(testOwner{}).Owns(cm.Labels) {
		t.Fatalf("copy %+v", cm)
	}

	if _, err := host.CoreV1().ConfigMaps("apps").Update(ctx, hostConfigMap("2", map[string]string{"a": "changed"}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := r.Ensure(ctx, "apps", refs); err != nil {
		t.Fatal(err)
	}
	if cm := memberConfigMap(t, r); len(cm.Data) != 1 || cm.Data["a"] != "changed" {
		t.Fatalf("copy after the host changed: %v, want only a=changed", cm.Data)
	}

	edited := memberConfigMap(t, r)
	edited.Data["extra"] = "by hand"
	edited.Labels["team"] = "x"
	if _, err := r.Member.CoreV1().ConfigMaps("apps").Update(ctx, edited, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	uses := map[Key]Use{{Kind: "ConfigMap", Namespace: "apps", Name: "web-config"}: {Live: true, Needed: true}}
	if err := r.Refresh(ctx, uses); err != nil {
		t.Fatal(err)
	}
	if cm := memberConfigMap(t, r); len(cm.Data) != 1 || cm.Labels["team"] != "" {
		t.Fatalf("copy after an edit by hand: data %v labels %v, want it restored", cm.Data, cm.Labels)
	}

	if err := r.Refresh(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Member.CoreV1().ConfigMaps("apps").Get(ctx, "web-config", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a copy no pod uses is kept: %v", err)
	}
}

// TestReflectorNeverTouchesMemberObjects: a member object of the copy's
// name that leafsync did not create refuses the pod and stays as it is,
// also when no pod uses it (#26).
func TestReflectorNeverTouchesMemberObjects(t *testing.T) {
	ctx := context.Background()
	own := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web-config", Namespace: "apps", ResourceVersion: "5"}, Data: map[string]string{"mine": "yes"}}
	r := &Reflector{Host: fake.NewClientset(hostConfigMap("1", map[string]string{"a": "1"})), Member: fake.NewClientset(own),
		Cluster: "member-a", Owner: testOwner{}, Log: logr.Discard()}
	err := r.Ensure(ctx, "apps", []Ref{{Kind: "ConfigMap", Name: "web-config"}})
	var ref Refusal
	if !errors.As(err, &ref) || ref.Reason != "MemberObjectConflict" {
		t.Fatalf("Ensure = %v, want a MemberObjectConflict refusal", err)
	}
	if err := r.Refresh(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if cm := memberConfigMap(t, r); len(cm.Data) != 1 || cm.Data["mine"] != "yes" || len(cm.Labels) != 0 {
		t.Fatalf("the member's own object was changed: %+v", cm)
	}
}

// TestReflectorRefusesHostTokens: a host service-account token is never
// copied, even for an optional reference.
func TestReflectorRefusesHostTokens(t *testing.T) {
	tok := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tok", Namespace: "apps"}, Type: corev1.SecretTypeServiceAccountToken}
	r := &Reflector{Host: fake.NewClientset(tok), Member: fake.NewClientset(), Cluster: "member-a", Owner: testOwner{}, Log: logr.Discard()}
	err := r.Ensure(context.Background(), "apps", []Ref{{Kind: "Secret", Name: "tok", Optional: true}})
	var ref Refusal
	if !errors.As(err, &ref) || ref.Reason != "HostObjectNotCopied" {
		t.Fatalf("Ensure = %v, want HostObjectNotCopied", err)
	}
}
