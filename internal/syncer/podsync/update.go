package podsync

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/leafsync/leafsync/internal/syncer/member"
	"github.com/leafsync/leafsync/internal/syncer/podsync/decide"
)

// updateRefusedRetry is how long a host change the member's API refused
// waits before it is tried again (the host pod may change meanwhile; the
// member will not accept the same write sooner).
const updateRefusedRetry = 30 * time.Second

// updateMember writes a host pod's changes after creation to its member
// pod: one strategic merge patch, conditional on the member pod decide saw
// (UID and resourceVersion). A conflict or a pod gone means the cache was
// behind: look again. The member refusing the change (its validation or
// admission) is a Warning Event on the host pod, tried again later, not a
// failure retried at once.
func (x *execution) updateMember(ctx context.Context, a decide.Action) error {
	data, err := a.Update.Patch(a.MemberUID, a.MemberResourceVersion)
	if err != nil {
		return err
	}
	x.c.log.V(1).Info("pod sync", "cluster", x.key.Cluster, "pod", x.key.Namespace+"/"+x.key.Name, "action", string(a.Type),
		"reason", a.Reason, "memberUID", string(a.MemberUID), "patch", string(data))
	pods := x.m.Runtime.Client().CoreV1().Pods(x.key.Namespace)
	err = member.Retry(ctx, memberRetry, func(ctx context.Context) error {
		out, err := pods.Patch(ctx, x.key.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{})
		if err == nil {
			x.mp = out
		}
		return err
	})
	switch {
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		return x.retryIn(memberChangedRetry, "member pod changed since the decision")
	case memberRefused(err):
		x.event(decide.Action{Type: decide.Event, Warning: true, Reason: "MemberUpdateRefused",
			Message: fmt.Sprintf("member %s refused the pod's update: %v", x.key.Cluster, err)})
		return x.retryIn(updateRefusedRetry, "member refused the update")
	}
	return err
}
