// Package syncer wires leafsync's controllers into a controller-runtime
// manager: registration of members, their runtimes, leaf nodes and pod sync.
// Each concern lives in its own sub-package; this package only assembles them.
package syncer

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/leafnode"
	"github.com/leafsync/leafsync/internal/syncer/clusters"
	"github.com/leafsync/leafsync/internal/syncer/config"
	"github.com/leafsync/leafsync/internal/syncer/guard"
	"github.com/leafsync/leafsync/internal/syncer/leaves"
	"github.com/leafsync/leafsync/internal/syncer/member"
	"github.com/leafsync/leafsync/internal/syncer/registration"
	"github.com/leafsync/leafsync/internal/syncer/shard"
	"github.com/leafsync/leafsync/internal/syncer/verify"
)

// CacheOptions restricts what the manager's cache may watch. Secrets are
// read only in leafsync's own namespace, so RBAC never needs cluster-wide
// Secret access.
func CacheOptions(cfg config.Config) cache.Options {
	return cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Namespaces: map[string]cache.Config{cfg.Namespace: {}}},
		},
	}
}

// Option changes how Setup wires the controllers.
type Option func(*options)

type options struct {
	clock     clock.WithTicker
	onSharder func(*shard.Sharder)
}

// WithClock gives every controller that takes a clock (probes and the
// readiness engine's times, leaves, pod sync) this one instead of the
// real clock. cmd/leafsync uses it only for the test-only clock skew
// (LEAFSYNC_TEST_CLOCK_SKEW).
func WithClock(c clock.WithTicker) Option { return func(o *options) { o.clock = c } }

// WithSharder hands f this replica's Sharder when members are sharded
// (cmd/leafsync drains it on SIGTERM).
func WithSharder(f func(*shard.Sharder)) Option { return func(o *options) { o.onSharder = f } }

// Setup adds leafsync's controllers to the manager.
func Setup(mgr manager.Manager, cfg config.Config, opts ...Option) error {
	o := options{clock: clock.RealClock{}}
	for _, opt := range opts {
		opt(&o)
	}
	fleet, err := hysteresis.NewFleet(cfg.Hysteresis)
	if err != nil {
		return fmt.Errorf("hysteresis: %w", err)
	}
	m := cfg.Members
	// The host config's user agent carries leafsync's version
	// (cmd/leafsync sets it); members see the same one.
	userAgent := mgr.GetConfig().UserAgent
	if userAgent == "" {
		userAgent = member.DefaultUserAgent
	}
	// Members sharded across replicas (sharding.enabled): the Sharder
	// says which ones this replica acts on; a change looks at their
	// registration Secrets again.
	var enqueueClusters func(clusters []string)
	sharder, err := setupSharding(mgr, cfg, o.clock, func(cs []string) { enqueueClusters(cs) })
	if err != nil {
		return err
	}
	var own clusters.Ownership
	if sharder != nil {
		own = sharder
		if o.onSharder != nil {
			o.onSharder(sharder)
		}
	}
	// State that must survive restarts (docs/state-store.md).
	state, err := setupState(mgr, cfg, o.clock, sharder)
	if err != nil {
		return err
	}
	// Sharded: the leaf of a member this replica takes is fenced before
	// the member is published (leafFence, made below with the leaf
	// Nodes' informer).
	var fenceLeaf, fenceHook func(ctx context.Context, cluster, leaf string) error
	if sharder != nil {
		fenceHook = func(ctx context.Context, cluster, leaf string) error { return fenceLeaf(ctx, cluster, leaf) }
	}
	ctl, err := clusters.New(mgr.GetClient(), clusters.Options{
		Namespace: cfg.Namespace,
		Policy: registration.Policy{
			AllowExecAuth:       m.AllowExecAuth,
			AllowFileReferences: m.AllowFileReferences,
			Thresholds:          &cfg.Hysteresis,
		},
		Engine: fleet,
		Runtime: clusters.RuntimeSettings{
			UserAgent:    userAgent,
			Timeout:      m.Timeout.Duration,
			QPS:          m.QPS,
			Burst:        m.Burst,
			ProbeTimeout: m.ProbeTimeout.Duration,
			Breaker: member.BreakerSettings{
				ConsecutiveFailures: m.Breaker.ConsecutiveFailures,
				OpenTimeout:         m.Breaker.OpenTimeout.Duration,
				HalfOpenRequests:    m.Breaker.HalfOpenRequests,
			},
			SwapTimeout: m.ReconnectTimeout.Duration,
		},
		Recorder:  mgr.GetEventRecorder("leafsync"),
		Logger:    mgr.GetLogger(),
		Reader:    mgr.GetAPIReader(),
		Restore:   state.restoreHook,
		TakenBack: state.takenBackHook,
		OnObserve: state.persister.Observed,
		Clock:     o.clock,
		Ownership: own,
		FenceLeaf: fenceHook,
	})
	if err != nil {
		return err
	}
	enqueueClusters = ctl.EnqueueClusters
	state.registerDeregistration(ctl.Registry())
	if err := ctl.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("clusters controller: %w", err)
	}
	if err := setupMetrics(ctl.Registry(), fleet); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	leafNodes, err := setupLeafNodes(mgr, sharder != nil)
	if err != nil {
		return err
	}
	if sharder != nil {
		if fenceLeaf, err = leafFence(mgr, sharder, leafNodes); err != nil {
			return err
		}
	}
	records, err := setupEvictionGuard(mgr, cfg, ctl.Registry(), leafNodes, o.clock)
	if err != nil {
		return err
	}
	// The verifier tells the leaves when a member's verification changed.
	var kickLeaf func(cluster string)
	verifier, err := setupVerification(mgr, cfg, ctl.Registry(), func(cluster string) { kickLeaf(cluster) }, o.clock)
	if err != nil {
		return err
	}
	leafCtl, err := setupLeaves(mgr, cfg, ctl.Registry(), leafNodes, records, verifier, o.clock)
	if err != nil {
		return err
	}
	kickLeaf = leafCtl.Kick
	keeper := state.keeper
	if err := setupPodSync(mgr, cfg, ctl.Registry(), keeper, leafNodes, o.clock); err != nil {
		return err
	}
	return setupKubeletAPI(mgr, cfg, ctl.Registry(), leafNodes)
}

