//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leafsync/leafsync/test/harness"
)

// realNodeLeaf is the leaf of the one member the real-node tests register.
const realNodeLeaf = "leaf-member"

// serveMember starts leafsync on host with config (YAML) and args, and
// registers member as cluster "member" with the registration annotations
// given; it returns once the member's leaf is Ready.
func serveMember(t *testing.T, host, member *harness.Cluster, config string, annotations map[string]string, args ...string) {
	t.Helper()
	ctx := context.Background()
	if err := host.EnsureNamespace(ctx, leafsyncNamespace); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(harness.LogDir(t), "leafsync-config.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	harness.StartLeafsync(t, "leafsync", host.Kubeconfig(), append([]string{"--namespace=" + leafsyncNamespace, "--config=" + path}, args...)...)
	if _, err := host.Client().CoreV1().Secrets(leafsyncNamespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: "member-member", Namespace: leafsyncNamespace,
			Labels:      map[string]string{"leafsync.io/cluster": "member"},
			Annotations: annotations,
		},
		Data: map[string][]byte{"kubeconfig": member.Kubeconfig()},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNodeReady(t, host, realNodeLeaf, 2*time.Minute)
}
