package clusters

import (
	"context"
	"fmt"
)

// fencedTake is take (Ownership.Take) completed by fence
// (Options.FenceLeaf): once this replica is the member's writer, and
// before the member is published, it writes the member's leaf once, so
// that the versions of the leaf Node and Lease a former writer holds are
// stale before this replica acts (docs/scaling.md "Fencing"). Until the
// fence is written the take does not count: a failed write (the host
// unreachable) is tried again with the take, which reads the member Lease
// afresh first, so a replica that lost the member meanwhile writes no
// fence. Each member's take runs in a goroutine of its own: a member whose
// leaf cannot be written holds up no other.
func (r *runtimes) fencedTake(take func(ctx context.Context, cluster string) (bool, error),
	fence func(ctx context.Context, cluster, leaf string) error) func(ctx context.Context, cluster string) (bool, error) {
	return func(ctx context.Context, cluster string) (bool, error) {
		taken, err := take(ctx, cluster)
		if !taken || err != nil {
			return taken, err
		}
		leaf, ok := r.pendingLeaf(cluster)
		if !ok {
			return true, nil // not a take before publishing: nothing to fence here
		}
		if err := fence(ctx, cluster, leaf); err != nil {
			return false, fmt.Errorf("taken, but the leaf is not fenced yet: %w", err)
		}
		return true, nil
	}
}

// pendingLeaf is the leaf name of the member's runtime waiting to take it.
func (r *runtimes) pendingLeaf(cluster string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.pending[cluster]
	if p == nil {
		return "", false
	}
	return p.spec.LeafName, true
}
