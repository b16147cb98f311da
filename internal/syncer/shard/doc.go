// Package shard spreads registered members over leafsync's active
// replicas (docs/scaling.md "Sharding members"): each replica holds a
// shard Lease of its own; every replica computes, from the registered
// members and the live shard Leases, which replica each member belongs to
// (rendezvous hashing with bounded loads, Assign); and a member Lease per
// member records which replica incarnation is the member's writer, with
// leaseTransitions as the member's writer term.
//
// The member Lease is the fence: a replica acts on a member (probes it,
// writes its leaf, renews the leaf's Lease, syncs its pods) only while
// Acting says so, and confirms with a fresh read (Confirm) before every
// destructive call in the member. A replica that loses its shard Lease
// (paused, cut off) stops acting at once and comes back as a new
// incarnation, which owns nothing until it takes members again. The
// members its former incarnation still holds, that nobody else took,
// are kept warm meanwhile (KeepWarm: their runtimes stay) and taken back
// from that incarnation at once (TakeBack).
//
// Taking a member from a live owner is make-before-break and one writer
// at a time: the new owner starts the member's runtime first and, when its
// caches are synced, asks for the member (AnnotationHandoverTo on the
// member Lease); the owner stops acting on it as soon as it sees the
// request and passes the Lease over; the new owner acts once it sees
// itself as holder (Changed wakes its take when its informer shows the
// pass, and the owner answers as its informer shows the request: neither
// waits for a timed look). Decide is the pure rule of when a replica may
// take or ask for a member, AnswerRequest the owner's side.
//
// # Objects (leafsync's namespace, labelled leafsync.io/shard-ring=<ring>)
//
//	leafsync-shard-<replica>   holder <replica>-<8 hex> (the incarnation),
//	                           renewed every RenewInterval;
//	                           leafsync.io/draining: "true" while it drains
//	leafsync-member-<cluster>  holder: the writer's incarnation;
//	                           leaseTransitions: the writer term (+1 a take);
//	                           leafsync.io/handover-to: an asker (rebalance);
//	                           not renewed (liveness is the shard Lease's)
//
// # Liveness, on one clock
//
// Another replica is live while its shard Lease names a holder and this
// replica has seen its resourceVersion change within the Lease's duration,
// timed by this replica's clock from the moment it saw the change (as
// client-go's leader election does): renewTime, written by another
// machine's clock, is never compared with this one's. A Lease seen for the
// first time counts as just renewed. A live replica that is draining is
// still live (its members are taken from it make-before-break) but is
// assigned nothing.
//
// This replica Holds its own Lease while its last successful renewal was
// sent less than LeaseDuration ago by its monotonic clock. So a process
// that was paused (SIGSTOP, a stalled VM) or cut off resumes with Held
// false, before any write: by then the others may have seen its Lease
// expire and taken its members. It then acquires its Lease again as a new
// incarnation; the members the old one held are no longer Acting and are
// taken again by compare-and-swap, which fails wherever another replica
// took them meanwhile. Its view from before the gap is not trusted either:
// every other replica counts as just seen, so that the resumed replica
// does not find them all expired and take their members.
//
//	not held ──acquire as a new incarnation──▶ Held ⟲ renewed every RenewInterval
//	    ▲                                        │
//	    └──── no renewal landed within LeaseDuration,
//	          or the Lease names another holder
//
// # Taking a member (Decide)
//
// A replica takes a member only while it Holds its Lease and the
// assignment gives it the member, and only when
//
//	(a) new        the member Lease is absent or names no holder;
//	(c) rebalance  the holder is live: the taker's runtime has synced
//	               first; it asks (handover-to: its incarnation); the
//	               holder stops acting when it sees the request and
//	               passes the Lease over (holder, term +1), or refuses an
//	               asker not live in its view; a holder that has not
//	               answered within LeaseDuration of the request is taken
//	               from by compare and swap;
//	(d) failover   the holder's shard Lease is not live in this view (or
//	               the holder is a former incarnation of this replica),
//	               and this replica first saw that holder on the member
//	               Lease at least LeaseDuration ago: a holder whose shard
//	               Lease this replica has not seen yet counts as live for
//	               that long, so that nothing ping-pongs. The holder's
//	               shard Lease is read afresh before a failover: a view
//	               that fell behind (a stalled watch) takes nothing from
//	               a live replica.
//
// (b): a member whose Lease names this incarnation is this replica's to
// serve, assigned or not, until another replica takes it.
//
// # Defaults, and why
//
//   - LeaseDuration 15s, RenewInterval 2s: controller-runtime's leader
//     election; seven renewals may fail before the Lease is lost, and a
//     lost replica's members move within 17s, well inside a leaf Lease's
//     40s.
//   - LoadBound 0.05: no replica carries more than 1.05× the mean (plain
//     rendezvous hashing: 1.16× for the busiest of 50 replicas with 10,000
//     members), for a few more moves on a change (test/scalebench/shard).
//
// # Shutting down
//
// Drain marks the shard Lease draining: the others assign it nothing and
// take its members make-before-break; Drain returns once it acts on none.
// When Start's context ends, the replica acts on nothing, releases the
// member Leases it still holds (their new owners take them at once) and
// then its shard Lease.
//
// The Sharder is a prometheus.Collector of the shard metrics
// (internal/syncer/metrics: members acting and assigned, live replicas,
// handovers by reason, Lease held).
package shard
