package store

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/go-logr/logr"
)

// Owners tells a sharded Keeper, member by member, whether this replica is
// the member's writer (internal/syncer/shard's Sharder, adapted in
// internal/syncer/state.go). Without it (KeeperOptions.Owners nil) the
// Keeper is the one writer of its process, fenced by the store's term.
type Owners interface {
	// Writer is this replica's stamp on a member's records while it is
	// the member's writer: the member's writer term and this replica's
	// incarnation; ok is false while it is not (it writes nothing for the
	// member then).
	Writer(cluster string) (term uint64, writer string, ok bool)
	// Confirm reads afresh whether this replica is still the member's
	// writer: nil if so, an error wrapping ErrNotOwner if another replica
	// is (or none), any other error if it cannot tell.
	Confirm(ctx context.Context, cluster string) error
}

// ErrNotOwner: in sharded mode, this replica is not the member's writer.
var ErrNotOwner = errors.New("store: this replica is not the member's writer")

// errNotActing: a sharded Keeper does not write a member it is not acting
// on; the member's changes wait in memory.
var errNotActing = fmt.Errorf("%w now; its changes wait", ErrNotOwner)

// owners is a sharded Keeper's writer check, one member at a time: a
// member is written with its own writer term, only while this replica is
// its writer; a member that Confirm says another replica took is fenced
// alone, until this replica takes it again (another term and incarnation).
type owners struct {
	of    Owners
	calls *calls
	log   logr.Logger

	mu     sync.Mutex
	fenced map[string]writerStamp // member → the stamp Confirm refused
}

// writerStamp is who writes a member's records: its writer term and the
// writer's incarnation.
type writerStamp struct {
	term   uint64
	writer string
}

// stamp is the term and writer of a member's records now, or errNotActing.
func (o *owners) stamp(cluster string) (uint64, string, error) {
	term, writer, ok := o.of.Writer(cluster)
	now := writerStamp{term, writer}
	o.mu.Lock()
	defer o.mu.Unlock()
	f, was := o.fenced[cluster]
	switch {
	case !ok, was && f == now:
		return 0, "", errNotActing
	case was:
		delete(o.fenced, cluster) // taken again since
	}
	return term, writer, nil
}

// confirm asks afresh whether this replica still writes the member (after
// a conflicting write, a record of a newer term, or before a destructive
// call). If another replica does, the member is fenced in the stamp this
// replica holds now and the error wraps ErrFenced and ErrNotOwner; other
// errors say it cannot tell.
func (o *owners) confirm(ctx context.Context, cluster string) error {
	term, writer, ok := o.of.Writer(cluster)
	_, err := call(o.calls, ctx, "confirm", cluster, func(ctx context.Context) (struct{}, error) {
		err := o.of.Confirm(ctx, cluster)
		if errors.Is(err, ErrNotOwner) {
			err = fmt.Errorf("%w for cluster %s: %w", ErrFenced, cluster, err)
		}
		return struct{}{}, err
	})
	if errors.Is(err, ErrFenced) {
		if ok {
			o.mu.Lock()
			o.fenced[cluster] = writerStamp{term, writer}
			o.mu.Unlock()
		}
		o.log.Info("another replica writes this member now; this one stops writing its state", "cluster", cluster, "term", term)
	}
	return err
}
