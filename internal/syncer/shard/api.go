package shard

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/leafsync/leafsync/internal/runner"
	"github.com/leafsync/leafsync/internal/syncer/metrics"
)

// Labels and annotations of the shard and member Leases.
const (
	// LabelRing names the ring (the Helm release) a Lease belongs to, so
	// that two installations in one namespace never share members.
	LabelRing = "leafsync.io/shard-ring"
	// LabelLeaseKind is "replica" on shard Leases and "member" on member
	// Leases.
	LabelLeaseKind = "leafsync.io/shard-lease"
	// AnnotationCluster names the member a member Lease is about.
	AnnotationCluster = "leafsync.io/cluster"
	// AnnotationDraining on a shard Lease: the replica is stopping and
	// hands its members over (make before break); it is assigned nothing.
	AnnotationDraining = "leafsync.io/draining"
	// AnnotationHandoverTo on a member Lease names the incarnation that
	// asks its holder for the member (a rebalance): the holder stops acting
	// on it and passes the Lease over.
	AnnotationHandoverTo = "leafsync.io/handover-to"
)

// ErrNotOwner: this replica incarnation is not the member's writer.
var ErrNotOwner = errors.New("shard: this replica is not the member's writer")

// Options configure a Sharder.
type Options struct {
	// Client is a host client for Leases (no client-side rate limit: the
	// renewals bound themselves).
	Client kubernetes.Interface
	// Namespace holds the shard and member Leases (leafsync's namespace).
	Namespace string
	// Ring names the set of replicas that share members (the release).
	Ring string
	// Replica is this replica's name (its pod name): the shard Lease is
	// leafsync-shard-<Replica>, and assignment hashes on it.
	Replica string
	// LeaseDuration and RenewInterval of the shard Lease.
	LeaseDuration, RenewInterval time.Duration
	// LoadBound is the bounded-loads epsilon: no replica is assigned more
	// than ceil((1+LoadBound)·members/replicas).
	LoadBound float64
	// Members returns the names of the registered members (read from the
	// manager's cache of registration Secrets).
	Members func() []string
	// OnChange (may be nil) is called, without blocking, with the members
	// whose assignment or holder may have changed (nil: all of them).
	OnChange func(clusters []string)
	// Clock (the real clock when nil).
	Clock clock.WithTicker
	// Logger.
	Logger logr.Logger
}

// Sharder is this replica's part of the ring: its shard Lease, its view of
// the live replicas and of every member Lease. It is a
// prometheus.Collector of the shard metrics (register it once).
type Sharder struct {
	opts    Options
	clock   clock.WithTicker
	factory informers.SharedInformerFactory
	queue   *runner.Runner[string]
	kick    chan struct{}
	metrics *metrics.ShardCollector

	mu sync.RWMutex
	// inc is the current incarnation ("" before the first acquisition
	// and after the Lease was lost); renewed is when the last successful
	// renewal was sent (monotonic); own is the shard Lease as last written.
	inc     string
	renewed time.Time
	own     *coordinationv1.Lease
	// former incarnations of this replica: they act on nothing.
	former map[string]bool
	// lapsed: the shard Lease was not renewed within its duration and is
	// not held again yet; this replica still counts itself in the
	// assignment meanwhile (KeepWarm).
	lapsed bool
	// stranger is the shard Lease while it names a holder this process
	// does not know (a former process of the same replica).
	stranger replicaObs
	draining bool
	stopped  bool
	replicas map[string]replicaObs
	members  map[string]memberObs
	assigned map[string]string
	// inputs of the assignment as last computed (sorted).
	inputs struct{ members, replicas []string }
	last   map[string]memberState
	// requested: the members this replica asked their holder for, with
	// the incarnation that asked (a pass to it counts as a rebalance).
	requested map[string]string
	live      int
	taken     map[Reason]uint64
	// changed is closed and replaced whenever the view is recomputed.
	changed chan struct{}
	// waiting: per member, closed when a recomputation finds what
	// OnChange is told of changed for it (Changed).
	waiting map[string]chan struct{}
}

// New returns a Sharder; Start runs it.
func New(o Options) (*Sharder, error) {
	if err := o.complete(); err != nil {
		return nil, err
	}
	s := &Sharder{
		opts: o, clock: o.Clock, kick: make(chan struct{}, 1),
		former: map[string]bool{}, replicas: map[string]replicaObs{}, members: map[string]memberObs{},
		assigned: map[string]string{}, requested: map[string]string{}, last: map[string]memberState{}, taken: map[Reason]uint64{},
		changed: make(chan struct{}), waiting: map[string]chan struct{}{},
	}
	s.factory = informers.NewSharedInformerFactoryWithOptions(o.Client, 0, informers.WithNamespace(o.Namespace),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.LabelSelector = labels.Set{LabelRing: o.Ring}.String()
		}))
	if _, err := s.factory.Coordination().V1().Leases().Informer().AddEventHandler(s.leaseHandler()); err != nil {
		return nil, err
	}
	s.queue = runner.New[string](runner.Func[string](s.reconcile), runner.Options[string]{
		Name: "shard", Workers: 1, Clock: o.Clock, Logger: o.Logger})
	s.metrics = metrics.NewShardCollector(s.metricsState)
	return s, nil
}

