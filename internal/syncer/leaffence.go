package syncer

import (
	"context"
	"fmt"

	coreinformers "k8s.io/client-go/informers/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/leafsync/leafsync/internal/leafnode"
	"github.com/leafsync/leafsync/internal/syncer/shard"
)

// leafFence is clusters.Options.FenceLeaf of a sharded replica: the leaf
// of a member it has just taken is written once, naming this writer
// ("<incarnation>/<term>", leafnode.Fence), before the member is
// published, so that a former writer's in-flight write is refused even
// before this replica's first sync or renewal (docs/scaling.md
// "Fencing"). Its own client, without a client-side rate limit
// (leafClient): a fence must not queue behind other writes.
func leafFence(mgr manager.Manager, sharder *shard.Sharder, nodes coreinformers.NodeInformer) (func(ctx context.Context, cluster, leaf string) error, error) {
	host, err := leafClient(mgr.GetConfig())
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, cluster, leaf string) error {
		h, ok := sharder.Holder(cluster)
		if !ok || h.Incarnation == "" || h.Incarnation != sharder.Identity() {
			return fmt.Errorf("fencing the leaf of %s: this replica is not its writer (any more)", cluster)
		}
		f := leafnode.Fence{Client: host}
		if nodes.Informer().HasSynced() {
			f.Nodes = nodes.Lister()
		}
		return f.Write(ctx, cluster, leaf, fmt.Sprintf("%s/%d", h.Incarnation, h.Term))
	}, nil
}
