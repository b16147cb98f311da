package clusters

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/leafsync/leafsync/internal/syncer/registration"
)

// Ownership is this replica's share of the members when they are sharded
// across replicas (a *shard.Sharder, docs/scaling.md). Nil: this replica
// acts on every member (alone, or as the elected leader).
//
// In sharded mode a replica runs a member only while Acting says so:
//
//	not Assigned, not Acting ─> nothing runs, nothing is written
//	Assigned, not Acting ─────> the runtime starts unpublished; once its
//	                            caches synced (or SwapTimeout passed) it
//	                            Takes the member, fences its leaf
//	                            (fence.go), then restores its saved state
//	                            and publishes it (runtimes.takeOver)
//	Acting ───────────────────> the registration lifecycle as unsharded:
//	                            finalizer, status, Events, cleanup
//	was Acting, the shard Lease
//	lapsed, nobody took it ────> KeepWarm: the runtime stays published,
//	                            writing nothing; taken back once the
//	                            Lease is held again (runtimes.takeBack)
//	was Acting, a newer holder,
//	or another asks for it ───> the runtime stops (MemberRemoved: the
//	                            leaf and its pods are left to the new
//	                            holder; nothing is cleaned up)
type Ownership interface {
	// Assigned: the assignment gives the member to this replica.
	Assigned(cluster string) bool
	// Acting: this replica is the member's writer now.
	Acting(cluster string) bool
	// KeepWarm: this replica does not act on the member only because its
	// own shard Lease lapsed: the member's writer is an incarnation of
	// this replica (nobody else took it), the assignment still gives it
	// here and nobody asks for it (shard.KeepWarm). Its runtime stays,
	// and TakeBack takes it back once the Lease is held again.
	KeepWarm(cluster string) bool
	// TakeBack is Take for a member kept warm: it takes the member only
	// from a former incarnation of this replica, never from another
	// replica's (that one wrote the member meanwhile: the runtime kept
	// is handed over instead).
	TakeBack(ctx context.Context, cluster string) (bool, error)
	// Take makes this replica the member's writer if the sharding rules
	// allow it now (from a live holder: asks it, and is the writer on a
	// later try once the holder passed it over); it reports whether it is
	// the writer afterwards.
	Take(ctx context.Context, cluster string) (bool, error)
	// Changed is closed when the member's assignment, writer or writer's
	// liveness next changes in this replica's view: a take waiting for
	// the writer to pass the member over tries again then. Got before the
	// Take it follows, it misses no change in between.
	Changed(cluster string) <-chan struct{}
	// Release gives a deregistered member up.
	Release(ctx context.Context, cluster string) error
}

// takeRetry spaces the tries to take a member this replica is assigned
// while its view of the member does not change (Changed): the rules with a
// delay (a failover, an unanswered request) and a failed call are tried
// again then.
const takeRetry = time.Second

// Sharded reports whether members are sharded across replicas: then each
// component acts on a member only while Acting(member), and runs on every
// replica (NeedLeaderElection false).
func (r *Registry) Sharded() bool { return r.own != nil }

// Acting reports whether this replica may write for the member now: always
// when not sharded; when sharded, while it is the member's writer. Check
// it before every write to the host for a member (leaf Node, leaf Lease,
// host pod): a replica that lost the member, or its own shard Lease, must
// write nothing.
func (r *Registry) Acting(cluster string) bool { return r.own == nil || r.own.Acting(cluster) }

