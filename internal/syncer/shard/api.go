package shard

import (
	"context"
	"errors"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
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
// the live replicas and of every member Lease.
type Sharder struct {
	opts Options
}

// New returns a Sharder; Start runs it.
func New(o Options) (*Sharder, error) { return &Sharder{opts: o}, nil }

// Start holds the shard Lease and watches the shard and member Leases
// until ctx ends, then releases the shard Lease (manager.Runnable).
func (s *Sharder) Start(ctx context.Context) error { panic("shard: not built yet") }

// NeedLeaderElection: every replica runs its shard.
func (s *Sharder) NeedLeaderElection() bool { return false }

// Replica is this replica's name.
func (s *Sharder) Replica() string { return s.opts.Replica }

// Identity is this replica's current incarnation ("" while it holds no
// shard Lease): what member Leases name as holder.
func (s *Sharder) Identity() string { panic("shard: not built yet") }

// Held reports whether this replica holds its shard Lease now (renewed
// within LeaseDuration by the local monotonic clock).
func (s *Sharder) Held() bool { panic("shard: not built yet") }

// Invalidate says the set of members changed (a registration Secret was
// added or removed): the assignment is computed again.
func (s *Sharder) Invalidate() { panic("shard: not built yet") }

// Assigned reports whether the assignment gives cluster to this replica.
func (s *Sharder) Assigned(cluster string) bool { panic("shard: not built yet") }

// Acting reports whether this replica may act on cluster now: it holds its
// shard Lease and the member Lease (as cached) names its incarnation.
func (s *Sharder) Acting(cluster string) bool { panic("shard: not built yet") }

// Holder is the member Lease's holder as cached: the replica name, its
// incarnation and the member's writer term.
func (s *Sharder) Holder(cluster string) (h Holder, ok bool) { panic("shard: not built yet") }

// Take makes this incarnation the member's writer, if Decide allows it
// (compare-and-swap on the member Lease; the term goes up by one). It
// reports whether this replica is the writer afterwards.
func (s *Sharder) Take(ctx context.Context, cluster string) (bool, error) {
	panic("shard: not built yet")
}

// Confirm reads the member Lease afresh: nil only if this incarnation is
// its holder and the shard Lease is held; ErrNotOwner otherwise.
// Destructive calls in the member confirm first.
func (s *Sharder) Confirm(ctx context.Context, cluster string) error { panic("shard: not built yet") }

// Release gives the member up if this incarnation still holds it.
func (s *Sharder) Release(ctx context.Context, cluster string) error { panic("shard: not built yet") }

// Drain marks the shard Lease draining, so that the other replicas take
// this one's members, and waits until it holds none or ctx ends.
func (s *Sharder) Drain(ctx context.Context) error { panic("shard: not built yet") }

// Holder is who writes a member.
type Holder struct {
	Replica     string
	Incarnation string
	Term        int32
}
