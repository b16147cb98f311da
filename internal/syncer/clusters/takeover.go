package clusters

import (
	"context"

	"github.com/leafsync/leafsync/internal/syncer/registration"
)

// Sharded mode: a member this replica is assigned but does not act on yet
// gets a runtime that is not published in the Registry (no leaf, no pod
// sync, no status) until the runtime has taken the member. The take waits
// for the runtime's caches to sync, bounded by SwapTimeout (make before
// break: the previous writer keeps serving meanwhile; a member that cannot
// be reached is taken all the same, so its leaf's Lease is renewed from
// its saved state). The take counts once the member's leaf is fenced
// (fence.go). Then the member's saved state is restored and the member
// published; its Secret is looked at again, now as its writer's.

// takeOverLocked starts (or keeps) the unpublished runtime of spec's
// member and its take; r.mu must be held.
func (r *runtimes) takeOverLocked(spec *registration.Spec) error {
	if p := r.pending[spec.Cluster]; p != nil {
		if p.spec.ConnectionHash == spec.ConnectionHash {
			p.spec = spec
			return nil
		}
		r.cancelPendingLocked(spec.Cluster)
	}
	rt, err := r.newRuntime(spec)
	if err != nil {
		return err
	}
	// The connect gate, as for a published runtime; the take waits on
	// its own context, which cancelling p ends too.
	gateCancel := r.startGatedLocked(spec, rt)
	ctx, cancel := context.WithCancel(context.Background())
	p := &swap{rt: rt, spec: spec, cancel: func() { gateCancel(); cancel() }}
	r.pending[spec.Cluster] = p
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		r.takeAndPublish(ctx, p)
	}()
	r.log.Info("member assigned to this replica: taking it once its caches synced", "cluster", spec.Cluster)
	return nil
}

// takeAndPublish takes p's member once p's runtime synced (or SwapTimeout
// passed), then publishes it; it gives up when ctx ends (p cancelled).
func (r *runtimes) takeAndPublish(ctx context.Context, p *swap) {
	cluster := p.rt.Cluster()
	syncCtx, cancelSync := context.WithTimeout(ctx, r.settings.SwapTimeout)
	synced := p.rt.WaitForCacheSync(syncCtx)
	cancelSync()
	if !r.takeWhenAllowed(ctx, cluster, r.take) {
		return
	}
	// The previous writer's last record is final now: restore it before
	// the member's first published decision.
	r.restore(ctx, cluster)
	r.mu.Lock()
	if r.pending[cluster] != p || r.shutdown {
		r.mu.Unlock()
		return // superseded; whoever cancelled stops p.rt
	}
	delete(r.pending, cluster)
	r.reg.add(p.spec, p.rt)
	r.mu.Unlock()
	r.log.Info("member taken: this replica is its writer", "cluster", cluster, "synced", synced)
	r.enqueue(p.spec.Secret)
}

// takeWhenAllowed tries to take the member with take until it is this
// replica's (true) or ctx ends (false): again whenever the sharding's view
// of the member changes (Changed), and every takeRetry.
func (r *runtimes) takeWhenAllowed(ctx context.Context, cluster string, take func(context.Context, string) (bool, error)) bool {
	for ctx.Err() == nil {
		// Before the try: a pass-over seen after it wakes the wait.
		changed := r.changed(cluster)
		taken, err := take(ctx, cluster)
		if err != nil {
			r.log.V(1).Info("taking the member failed; trying again", "cluster", cluster, "error", err.Error())
		}
		if taken {
			return true
		}
		t := r.clock.NewTimer(takeRetry)
		select {
		case <-ctx.Done():
		case <-changed:
		case <-t.C():
		}
		t.Stop()
	}
	return false
}

// takeBack keeps a published member whose writer is still an incarnation
// of this replica while this replica's shard Lease lapsed
// (Ownership.KeepWarm): its runtime, caches and engine state stay (every
// write waits for Acting), and the member is taken back from the former
// incarnation once the Lease is held again (Ownership.TakeBack: never
// from another replica's incarnation, which shardGate hands the member
// over to), in a goroutine of its own (a lapse concerns every member at
// once). No new runtime, no re-list, no
// restore: nobody else wrote the member meanwhile. No fence either
// (fencedTake fences only takes before publishing): the leaf's versions
// are this process's own, no other writer's; a write of the former
// incarnation still in flight is this runtime's and conflicts with
// nothing but its own next write, which reads again. resume brings the
// state store to the new writer term.
func (r *runtimes) takeBack(cluster string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.shutdown || r.backs[cluster] != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.backs[cluster] = cancel
	r.log.Info("this replica's shard Lease lapsed and, as far as it sees, nobody took the member: keeping its runtime, taking it back once the Lease is held again", "cluster", cluster)
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		taken := r.takeWhenAllowed(ctx, cluster, r.takeBackFrom)
		if taken && r.resume != nil {
			r.resume(ctx, cluster)
		}
		r.mu.Lock()
		current := r.backs[cluster] != nil && ctx.Err() == nil
		if current {
			delete(r.backs, cluster)
		}
		m, published := r.reg.Member(cluster)
		r.mu.Unlock()
		if !taken || !current || !published {
			return // handed over or stopping meanwhile
		}
		r.log.Info("member taken back: acting again with the runtime it kept", "cluster", cluster)
		r.enqueue(m.Spec.Secret)
	}()
}

// cancelTakeBackLocked abandons a take back under way; r.mu must be held.
func (r *runtimes) cancelTakeBackLocked(cluster string) {
	if cancel := r.backs[cluster]; cancel != nil {
		delete(r.backs, cluster)
		cancel()
	}
}

// cancelPendingLocked abandons a take under way and stops its runtime;
// r.mu must be held.
func (r *runtimes) cancelPendingLocked(cluster string) { r.abandonLocked(r.pending, cluster) }

// handOver stops what this replica runs for a member another replica
// writes now: no cleanup hooks, and the member keeps this host's claim.
// Its engine state goes; the next writer restores the saved one.
func (r *runtimes) handOver(cluster string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cancelPendingLocked(cluster)
	r.cancelTakeBackLocked(cluster)
	_, active, ok := r.reg.remove(cluster)
	r.reg.forget(cluster)
	if !ok {
		return
	}
	r.cancelSwapLocked(cluster)
	if active != nil {
		r.stopAsync(active)
	}
	r.log.Info("member runtime stopped: handed over", "cluster", cluster)
}

// has reports whether a runtime of the member runs here, published or
// taking the member.
func (r *runtimes) has(cluster string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, published := r.reg.Member(cluster)
	return published || r.pending[cluster] != nil
}
