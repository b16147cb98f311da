package member

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// IdentityNamespace is the namespace whose UID identifies a cluster: every
// cluster has it from its first start, and it cannot be deleted, so its
// UID is the de-facto cluster ID (the one Cluster API, Submariner and the
// multicluster ClusterProperty KEP use).
const IdentityNamespace = "kube-system"

// Identity reads a cluster's identity: the UID of its kube-system
// namespace. It needs get on that namespace.
func Identity(ctx context.Context, c kubernetes.Interface) (string, error) {
	ns, err := c.CoreV1().Namespaces().Get(ctx, IdentityNamespace, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("reading the %s namespace (its UID is the cluster's identity): %w", IdentityNamespace, err)
	}
	if ns.UID == "" {
		return "", fmt.Errorf("the %s namespace has no UID", IdentityNamespace)
	}
	return string(ns.UID), nil
}
