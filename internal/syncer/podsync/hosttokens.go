package podsync

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/leafsync/leafsync/internal/syncer/clusters"
	"github.com/leafsync/leafsync/internal/syncer/podsync/hosttoken"
	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
	"github.com/leafsync/leafsync/internal/syncer/registration"
)

// tokens keeps the member's token Secrets: the host ServiceAccount tokens
// of the pods on its leaf (hosttoken), with the host API server's address
// the registration gives, or the fleet's.
func (ms *memberSync) tokens(m clusters.Member) *hosttoken.Secrets {
	server := ms.c.opts.HostAPIServer
	if v, ok := m.Spec.Annotations[registration.AnnotationHostAPIServer]; ok {
		server = v
	}
	return &hosttoken.Secrets{
		Host: ms.c.opts.Host, Member: m.Runtime.Client(), Cluster: ms.cluster, HostIdentity: ms.hostIdentity(),
		Server: server, Clock: ms.c.opts.Clock, Retry: memberRetry, Log: ms.log,
	}
}

// refreshTokens, every resync: tokens at 80% of their lifetime are
// requested again, missing ones written, and those of pods no longer
// synced deleted (hosttoken.Secrets.Refresh).
func (ms *memberSync) refreshTokens(ctx context.Context, m clusters.Member, hostPods []*corev1.Pod) error {
	memberPods := map[types.NamespacedName]*corev1.Pod{}
	pods, err := m.Runtime.PodLister().List(memberOwner{ms.cluster, ms.hostIdentity()}.Selector())
	if err != nil {
		return err
	}
	for _, p := range pods {
		if podmeta.Ours(p, ms.cluster, ms.hostIdentity()) {
			memberPods[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = p
		}
	}
	onLeaf := map[types.UID]*corev1.Pod{} // a Terminating pod keeps its token until it is gone, as on a node
	for _, hp := range hostPods {
		onLeaf[hp.UID] = hp
	}
	return ms.tokens(m).Refresh(ctx, onLeaf, memberPods)
}
