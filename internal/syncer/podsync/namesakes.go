package podsync

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/syncer/clusters"
	"github.com/leafsync/leafsync/internal/syncer/podsync/decide"
	"github.com/leafsync/leafsync/internal/syncer/podsync/deletes"
	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
)

// Cross-member lookups for pods with a stable identity (decide/identity.go).

// otherReadTimeout bounds one live read of another member, so that a slow
// member delays a held creation by at most this much per look.
const otherReadTimeout = 2 * time.Second

// otherCopies finds, for a host pod with a stable identity that has no
// member pod yet (and none recorded), leafsync's copies of its name in the
// other members that are not confirmed down, made for other host pods.
//
// A copy outlives its host pod only with a pending delete in its member's
// record (owed, deferred, retained: the host pod is finished only once that
// is persisted), or as an orphan whose record was lost. So a member's cache
// is looked at first; a member with a pending delete of that name is also
// read live, and one that cannot be read then counts as holding a copy; a
// member whose cache has not synced is read live for orphans, but one that
// cannot be read holds nothing up, so that a member with broken credentials
// does not stop every other member's StatefulSets.
func (c *Controller) otherCopies(ctx context.Context, cluster string, hp, mp *corev1.Pod, st hysteresis.State) []decide.OtherCopy {
	if hp == nil || mp != nil || hp.DeletionTimestamp != nil || podmeta.IsTerminal(hp) || !st.LeafReady() ||
		hp.Annotations[podmeta.AnnotationMemberUID] != "" || !decide.StableIdentity(podmeta.OwnerOf(hp), &hp.Spec) {
		return nil
	}
	host := c.opts.Registry.HostIdentity()
	var out []decide.OtherCopy
	for _, m := range c.opts.Registry.Members() {
		other := m.Cluster()
		if other == cluster || m.Runtime == nil {
			continue
		}
		if s := m.Readiness.Status; s.State == hysteresis.NotReady || s.State == hysteresis.Recovering {
			continue // confirmed down: fail-over does not wait for it
		}
		copyOf := func(p *corev1.Pod) (decide.OtherCopy, bool) {
			if p == nil || !podmeta.Ours(p, other, host) || p.Labels[podmeta.LabelHostUID] == string(hp.UID) || podmeta.IsTerminal(p) {
				return decide.OtherCopy{}, false
			}
			return decide.OtherCopy{Cluster: other, HostUID: p.Labels[podmeta.LabelHostUID]}, true
		}
		recorded := c.recordsName(other, hp.Namespace, hp.Name)
		synced := m.Runtime.HasSynced()
		if synced {
			if p, err := m.Runtime.PodLister().Pods(hp.Namespace).Get(hp.Name); err == nil {
				if o, ok := copyOf(p); ok {
					out = append(out, o)
					continue
				}
			}
		}
		if synced && !recorded {
			continue
		}
		p, err := readPod(ctx, m, hp.Namespace, hp.Name)
		switch o, ok := copyOf(p); {
		case err != nil && recorded:
			out = append(out, decide.OtherCopy{Cluster: other, Err: err.Error()})
		case err == nil && ok:
			out = append(out, o)
		}
	}
	return out
}

// recordsName reports whether a member has a pending delete of that name.
func (c *Controller) recordsName(cluster, namespace, name string) bool {
	return len(c.ledger.pendingDeletesOf(cluster, namespace, name)) > 0
}

// readPod reads a pod from a member, past its cache; nil when there is none.
func readPod(ctx context.Context, m clusters.Member, namespace, name string) (*corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, otherReadTimeout)
	defer cancel()
	p, err := m.Runtime.Client().CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return p, err
}

// identityMoved maps the pending deletes whose name a live host pod bound
// to another node than leaf now holds, to that node.
func identityMoved(leaf string, records []deletes.PendingDelete, pods []*corev1.Pod) map[string]string {
	var out map[string]string
	for _, r := range records {
		if node := decide.MovedTo(r, leaf, pods); node != "" {
			if out == nil {
				out = map[string]string{}
			}
			out[r.HostUID] = node
		}
	}
	return out
}

// nameFreed: one of leafsync's member pods is gone; a creation of its name
// held in another member looks again now, not at its next poll. Such a
// creation is of the host pod of that name, so only the member following
// its leaf is asked, if it is another: asking every member cost each
// deleted pod a queue add per member, O(members²) for a fleet's deletes
// (make bench-scale: 15% of leafsync's CPU at 400 registrations, for the
// members' own pods, which hold nothing up).
func (c *Controller) nameFreed(cluster string, obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	p, ok := obj.(*corev1.Pod) // the cache keeps leafsync's pods so, no other
	if !ok {
		return
	}
	if ms := c.hostPods.follower(p.Namespace, p.Name); ms != nil && ms.cluster != cluster {
		ms.queue.Add(key{ms.cluster, p.Namespace, p.Name})
	}
}
