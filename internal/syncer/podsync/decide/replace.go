package decide

import (
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/leafsync/leafsync/internal/syncer/podsync/deletes"
	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
)

// chooseReplacement returns the replacement of a deferred delete among the
// host pods of its namespace, and whether it is Ready ("" if there is
// none yet).
//
//   - A StatefulSet's pod is replaced by the pod of the same name (a new
//     UID, wherever it runs). Once that pod is bound to another node, the
//     old copy goes at once instead of waiting for it to be Ready
//     (identity.go).
//   - For any other owner, each deferred delete is bound to one replacement,
//     recorded in the delete (PendingDelete.Replacement) so that the binding
//     survives the other deletes being resolved: the assigned pod while it
//     lives; otherwise the oldest live pod of the owner that no other delete
//     holds (taken), that is not itself a deleted pod (pending), and that was
//     created no earlier than the deleted pod began terminating, less a
//     second of timestamp rounding (an orphan, whose deletion time is
//     unknown, takes any).
//   - A pod without an owner has no replacement (MaxDeferral bounds it).
func chooseReplacement(r deletes.PendingDelete, taken, pending map[string]bool, pods []*corev1.Pod) (uid string, ready bool) {
	kind, _ := podmeta.SplitOwner(r.Owner)
	switch {
	case r.Owner == "":
		return "", false
	case kind == "StatefulSet":
		for _, p := range pods {
			if p.Name == r.Name && string(p.UID) != r.HostUID && podmeta.OwnerOf(p) == r.Owner && alive(p) {
				return string(p.UID), podmeta.IsReady(p)
			}
		}
		return "", false
	}
	if r.Replacement != "" {
		for _, p := range pods {
			if string(p.UID) == r.Replacement && alive(p) {
				return r.Replacement, podmeta.IsReady(p)
			}
		}
	}
	earliest := r.HostDeletedAt.Truncate(time.Second).Add(-time.Second)
	var cands []*corev1.Pod
	for _, p := range pods {
		uid := string(p.UID)
		if podmeta.OwnerOf(p) != r.Owner || !alive(p) || taken[uid] || pending[uid] || uid == r.HostUID {
			continue
		}
		if !r.HostDeletedAt.IsZero() && p.CreationTimestamp.Time.Before(earliest) {
			continue
		}
		cands = append(cands, p)
	}
	if len(cands) == 0 {
		return "", false
	}
	sort.Slice(cands, func(i, j int) bool {
		a, b := cands[i].CreationTimestamp.Time, cands[j].CreationTimestamp.Time
		if !a.Equal(b) {
			return a.Before(b)
		}
		return cands[i].Name < cands[j].Name
	})
	return string(cands[0].UID), podmeta.IsReady(cands[0])
}

// alive: not being deleted and not finished.
func alive(p *corev1.Pod) bool { return p.DeletionTimestamp == nil && !podmeta.IsTerminal(p) }
