package clusters

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The member claim: a ConfigMap in the member that says which host
// registers it under a cluster name. Two hosts that registered the same
// member under the same name would each take the other's pods for their
// own; the claim makes the second one refuse instead.
const (
	// ClaimNamespace holds the claims in the member (created if missing;
	// `leafsync register --create-service-account` puts leafsync's
	// ServiceAccount there too).
	ClaimNamespace = "leafsync-system"
	// ClaimPrefix + the cluster name is the claim's name.
	ClaimPrefix = "leafsync-claim-"
	// ClaimKeyHost is the claiming host's identity (the UID of the host's
	// kube-system namespace); ClaimKeyCluster the cluster name.
	ClaimKeyHost    = "host"
	ClaimKeyCluster = "cluster"
)

// claimName is the name of a cluster name's claim in the member.
func claimName(cluster string) string { return ClaimPrefix + cluster }

// claim makes sure the member's claim for cluster is host's: it creates it
// if missing. It returns the identity of another host that holds it ("" if
// host holds it now).
func claim(ctx context.Context, c kubernetes.Interface, cluster, host string) (string, error) {
	cms := c.CoreV1().ConfigMaps(ClaimNamespace)
	for range 2 { // a second try after losing a create race
		cm, err := cms.Get(ctx, claimName(cluster), metav1.GetOptions{})
		switch {
		case err == nil:
			if h := cm.Data[ClaimKeyHost]; h != host {
				return h, nil
			}
			return "", nil
		case !apierrors.IsNotFound(err):
			return "", fmt.Errorf("reading claim %s/%s: %w", ClaimNamespace, claimName(cluster), err)
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ClaimNamespace, Labels: map[string]string{"app.kubernetes.io/managed-by": "leafsync"}}}
		if _, err := c.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("creating namespace %s for the claim: %w", ClaimNamespace, err)
		}
		cm = &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: claimName(cluster), Namespace: ClaimNamespace,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "leafsync"}},
			Data: map[string]string{ClaimKeyHost: host, ClaimKeyCluster: cluster},
		}
		switch _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); {
		case err == nil:
			return "", nil
		case !apierrors.IsAlreadyExists(err):
			return "", fmt.Errorf("creating claim %s/%s: %w", ClaimNamespace, claimName(cluster), err)
		}
	}
	return "", fmt.Errorf("claim %s/%s keeps appearing and disappearing", ClaimNamespace, claimName(cluster))
}

// releaseClaim deletes the member's claim for cluster if host holds it
// (deregistration), so another host may register the member.
func releaseClaim(ctx context.Context, c kubernetes.Interface, cluster, host string) error {
	cm, err := c.CoreV1().ConfigMaps(ClaimNamespace).Get(ctx, claimName(cluster), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	if cm.Data[ClaimKeyHost] != host {
		return nil
	}
	err = c.CoreV1().ConfigMaps(ClaimNamespace).Delete(ctx, cm.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cm.UID}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}
