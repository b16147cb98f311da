package podsync

import (
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/leafsync/leafsync/syncer/store"
)

// Replaced decides which deferred deletes have a Ready replacement among
// the host pods of their namespace, and returns their HostUIDs.
//
//   - A StatefulSet's pod is replaced by the pod of the same name (a new
//     UID, wherever it runs) once it is Ready.
//   - Any other owner's pods are matched one to one: each deferred delete,
//     oldest first, claims the oldest unclaimed Ready, non-terminating pod
//     of the same owner created no earlier than the deleted pod began
//     terminating (less a second of timestamp rounding). Orphans (no
//     deletion time known) claim last, any pod of the owner.
//   - A pod without an owner is never replaced (MaxDeferral bounds it).
//
// records may hold any pending deletes; only Deferred ones are matched.
func Replaced(records []store.PendingDelete, pods []*corev1.Pod) map[string]bool {
	out := map[string]bool{}
	byOwner := map[string][]store.PendingDelete{}
	pending := map[string]bool{}
	for _, r := range records {
		pending[r.HostUID] = true
		if r.Kind == store.Deferred && r.Owner != "" {
			byOwner[r.Owner] = append(byOwner[r.Owner], r)
		}
	}
	for owner, rs := range byOwner {
		kind, _ := splitOwner(owner)
		if kind == "StatefulSet" {
			for _, r := range rs {
				for _, p := range pods {
					if p.Name == r.Name && string(p.UID) != r.HostUID && ownerOf(p) == owner &&
						p.DeletionTimestamp == nil && isReady(p) {
						out[r.HostUID] = true
					}
				}
			}
			continue
		}
		var cands []*corev1.Pod
		for _, p := range pods {
			if ownerOf(p) == owner && p.DeletionTimestamp == nil && isReady(p) && !pending[string(p.UID)] {
				cands = append(cands, p)
			}
		}
		sort.Slice(cands, func(i, j int) bool {
			a, b := cands[i].CreationTimestamp.Time, cands[j].CreationTimestamp.Time
			if !a.Equal(b) {
				return a.Before(b)
			}
			return cands[i].Name < cands[j].Name
		})
		sort.Slice(rs, func(i, j int) bool {
			a, b := rs[i].HostDeletedAt, rs[j].HostDeletedAt
			if a.IsZero() != b.IsZero() {
				return !a.IsZero()
			}
			if !a.Equal(b) {
				return a.Before(b)
			}
			return rs[i].Name < rs[j].Name
		})
		claimed := make([]bool, len(cands))
		for _, r := range rs {
			earliest := r.HostDeletedAt.Truncate(time.Second).Add(-time.Second)
			for i, c := range cands {
				if claimed[i] || (!r.HostDeletedAt.IsZero() && c.CreationTimestamp.Time.Before(earliest)) {
					continue
				}
				claimed[i] = true
				out[r.HostUID] = true
				break
			}
		}
	}
	return out
}
