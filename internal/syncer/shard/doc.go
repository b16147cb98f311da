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
// incarnation, which owns nothing until it takes members again.
//
// Taking a member is make-before-break: the new owner starts the member's
// runtime first and takes the member Lease when its caches are synced; the
// former owner sees the new holder and stops. Decide is the pure rule of
// when a replica may take a member.
package shard
