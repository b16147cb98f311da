package podsync

// This file is the only place pod sync reads or writes the state store:
// its pending deletes (owed, deferred, retained), their loading, flushing,
// and the writer fence. The store's owner may change the bodies; pod sync
// calls these functions only.

import (
	"context"

	"github.com/leafsync/leafsync/internal/syncer/podsync/deletes"
	"github.com/leafsync/leafsync/internal/syncer/store"
)

// ledger is pod sync's view of the members' pending deletes in the store.
type ledger struct {
	keeper *store.Keeper
}

// load reads a member's pending deletes from the store once; before that
// an owed delete would look like an orphan.
func (l ledger) load(ctx context.Context, cluster string) error {
	return l.keeper.Load(ctx, cluster)
}

// pendingDeletes returns a member's pending deletes.
func (l ledger) pendingDeletes(cluster string) []deletes.PendingDelete {
	return deletes.Pending.Items(l.keeper, cluster)
}

// pendingDeletesOf returns a member's pending deletes of one pod name.
func (l ledger) pendingDeletesOf(cluster, namespace, name string) []deletes.PendingDelete {
	var out []deletes.PendingDelete
	for _, r := range l.pendingDeletes(cluster) {
		if r.Namespace == namespace && r.Name == name {
			out = append(out, r)
		}
	}
	return out
}

// recordDelete adds or replaces (same name and host UID) a pending delete.
func (l ledger) recordDelete(cluster string, r deletes.PendingDelete) {
	deletes.Pending.Update(l.keeper, cluster, func(ds []deletes.PendingDelete) []deletes.PendingDelete { return upsertDelete(ds, r) })
}

// dropDelete removes the pending delete of a name and host UID.
func (l ledger) dropDelete(cluster, namespace, name, hostUID string) {
	deletes.Pending.Update(l.keeper, cluster, func(ds []deletes.PendingDelete) []deletes.PendingDelete {
		return removeDelete(ds, namespace, name, hostUID)
	})
}

// flush waits until every change of a member is written.
func (l ledger) flush(ctx context.Context, cluster string) error {
	return l.keeper.FlushCluster(ctx, cluster)
}

// checkWriter fails unless this replica is still the store's writer (of
// the member, when members are sharded across replicas).
func (l ledger) checkWriter(ctx context.Context, cluster string) error {
	return l.keeper.CheckWriter(ctx, cluster)
}

func upsertDelete(ds []deletes.PendingDelete, r deletes.PendingDelete) []deletes.PendingDelete {
	for i := range ds {
		if ds[i].Namespace == r.Namespace && ds[i].Name == r.Name && ds[i].HostUID == r.HostUID {
			ds[i] = r
			return ds
		}
	}
	return append(ds, r)
}

func removeDelete(ds []deletes.PendingDelete, ns, name, hostUID string) []deletes.PendingDelete {
	out := ds[:0]
	for _, d := range ds {
		if !(d.Namespace == ns && d.Name == name && d.HostUID == hostUID) {
			out = append(out, d)
		}
	}
	return out
}
