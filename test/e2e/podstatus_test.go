//go:build e2e

package e2e

import (
	corev1 "k8s.io/api/core/v1"
)

// leafInternalIP is the leaf's first InternalIP ("" when it has none): the
// host IP a kubelet on the leaf would give its pods.
func leafInternalIP(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}
