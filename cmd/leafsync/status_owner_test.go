package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/leafsync/leafsync/internal/syncer/registration"
	"github.com/leafsync/leafsync/internal/syncer/shard"
)

// `leafsync status` names each member's owner: the replica of the member
// Lease's holder, "-" where no replica holds it.
func TestStatusShowsOwner(t *testing.T) {
	const ns = "leafsync-system"
	secret := func(cluster string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "member-" + cluster, Namespace: ns,
			Labels: map[string]string{registration.LabelCluster: cluster}}}
	}
	lease := func(name, kind, cluster, holder string) *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
				Labels:      map[string]string{shard.LabelRing: "leafsync", shard.LabelLeaseKind: kind},
				Annotations: map[string]string{shard.AnnotationCluster: cluster}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder)},
		}
	}
	host := fake.NewClientset(secret("a"), secret("b"), secret("c"), secret("d"),
		lease("leafsync-member-a", "member", "a", "leafsync-6d4f9b7c8-x2kq9-0a1b2c3d"),
		lease("leafsync-member-b", "member", "b", "r1-ffffffff"),
		lease("leafsync-member-c", "member", "c", ""),
		// Not a member Lease: never an owner.
		lease("leafsync-shard-r2", "replica", "d", "r2-12345678"),
	)
	rows, err := statusReader{host: host, namespace: ns}.read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range rows {
		got[r.Cluster] = r.Owner
	}
	want := map[string]string{"a": "leafsync-6d4f9b7c8-x2kq9", "b": "r1", "c": "", "d": ""}
	for c, w := range want {
		if got[c] != w {
			t.Errorf("owner of %s: %q, want %q", c, got[c], w)
		}
	}
	var out bytes.Buffer
	if err := printStatus(&out, rows, ""); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	if !strings.Contains(lines[0], "OWNER") || strings.Fields(lines[1])[2] != "leafsync-6d4f9b7c8-x2kq9" || strings.Fields(lines[3])[2] != "-" {
		t.Fatalf("the table's OWNER column:\n%s", out.String())
	}
}