// setupLeafNodes starts an informer of the host's leaf Nodes (label
// leafsync.io/cluster): the leaf writer reads from it, and leaves and pod
// sync check with it that a Node is leafsync's leaf of a cluster before
// they renew its Lease or touch a pod bound to it. It runs where they do:
// on the leader, or, sharded, on every replica.
func setupLeafNodes(mgr manager.Manager, sharded bool) (coreinformers.NodeInformer, error) {
	host, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return nil, fmt.Errorf("host client for leaf nodes: %w", err)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(host, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = leafnode.LabelCluster }))
	nodes := factory.Core().V1().Nodes()
	nodes.Informer()
	return nodes, mgr.Add(&replicaRunnable{sharded: sharded, run: func(ctx context.Context) error {
		factory.Start(ctx.Done())
		<-ctx.Done()
		factory.Shutdown()
		return nil
	}})
}

// replicaRunnable runs on the leader only, or, sharded, on every replica
// (a runnable that does not say needs leader election).
type replicaRunnable struct {
	sharded bool
	run     func(context.Context) error
}

func (r *replicaRunnable) Start(ctx context.Context) error { return r.run(ctx) }
func (r *replicaRunnable) NeedLeaderElection() bool        { return !r.sharded }

// setupLeaves adds the controller of leaf Nodes and their Lease heartbeats.
func setupLeaves(mgr manager.Manager, cfg config.Config, reg *clusters.Registry, nodes coreinformers.NodeInformer, records *guard.Records, verifier *verify.Controller, clk clock.WithTicker) (*leaves.Controller, error) {
	host, err := leafClient(mgr.GetConfig())
	if err != nil {
		return nil, err
	}
	leaseClient, err := leafClient(mgr.GetConfig())
	if err != nil {
		return nil, err
	}
	l := cfg.Leaves
	o := leaves.Options{
		Host:               host,
		Nodes:              nodes,
		Leases:             leaseClient,
		Registry:           reg,
		LeafTaint:          l.LeafTaint,
		RenewInterval:      l.LeaseRenewInterval.Duration,
		LeaseDuration:      l.LeaseDuration.Duration,
		RenewTimeout:       l.LeaseRenewTimeout.Duration,
		ConditionHeartbeat: l.ConditionHeartbeat.Duration,
		AllocatableEvery:   l.AllocatableInterval.Duration,
		Resync:             l.Resync.Duration,
		Recorder:           mgr.GetEventRecorder("leafsync"),
		Logger:             mgr.GetLogger(),
		Clock:              clk,
	}
	if records != nil {
		o.Guard = records
	}
	if verifier != nil {
		o.Verification = verifier
	}
	c := leaves.New(o)
	return c, mgr.Add(c)
}

// leafClient is a host client of leaf Node writes or of leaf Lease
// renewals (each has its own), without a client-side rate limit. Both
// are bounded by themselves: renewals to one per leaf per renew interval, Node writes to
// one per leaf per leaves' minGap and to as many in flight as the leaves
// controller has workers. A limiter could only make them queue: one
// member's node change is a write of each of that member's leaves at once
// (200 at 400 registrations in make bench-scale), which 50 writes/s
// spread over 4s, and renewals would queue behind them. The host's API
// Priority and Fairness protects its API server.
func leafClient(base *rest.Config) (kubernetes.Interface, error) {
	cfg := rest.CopyConfig(base)
	cfg.QPS = -1 // no client-side rate limiter
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("host client for leaves: %w", err)
	}
	return c, nil
}