// shardGate applies the ownership rules before a Secret's registration
// lifecycle: done means there is nothing more to do for the Secret now
// (another replica acts on its member, or will).
func (c *Controller) shardGate(ctx context.Context, s *corev1.Secret) (res reconcile.Result, done bool, err error) {
	own := c.opts.Ownership
	if own == nil {
		return reconcile.Result{}, false, nil
	}
	key := client.ObjectKeyFromObject(s)
	cluster, labelled := s.Labels[registration.LabelCluster]
	if owned, ok := c.reg.clusterOf(key); ok && owned != cluster {
		if !own.Acting(owned) {
			c.runtimes.handOver(owned)
		}
		if !labelled {
			cluster = owned
		}
	}
	if cluster == "" {
		// Unlabelled, and not a member this replica runs: the replica
		// that acts on its member, if any, deregisters it.
		c.forget(key)
		return reconcile.Result{}, true, nil
	}
	if own.Acting(cluster) {
		return reconcile.Result{}, false, nil
	}
	// Not the writer: what this replica published for the member goes
	// (another replica took it or asks for it, or it moved away), unless
	// only this replica's shard Lease lapsed: then it is kept and taken
	// back; the Secret is looked at again once it is.
	if _, published := c.reg.Member(cluster); published {
		if own.KeepWarm(cluster) {
			c.runtimes.takeBack(cluster)
			return reconcile.Result{}, true, nil
		}
		c.log.Info("member handed over: another replica is its writer now, or asks for it, or it is assigned elsewhere", "cluster", cluster)
		c.runtimes.handOver(cluster)
	}
	if !own.Assigned(cluster) {
		c.runtimes.handOver(cluster) // a take under way, too
		c.forget(key)
		return reconcile.Result{}, true, nil
	}
	if s.DeletionTimestamp.IsZero() && labelled {
		// The lifecycle runs; the member's runtime takes it when ready
		// (runtimes.takeOver), and the Secret is written from then on.
		return reconcile.Result{}, false, nil
	}
	// Deregistered: the cleanup needs no runtime, only the member.
	if !controllerutil.ContainsFinalizer(s, registration.Finalizer) {
		return reconcile.Result{}, true, nil
	}
	taken, err := own.Take(ctx, cluster)
	if err != nil || !taken {
		return reconcile.Result{RequeueAfter: takeRetry}, true, err
	}
	return reconcile.Result{}, false, nil
}

// writes reports whether this replica writes the Secret's status and
// Events: unsharded always; sharded, when it acts on the member, or when
// it is assigned a member that runs nowhere here (a refused registration:
// someone must say why).
func (c *Controller) writes(s *corev1.Secret) bool {
	own := c.opts.Ownership
	if own == nil {
		return true
	}
	cluster, ok := c.reg.clusterOf(client.ObjectKeyFromObject(s))
	if !ok {
		cluster = s.Labels[registration.LabelCluster]
	}
	if cluster == "" {
		return false
	}
	return own.Acting(cluster) || (own.Assigned(cluster) && !c.runtimes.has(cluster))
}

// releaseMember gives a deregistered member up (sharded), so its Lease
// names no writer.
func (c *Controller) releaseMember(ctx context.Context, cluster string) {
	if own := c.opts.Ownership; own != nil {
		if err := own.Release(ctx, cluster); err != nil {
			c.log.Info("releasing the deregistered member's Lease failed", "cluster", cluster, "error", err.Error())
		}
	}
}

// acting reports whether this replica is the member's writer (always
// when not sharded).
func (c *Controller) acting(cluster string) bool { return c.reg.Acting(cluster) }

// EnqueueClusters looks again at the registration Secrets of clusters (nil:
// every one): the sharding's OnChange, when an assignment or a member's
// writer may have changed. A member kept warm through a lapse of this
// replica's shard Lease is taken back from here at once, each in its own
// goroutine, not when its Secret comes up in the registration queue: that
// queue has one worker, and after a lapse at 600 registrations the last
// take backs waited 60–85s behind reconciles of members acting again,
// past their leaf Leases (scale benchmark, #33). shardGate still starts
// one for a Secret reconciled first; takeBack runs once per member.
func (c *Controller) EnqueueClusters(clusters []string) {
	c.takeBackKeptWarm(clusters)
	ctx := context.Background()
	var list corev1.SecretList
	opts := []client.ListOption{client.InNamespace(c.opts.Namespace)}
	if clusters == nil {
		opts = append(opts, client.HasLabels{registration.LabelCluster})
	}
	want := map[string]bool{}
	for _, m := range clusters {
		want[m] = true
	}
	if err := c.client.List(ctx, &list, opts...); err != nil {
		c.log.Error(err, "listing registration Secrets")
		return
	}
	for i := range list.Items {
		s := &list.Items[i]
		name, labelled := s.Labels[registration.LabelCluster]
		owned, ok := c.reg.clusterOf(client.ObjectKeyFromObject(s))
		if clusters == nil || (labelled && want[name]) || (ok && want[owned]) {
			c.enqueue(client.ObjectKeyFromObject(s))
		}
	}
}

// takeBackKeptWarm starts the take back of each published member of
// clusters (nil: every one) that this replica does not act on and keeps
// warm (the shardGate rule).
func (c *Controller) takeBackKeptWarm(clusters []string) {
	own := c.opts.Ownership
	if own == nil {
		return
	}
	if clusters == nil {
		for _, m := range c.reg.Members() {
			clusters = append(clusters, m.Cluster())
		}
	}
	for _, cluster := range clusters {
		if _, published := c.reg.Member(cluster); published && !own.Acting(cluster) && own.KeepWarm(cluster) {
			c.runtimes.takeBack(cluster)
		}
	}
}
