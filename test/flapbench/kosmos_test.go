//go:build e2e

package flapbench

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/leafsync/leafsync/test/harness"
)

// Kosmos clustertree (github.com/kosmos-io/kosmos, pinned tag v0.5.5) as a
// contestant. Its code never enters this repository: `make kosmos
// KOSMOS_SRC=<checkout>` builds bin/kosmos-clustertree from a checkout, and
// the benchmark applies the CRDs from that checkout's deploy/crds at run
// time. docs/benchmarks/flap.md says how to get the tree.

// kosmosBinary is what `make kosmos` builds.
const kosmosBinary = "kosmos-clustertree"

// kosmosSource returns the Kosmos checkout and the binary built from it,
// or why the Kosmos contestants cannot run.
func kosmosSource(t *testing.T) (src, commit string, err error) {
	src = os.Getenv("KOSMOS_SRC")
	if src == "" {
		return "", "", fmt.Errorf("KOSMOS_SRC is not set")
	}
	if _, err := os.Stat(filepath.Join(src, "deploy", "crds", "kosmos.io_clusters.yaml")); err != nil {
		return "", "", fmt.Errorf("KOSMOS_SRC=%s is not a Kosmos checkout: %w", src, err)
	}
	if _, err := os.Stat(harness.Bin(t, kosmosBinary)); err != nil {
		return "", "", fmt.Errorf("%s is missing: run `make kosmos KOSMOS_SRC=%s`", harness.Bin(t, kosmosBinary), src)
	}
	out, err := exec.Command("git", "-C", src, "describe", "--tags", "--always", "--long").Output()
	if err != nil {
		return src, "unknown commit", nil
	}
	return src, strings.TrimSpace(string(out)), nil
}

var (
	crdGVR     = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	clusterGVR = schema.GroupVersionResource{Group: "kosmos.io", Version: "v1alpha1", Resource: "clusters"}
)

// startKosmos runs one Kosmos cluster-manager for the host, as Kosmos is
// deployed (one per host, serving every member's Cluster object), behind
// one host link shared by its contestants, and registers each member as
// Kosmos's docs do: a kosmos.io/v1alpha1 Cluster with the member's
// kubeconfig and clusterTreeOptions.enable. Its leaf is kosmos-<cluster>.
func startKosmos(t *testing.T, host *harness.Cluster, cs []*contestant, src string) {
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(host.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	applyKosmosCRDs(t, dyn, filepath.Join(src, "deploy", "crds"))
	hostLink := harness.NewFaultProxy(t, "kosmos-host", host.Addr())
	kc := filepath.Join(harness.LogDir(t), "kosmos-host.kubeconfig")
	if err := os.WriteFile(kc, host.KubeconfigVia(hostLink.Addr()), 0o600); err != nil {
		t.Fatal(err)
	}
	port, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	// The flags of deploy/clustertree-cluster-manager.yml but
	// --multi-cluster-service (service export, which the benchmark does
	// not use and which needs the MCS CRDs in every member); no leader
	// election (one replica) and a free port for its kubelet API.
	harness.StartBinary(t, "kosmos-clustertree", harness.Bin(t, kosmosBinary),
		"--kubeconfig="+kc, "--leader-elect=false", fmt.Sprintf("--listen-port=%d", port), "--v=4")
	for _, c := range cs {
		c.hostLink = hostLink
		cluster := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kosmos.io/v1alpha1", "kind": "Cluster",
			"metadata": map[string]any{"name": c.member.Name},
			"spec": map[string]any{
				// spec.kubeconfig is []byte: base64 in JSON.
				"kubeconfig":         base64.StdEncoding.EncodeToString(c.member.KubeconfigVia(c.memberLink.Addr())),
				"clusterTreeOptions": map[string]any{"enable": true},
				// ClusterLink (Kosmos's network) stays off, but the
				// cluster-manager reads its options: nil panics.
				"clusterLinkOptions": map[string]any{"enable": false},
			},
		}}
		if _, err := dyn.Resource(clusterGVR).Create(ctx, cluster, metav1.CreateOptions{}); err != nil {
			t.Fatalf("kosmos: registering %s: %v", c.member.Name, err)
		}
	}
}

// kosmosLeaf is the leaf Node Kosmos creates for a member (in its "ALL"
// leaf model: the whole member as one node).
func kosmosLeaf(member string) string { return "kosmos-" + member }

// applyKosmosCRDs creates every CRD of dir and waits until each is served.
func applyKosmosCRDs(t *testing.T, dyn dynamic.Interface, dir string) {
	ctx := context.Background()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("kosmos: no CRDs in %s: %v", dir, err)
	}
	var names []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &obj.Object); err != nil {
			t.Fatalf("kosmos: %s: %v", f, err)
		}
		if obj.GetKind() != "CustomResourceDefinition" {
			continue
		}
		if _, err := dyn.Resource(crdGVR).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatalf("kosmos: CRD %s: %v", filepath.Base(f), err)
		}
		names = append(names, obj.GetName())
	}
	for _, name := range names {
		harness.Eventually(t, 30*time.Second, "CRD "+name+" established", func() error {
			crd, err := dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			for _, c := range conds {
				if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
					return nil
				}
			}
			return fmt.Errorf("not established")
		})
	}
}
