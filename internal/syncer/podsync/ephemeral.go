package podsync

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leafsync/leafsync/internal/syncer/podsync/decide"
	"github.com/leafsync/leafsync/internal/syncer/podsync/translate"
	"github.com/leafsync/leafsync/internal/syncer/reflector"
)

// updateEphemeral adds the action's ephemeral containers to the member pod
// through its ephemeralcontainers subresource, after the copies of the
// ConfigMaps and Secrets they use. The write is conditional on the member
// pod the decision saw (its UID and resourceVersion): a pod changed or
// gone meanwhile is looked at again. The member refusing them (its
// validation or admission) is the user's to read, not an error to retry:
// a Warning Event on the host pod with the member's words, and the plan
// goes on; nothing was written, so nothing brings the pod back before its
// next change.
func (x *execution) updateEphemeral(ctx context.Context, a decide.Action) error {
	mp := x.mp
	if mp == nil || mp.UID != a.MemberUID {
		return x.retryIn(memberChangedRetry, "member pod changed since the decision")
	}
	want := mp.DeepCopy()
	want.Spec.EphemeralContainers = append(want.Spec.EphemeralContainers, a.Ephemeral...)
	rt := x.m.Runtime
	x.ms.depMu.Lock()
	err := x.ms.reflector(rt).Ensure(ctx, mp.Namespace, translate.References(mp.Name, &corev1.PodSpec{EphemeralContainers: a.Ephemeral}))
	var out *corev1.Pod
	if err == nil {
		out, err = rt.Client().CoreV1().Pods(mp.Namespace).UpdateEphemeralContainers(ctx, mp.Name, want, metav1.UpdateOptions{})
	}
	x.ms.depMu.Unlock()
	names := ephemeralNames(a.Ephemeral)
	var ref reflector.Refusal
	switch {
	case errors.As(err, &ref):
		x.event(decide.Action{Type: decide.Event, Warning: true, Reason: ref.Reason, Message: ref.Message})
		return x.retryIn(ref.After, ref.Message)
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		return x.retryIn(memberChangedRetry, "member pod changed or went before its ephemeral containers were added")
	case memberRefused(err):
		x.event(decide.Action{Type: decide.Event, Warning: true, Reason: "EphemeralContainerRefused",
			Message: fmt.Sprintf("member %s refused ephemeral container %s: %v", x.key.Cluster, names, err)})
		return nil
	case err != nil:
		return err
	}
	x.logAction(a, "memberUID", string(mp.UID), "ephemeralContainers", names)
	x.mp = out
	return nil
}

func ephemeralNames(cs []corev1.EphemeralContainer) string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.Name
	}
	return strings.Join(names, ", ")
}
