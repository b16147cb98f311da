package shard

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// holdShardLease acquires and renews this replica's shard Lease every
// RenewInterval (and when Drain asks) until ctx ends.
func (s *Sharder) holdShardLease(ctx context.Context) {
	t := s.clock.NewTicker(s.opts.RenewInterval)
	defer t.Stop()
	for {
		s.tend(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		case <-s.kick:
		}
	}
}

// tend renews the shard Lease, or acquires it as a new incarnation when
// this replica holds none: the first time, after losing it to a write
// that was not its own, and after a renewal came too late (a pause, a cut)
// — the old incarnation is then dropped with everything it held.
func (s *Sharder) tend(ctx context.Context) {
	defer s.recomputeSoon()
	s.mu.Lock()
	if s.inc != "" && !s.heldLocked() {
		s.opts.Logger.Info("shard Lease not renewed within its duration: acting on nothing until it is held again", "incarnation", s.inc)
		s.former[s.inc] = true
		s.inc, s.own, s.lapsed = "", nil, true
		s.observedAfresh(s.clock.Now())
	}
	inc, own, draining, lapses := s.inc, s.own, s.draining, s.renewed.Add(s.opts.LeaseDuration)
	s.mu.Unlock()

	sent := s.clock.Now()
	if inc == "" {
		// A third of the duration: a request that hangs leaves time for
		// two more tries before another replica may count on the Lease.
		ctx, cancel := context.WithTimeout(ctx, s.opts.LeaseDuration/3)
		defer cancel()
		s.acquire(ctx, sent, draining)
		return
	}
	// A renewal may take until the Lease lapses here: a slow host that
	// answers in time keeps it (held from when the renewal was sent, which
	// is before any other replica can have seen it), where a shorter
	// timeout abandoned renewals that would have landed and lapsed the
	// Lease of every replica of a saturated host at once (scale benchmark,
	// 600 registrations). One renewal is in flight at a time.
	ctx, cancel := context.WithTimeout(ctx, lapses.Sub(sent))
	defer cancel()
	l := own.DeepCopy()
	s.stamp(l, inc, sent, draining)
	got, err := s.leases().Update(ctx, l, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		// Someone else wrote it (an annotation by hand, or this replica's
		// name in another process): renew only what still names us.
		var cur *coordinationv1.Lease
		if cur, err = s.leases().Get(ctx, l.Name, metav1.GetOptions{}); err == nil {
			if ptr.Deref(cur.Spec.HolderIdentity, "") != inc {
				s.lost(inc, ptr.Deref(cur.Spec.HolderIdentity, ""))
				return
			}
			s.stamp(cur, inc, sent, draining)
			got, err = s.leases().Update(ctx, cur, metav1.UpdateOptions{})
		}
	}
	if err != nil {
		s.opts.Logger.Error(err, "renewing the shard Lease failed; retrying", "incarnation", inc)
		return
	}
	s.held(inc, got, sent)
}

// acquire takes the shard Lease as a new incarnation: at once when it
// names no holder or a former incarnation of this process; when it names
// one this process does not know (a former process of this replica, which
// may still run), once that holder has not renewed for its duration.
func (s *Sharder) acquire(ctx context.Context, sent time.Time, draining bool) {
	inc := fmt.Sprintf("%s-%08x", s.opts.Replica, rand.Uint32())
	name := ShardLeaseName(s.opts.Replica)
	cur, err := s.leases().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.opts.Namespace,
			Labels: map[string]string{LabelRing: s.opts.Ring, LabelLeaseKind: kindReplica}}}
		s.stamp(l, inc, sent, draining)
		l.Spec.AcquireTime = l.Spec.RenewTime
		cur, err = s.leases().Create(ctx, l, metav1.CreateOptions{})
	case err == nil:
		holder := ptr.Deref(cur.Spec.HolderIdentity, "")
		if !s.mayAcquire(cur, sent) {
			s.opts.Logger.Info("shard Lease held by an incarnation this process does not know; waiting for it to expire", "holder", holder)
			return
		}
		s.stamp(cur, inc, sent, draining)
		cur.Spec.AcquireTime = cur.Spec.RenewTime
		cur.Spec.LeaseTransitions = ptr.To(ptr.Deref(cur.Spec.LeaseTransitions, 0) + 1)
		cur, err = s.leases().Update(ctx, cur, metav1.UpdateOptions{})
	}
	if err != nil {
		s.opts.Logger.Error(err, "acquiring the shard Lease failed; retrying")
		return
	}
	s.opts.Logger.Info("shard Lease acquired", "incarnation", inc)
	s.held(inc, cur, sent)
}

// mayAcquire: the shard Lease is free, names a former incarnation of this
// process, or names a stranger not seen renewing for its duration (then
// the stranger counts as a former incarnation: what it held is dead).
func (s *Sharder) mayAcquire(l *coordinationv1.Lease, now time.Time) bool {
	holder := ptr.Deref(l.Spec.HolderIdentity, "")
	s.mu.Lock()
	defer s.mu.Unlock()
	if holder == "" || s.former[holder] {
		return true
	}
	o := replicaObs{holder: holder, version: l.ResourceVersion, duration: s.opts.LeaseDuration, seen: now}
	if d := ptr.Deref(l.Spec.LeaseDurationSeconds, 0); d > 0 {
		o.duration = time.Duration(d) * time.Second
	}
	if s.stranger.holder == o.holder && s.stranger.version == o.version {
		o.seen = s.stranger.seen
	}
	s.stranger = o
	if o.alive(now) {
		return false
	}
	s.former[holder] = true
	return true
}

// stamp writes this incarnation's renewal into l.
func (s *Sharder) stamp(l *coordinationv1.Lease, inc string, now time.Time, draining bool) {
	l.Spec.HolderIdentity = ptr.To(inc)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(s.opts.LeaseDuration / time.Second))
	l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(now))
	if draining {
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		l.Annotations[AnnotationDraining] = "true"
	} else {
		delete(l.Annotations, AnnotationDraining)
	}
}

// held records a successful renewal sent at sent.
func (s *Sharder) held(inc string, l *coordinationv1.Lease, sent time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inc, s.own, s.renewed, s.lapsed = inc, l, sent, false
}

// lost drops an incarnation whose shard Lease names another holder.
func (s *Sharder) lost(inc, holder string) {
	s.opts.Logger.Info("shard Lease taken by another holder: acting on nothing until it is held again", "incarnation", inc, "holder", holder)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inc == inc {
		s.former[inc] = true
		s.inc, s.own = "", nil
	}
}

// releaseAll, on the way out, gives up the members this incarnation still
// holds (so that their new owners take them at once, not after this
// replica's Lease expires) and then the shard Lease.
func (s *Sharder) releaseAll() {
	s.mu.RLock()
	inc, own := s.inc, s.own
	var held []string
	for m, o := range s.members {
		if inc != "" && o.holder == inc {
			held = append(held, m)
		}
	}
	s.mu.RUnlock()
	if inc == "" {
		return
	}
	// The manager's context has ended: these writes get their own bound.
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.LeaseDuration)
	defer cancel()
	for _, m := range held {
		if err := s.release(ctx, m); err != nil {
			s.opts.Logger.Error(err, "releasing a member Lease on exit failed; the member moves once this replica's Lease is seen expired", "cluster", m)
		}
	}
	l := own.DeepCopy()
	l.Spec.HolderIdentity = nil
	if _, err := s.leases().Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		s.opts.Logger.Error(err, "releasing the shard Lease on exit failed; it expires", "incarnation", inc)
		return
	}
	s.opts.Logger.Info("shard Lease released", "incarnation", inc)
}
