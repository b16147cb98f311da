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
	// claimNamespace holds the claims in the member (created if missing;
	// `leafsync register --create-service-account` puts leafsync's
	// ServiceAccount there too).
	claimNamespace = "leafsync-system"
	// claimPrefix + the cluster name is the claim's name.
	claimPrefix = "leafsync-claim-"
	// claimKeyHost is the claiming host's identity (the UID of the host's
	// kube-system namespace); claimKeyCluster the cluster name.
	claimKeyHost    = "host"
	claimKeyCluster = "cluster"
)

// claimName is the name of a cluster name's claim in the member.
func claimName(cluster string) string { return claimPrefix + cluster }

// claim makes sure the member's claim for cluster is host's: it creates it
// if missing. It returns the identity of another host that holds it ("" if
// host holds it now).
func claim(ctx context.Context, c kubernetes.Interface, cluster, host string) (string, error) {
	cms := c.CoreV1().ConfigMaps(claimNamespace)
	for range 2 { // a second try after losing a create race
		cm, err := cms.Get(ctx, claimName(cluster), metav1.GetOptions{})
		switch {
		case err == nil:
			if h := cm.Data[claimKeyHost]; h != host {
				return h, nil
			}
			return "", nil
		case !apierrors.IsNotFound(err):
			return "", fmt.Errorf("reading claim %s/%s: %w", claimNamespace, claimName(cluster), err)
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: claimNamespace, Labels: map[string]string{"app.kubernetes.io/managed-by": "leafsync"}}}
		if _, err := c.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("creating namespace %s for the claim: %w", claimNamespace, err)
		}
		cm = &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: claimName(cluster), Namespace: claimNamespace,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "leafsync"}},
			Data: map[string]string{claimKeyHost: host, claimKeyCluster: cluster},
		}
		switch _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); {
		case err == nil:
			return "", nil
		case !apierrors.IsAlreadyExists(err):
			return "", fmt.Errorf("creating claim %s/%s: %w", claimNamespace, claimName(cluster), err)
		}
	}
	return "", fmt.Errorf("claim %s/%s keeps appearing and disappearing", claimNamespace, claimName(cluster))
}

// releaseClaim deletes the member's claim for cluster if host holds it
// (deregistration), so another host may register the member.
func releaseClaim(ctx context.Context, c kubernetes.Interface, cluster, host string) error {
	cm, err := c.CoreV1().ConfigMaps(claimNamespace).Get(ctx, claimName(cluster), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	if cm.Data[claimKeyHost] != host {
		return nil
	}
	err = c.CoreV1().ConfigMaps(claimNamespace).Delete(ctx, cm.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cm.UID}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}