// Start holds the shard Lease and watches the shard and member Leases
// until ctx ends, then releases the member Leases it still holds and the
// shard Lease (manager.Runnable).
func (s *Sharder) Start(ctx context.Context) error {
	s.factory.Start(ctx.Done())
	go s.queue.Run(ctx)
	for _, ok := range s.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			break
		}
	}
	s.recomputeSoon()
	s.holdShardLease(ctx)
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.factory.Shutdown()
	s.releaseAll()
	return nil
}

// NeedLeaderElection: every replica runs its shard.
func (s *Sharder) NeedLeaderElection() bool { return false }

// Replica is this replica's name.
func (s *Sharder) Replica() string { return s.opts.Replica }

// Identity is this replica's current incarnation ("" while it holds no
// shard Lease): what member Leases name as holder.
func (s *Sharder) Identity() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if !s.heldLocked() {
		return ""
	}
	return s.inc
}

// Held reports whether this replica holds its shard Lease now (renewed
// within LeaseDuration by the local monotonic clock).
func (s *Sharder) Held() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.heldLocked()
}

// Invalidate says the set of members changed (a registration Secret was
// added or removed): the assignment is computed again.
func (s *Sharder) Invalidate() { s.recomputeSoon() }

// Assigned reports whether the assignment gives cluster to this replica.
func (s *Sharder) Assigned(cluster string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.assignedLocked(cluster)
}

// Acting reports whether this replica may act on cluster now: it holds its
// shard Lease and the member Lease (as cached) names its incarnation and
// no other incarnation asks for it.
func (s *Sharder) Acting(cluster string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.actingLocked(cluster)
}

// KeepWarm reports whether this replica keeps the member's runtime while
// it does not act on it: the member Lease (as cached) names an
// incarnation of this replica, current or former, the assignment gives
// the member here, and no other incarnation asks for it (KeepWarm, the
// rule). TakeBack takes it back once the shard Lease is held again.
func (s *Sharder) KeepWarm(cluster string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	o, ok := s.members[cluster]
	if !ok || s.stopped {
		return false
	}
	return KeepWarm(Situation{Assigned: s.assignedLocked(cluster), Me: s.inc,
		Holder: o.holder, HolderFormerMine: s.former[o.holder], HandoverTo: o.handoverTo})
}

// Holder is the member Lease's holder as cached: the replica name, its
// incarnation and the member's writer term.
func (s *Sharder) Holder(cluster string) (h Holder, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	m, ok := s.members[cluster]
	if !ok {
		return Holder{}, false
	}
	return Holder{Replica: ReplicaOf(m.holder), Incarnation: m.holder, Term: m.term}, true
}

// Take makes this incarnation the member's writer, if Decide allows it
// (compare-and-swap on the member Lease; the term goes up by one); from a
// live holder it asks instead, and a later Take finds the member passed
// over. It reports whether this replica is the writer afterwards.
func (s *Sharder) Take(ctx context.Context, cluster string) (bool, error) {
	return s.take(ctx, cluster, false)
}

// TakeBack is Take for a member kept warm (KeepWarm): it takes the member
// only from a former incarnation of this replica (TakeBack, the rule) and
// reports whether this incarnation is the writer afterwards.
func (s *Sharder) TakeBack(ctx context.Context, cluster string) (bool, error) {
	return s.take(ctx, cluster, true)
}

// Changed returns a channel closed when this replica's view of the member
// next changes in what OnChange is told of: its assignment, its holder,
// whether this replica acts on it, the holder's liveness. A take that
// waits for the holder to pass the member over tries again then, as soon
// as the informer shows the pass, not at its next timed try. Get it before
// the Take it follows, so that no change in between goes unheard.
func (s *Sharder) Changed(cluster string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.waiting[cluster]
	if !ok {
		ch = make(chan struct{})
		s.waiting[cluster] = ch
	}
	return ch
}

// Confirm reads the member Lease afresh: nil only if this incarnation is
// its holder and the shard Lease is held; ErrNotOwner otherwise (or the
// read's error). Destructive calls in the member confirm first.
func (s *Sharder) Confirm(ctx context.Context, cluster string) error { return s.confirm(ctx, cluster) }

// Release gives the member up if this incarnation still holds it.
func (s *Sharder) Release(ctx context.Context, cluster string) error { return s.release(ctx, cluster) }

// Drain marks the shard Lease draining, so that the other replicas take
// this one's members, and waits until it holds none or ctx ends.
func (s *Sharder) Drain(ctx context.Context) error { return s.drain(ctx) }

// Describe implements prometheus.Collector.
func (s *Sharder) Describe(ch chan<- *prometheus.Desc) { s.metrics.Describe(ch) }

// Collect implements prometheus.Collector.
func (s *Sharder) Collect(ch chan<- prometheus.Metric) { s.metrics.Collect(ch) }

// Holder is who writes a member.
type Holder struct {
	Replica     string
	Incarnation string
	Term        int32
}
