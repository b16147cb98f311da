package shard

import (
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// Lease names and the values of LabelLeaseKind.
const (
	shardLeasePrefix  = "leafsync-shard-"
	memberLeasePrefix = "leafsync-member-"
	kindReplica       = "replica"
	kindMember        = "member"
)

// ShardLeaseName is the name of a replica's shard Lease.
func ShardLeaseName(replica string) string { return shardLeasePrefix + replica }

// MemberLeaseName is the name of a member's Lease.
func MemberLeaseName(cluster string) string { return memberLeasePrefix + cluster }

// ReplicaOf is the replica an incarnation belongs to: the incarnation
// without its random suffix.
func ReplicaOf(incarnation string) string {
	if i := strings.LastIndexByte(incarnation, '-'); i > 0 && len(incarnation)-i == 9 {
		if _, err := strconv.ParseUint(incarnation[i+1:], 16, 32); err == nil {
			return incarnation[:i]
		}
	}
	return incarnation
}

// replicaObs is another replica's shard Lease as this replica saw it
// change: liveness is measured on this replica's clock from the moment a
// renewal was observed (as client-go's leader election does), never by
// comparing the renewTime written on another machine.
type replicaObs struct {
	holder, version string
	draining        bool
	duration        time.Duration
	// seen is when holder or version last changed in this replica's view.
	seen time.Time
}

// alive: the replica holds its Lease and was seen renewing it within its
// duration (a Lease seen for the first time counts as renewed then).
func (o replicaObs) alive(now time.Time) bool {
	return o.holder != "" && now.Sub(o.seen) < o.duration
}

// memberObs is a member Lease as this replica saw it.
type memberObs struct {
	holder, version string
	term            int32
	// since is when this replica first saw holder on the Lease.
	since time.Time
	// handoverTo is the incarnation that asked the holder for the member
	// (AnnotationHandoverTo); asked is when this replica first saw it.
	handoverTo string
	asked      time.Time
}

func (s *Sharder) observeReplica(l *coordinationv1.Lease, now time.Time) {
	replica := strings.TrimPrefix(l.Name, shardLeasePrefix)
	o := replicaObs{
		holder:   ptr.Deref(l.Spec.HolderIdentity, ""),
		version:  l.ResourceVersion,
		draining: l.Annotations[AnnotationDraining] == "true",
		duration: s.opts.LeaseDuration,
		seen:     now,
	}
	if d := ptr.Deref(l.Spec.LeaseDurationSeconds, 0); d > 0 {
		o.duration = time.Duration(d) * time.Second
	}
	if old, ok := s.replicas[replica]; ok && old.holder == o.holder && old.version == o.version {
		o.seen = old.seen
	}
	s.replicas[replica] = o
}

// observeMember records a member Lease, unless what this replica has is
// newer (its own write, not yet seen by the informer).
func (s *Sharder) observeMember(l *coordinationv1.Lease, now time.Time) {
	cluster := clusterOf(l)
	o := memberObs{holder: ptr.Deref(l.Spec.HolderIdentity, ""), version: l.ResourceVersion, term: ptr.Deref(l.Spec.LeaseTransitions, 0), since: now,
		handoverTo: l.Annotations[AnnotationHandoverTo], asked: now}
	old, ok := s.members[cluster]
	if ok && older(o.version, old.version) {
		return
	}
	if ok && old.holder == o.holder {
		o.since = old.since
		if old.handoverTo == o.handoverTo {
			o.asked = old.asked
		}
	}
	if o.holder != "" && o.holder == s.inc && s.requested[cluster] == s.inc {
		// The holder passed the member over at this replica's request.
		delete(s.requested, cluster)
		s.taken[ReasonRebalance]++
		s.opts.Logger.Info("member passed over", "cluster", cluster, "from", old.holder, "term", o.term)
	}
	s.members[cluster] = o
}

func (s *Sharder) forgetLease(l *coordinationv1.Lease) {
	switch l.Labels[LabelLeaseKind] {
	case kindReplica:
		delete(s.replicas, strings.TrimPrefix(l.Name, shardLeasePrefix))
	case kindMember:
		delete(s.members, clusterOf(l))
	}
}

func clusterOf(l *coordinationv1.Lease) string {
	if c := l.Annotations[AnnotationCluster]; c != "" {
		return c
	}
	return strings.TrimPrefix(l.Name, memberLeasePrefix)
}

// older reports whether resource version a is older than b. Versions are
// opaque to clients in general; etcd's are increasing integers, which is
// what lets this replica's own write win over an informer event that was
// sent before it. Anything else counts as newer.
func older(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	return errA == nil && errB == nil && x < y
}

// onLease is the informer's handler of shard and member Leases.
func (s *Sharder) onLease(obj any, deleted bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, deleted = d.Obj, true
	}
	l, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return
	}
	now := s.clock.Now()
	s.mu.Lock()
	switch {
	case deleted:
		s.forgetLease(l)
	case l.Labels[LabelLeaseKind] == kindReplica:
		s.observeReplica(l, now)
	case l.Labels[LabelLeaseKind] == kindMember:
		s.observeMember(l, now)
	}
	s.mu.Unlock()
	s.recomputeSoon()
}

func (s *Sharder) leaseHandler() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.onLease(obj, false) },
		UpdateFunc: func(_, obj any) { s.onLease(obj, false) },
		DeleteFunc: func(obj any) { s.onLease(obj, true) },
	}
}

// observedAfresh restarts every observation at now, after a gap in this
// replica's own watching (its Lease lapsed: it was paused or cut off).
// What it saw before the gap says nothing about who renewed during it: a
// resumed replica would otherwise find every other one expired in its
// stale view and take their members as failovers before its informer
// caught up. So every other replica counts as live again for a Lease's
// duration, as one seen for the first time, and every member's holder as
// just seen.
func (s *Sharder) observedAfresh(now time.Time) {
	for r, o := range s.replicas {
		o.seen = now
		s.replicas[r] = o
	}
	for m, o := range s.members {
		o.since, o.asked = now, now
		s.members[m] = o
	}
}
