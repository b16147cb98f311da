package volumes

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
	"github.com/leafsync/leafsync/internal/syncer/reflector"
)

// refusalRetry: a pod refused for a claim is looked at again this often.
const refusalRetry = 30 * time.Second

// Provisioned reports whether host claim namespace/name is bound to a
// stand-in leafsync made for member cluster: then the member's claim of
// that name is leafsync's copy of it, and a pod may use it (pod sync's
// admission). It reads the informers' caches only. Until they have
// synced it says yes: pod sync deletes the member pod of a host pod it
// would not run, and a running pod must never go for a cache that is not
// filled yet (after a restart); a new member pod still waits, as Ensure
// refuses to make its claims before the caches have synced.
func (c *Controller) Provisioned(cluster, namespace, name string) bool {
	_, _, err := c.boundStandIn(cluster, namespace, name)
	return err == nil || errors.Is(err, errNotSynced)
}

// boundStandIn is host claim namespace/name and the stand-in of member
// cluster it is bound to, or why not.
func (c *Controller) boundStandIn(cluster, namespace, name string) (*corev1.PersistentVolumeClaim, *corev1.PersistentVolume, error) {
	for _, synced := range c.synced {
		if !synced() {
			return nil, nil, errNotSynced
		}
	}
	cl, err := c.claims.PersistentVolumeClaims(namespace).Get(name)
	if err != nil {
		return nil, nil, err
	}
	pv, err := c.pvs.Get(cl.Spec.VolumeName)
	if err != nil || !isStandIn(pv, cluster, c.host()) || released(pv, cl) {
		return nil, nil, fmt.Errorf("claim %s/%s is not bound to a volume leafsync provisioned in member %s", namespace, name, cluster)
	}
	return cl, pv, nil
}

// Ensure makes the member claims of the host claims hp uses, before pod
// sync creates hp's member pod in member cluster (whose namespace
// exists by then): each is made if missing. A claim
// not provisioned for this member, or a member claim of its name that is
// not this claim's, refuses the pod (reflector.Refusal): the member's own
// claim is never used.
func (c *Controller) Ensure(ctx context.Context, cluster string, member kubernetes.Interface, hp *corev1.Pod) error {
	for _, v := range hp.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		cl, pv, err := c.boundStandIn(cluster, hp.Namespace, v.PersistentVolumeClaim.ClaimName)
		if errors.Is(err, errNotSynced) {
			return err
		}
		if err != nil {
			return reflector.Refusal{Reason: "NotSyncedVolumeClaim", After: refusalRetry, Message: fmt.Sprintf(
				"volume %s: %v: the member's claim of that name would be used, so the pod is not run in member %s", v.Name, err, cluster)}
		}
		claims := member.CoreV1().PersistentVolumeClaims(cl.Namespace)
		mc, err := claims.Get(ctx, cl.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			// Create, not apply: a claim the member's owner made since the
			// read must fail this, never be taken over.
			if _, err := claims.Create(ctx, memberClaimOf(cl, cluster, c.host(), pv.Annotations[annotationMemberClass]), metav1.CreateOptions{FieldManager: fieldManager}); err != nil {
				return err
			}
			c.log.Info("created member claim", "claim", cl.Namespace+"/"+cl.Name, "cluster", cluster)
		case err != nil:
			return err
		case !podmeta.OwnedBy(mc.Labels, cluster, c.host()) || mc.Labels[podmeta.LabelHostUID] != string(cl.UID):
			return reflector.Refusal{Reason: "MemberObjectConflict", After: refusalRetry, Message: fmt.Sprintf(
				"member cluster %s has PersistentVolumeClaim %s/%s, which leafsync did not create for this claim: it is never used, changed or deleted, so the pod is not run; the member's owner can remove it",
				cluster, cl.Namespace, cl.Name)}
		}
	}
	return nil
}
