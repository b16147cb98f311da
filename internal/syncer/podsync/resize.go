package podsync

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leafsync/leafsync/internal/syncer/podsync/decide"
)

// resizeMember resizes the member pod as the host pod was resized: the
// host's resources through the member pod's resize subresource, with the
// member pod's UID and resourceVersion as preconditions (a pod changed or
// replaced meanwhile is looked at again, never overwritten). A refusal by
// the member (its validation, quota or LimitRange, a node feature it
// lacks) is told on the host pod as a Warning Event with the member's
// message, once per attempt; the plan goes on, and the resize is tried
// again when the pod next changes, not in a loop. Whether the member's
// nodes carry the resize out is the member's status to tell
// (PodResizePending, PodResizeInProgress, containerStatuses[].resources),
// which the status mirror brings back.
func (x *execution) resizeMember(ctx context.Context, a decide.Action) error {
	if x.mp == nil || x.mp.UID != a.MemberUID {
		return x.retryIn(memberChangedRetry, "member pod to resize is not the one decided about")
	}
	x.logAction(a, "memberUID", string(a.MemberUID))
	out, err := x.m.Runtime.Client().CoreV1().Pods(x.key.Namespace).UpdateResize(ctx, x.key.Name, decide.Resized(x.mp, x.hp), metav1.UpdateOptions{})
	switch {
	case err == nil:
		x.mp = out
		return nil
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		return x.retryIn(memberChangedRetry, "member pod changed before its resize: "+err.Error())
	case memberRefused(err):
		x.event(decide.Action{Type: decide.Event, Warning: true, Reason: "MemberResizeRefused",
			Message: fmt.Sprintf("member cluster %s refused the resize: %v", x.key.Cluster, err)})
		return nil
	}
	return err
}
