package shard

import (
	"context"
	"fmt"
	"maps"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/ptr"
)

func (s *Sharder) leases() coordinationclient.LeaseInterface {
	return s.opts.Client.CoordinationV1().Leases(s.opts.Namespace)
}

// take reads the member Lease afresh, asks Decide (back: TakeBack), and
// writes this incarnation as holder with the term one up, conditional on
// the version read: of two replicas that take at once, one conflicts and
// reports false.
func (s *Sharder) take(ctx context.Context, cluster string, back bool) (bool, error) {
	s.mu.RLock()
	held := !s.stopped && s.heldLocked()
	s.mu.RUnlock()
	if !held {
		// Decide allows nothing: no read while the Lease lapsed (every
		// member kept warm retries its take meanwhile).
		return false, nil
	}
	name := MemberLeaseName(cluster)
	cur, err := s.leases().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cur, err = nil, nil
	}
	if err != nil {
		return false, fmt.Errorf("shard: reading the member Lease of %s: %w", cluster, err)
	}
	if cur != nil && cur.Labels[LabelRing] != s.opts.Ring {
		// Another installation in this namespace writes this member:
		// taking it would move it out of that ring's view.
		return false, fmt.Errorf("shard: the member Lease of %s belongs to ring %q, not %q", cluster, cur.Labels[LabelRing], s.opts.Ring)
	}
	now := s.clock.Now()
	s.mu.Lock()
	if cur != nil {
		s.observeMember(cur, now)
	}
	sit := s.situationLocked(cluster, cur, now)
	s.mu.Unlock()

	decide := Decide
	if back {
		decide = TakeBack
	}
	d := decide(sit)
	if back && !d.Take && !d.Mine {
		s.recomputeSoon() // the fresh read may show another holder: hand over
	}
	if d.Request {
		return false, s.request(ctx, cluster, cur, sit)
	}
	if !d.Take {
		return d.Mine, nil
	}
	if sit.HandoverTo == sit.Me && d.Reason == ReasonRebalance {
		s.opts.Logger.Info("the holder did not pass the member over within the Lease's duration of the request: taking it", "cluster", cluster, "holder", sit.Holder)
	}
	if d.Reason == ReasonFailover && !sit.HolderFormerMine {
		// A failover trusts this replica's view that the holder stopped
		// renewing; a view that merely fell behind (a stalled watch)
		// must not take from a live replica: read its shard Lease afresh.
		alive, err := s.refreshReplica(ctx, sit.Holder)
		if err != nil {
			return false, err
		}
		if alive {
			s.recomputeSoon()
			return false, nil
		}
	}
	l := cur
	if l == nil {
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.opts.Namespace}}
	}
	l.Labels = mergeMaps(l.Labels, map[string]string{LabelRing: s.opts.Ring, LabelLeaseKind: kindMember})
	l.Annotations = mergeMaps(l.Annotations, map[string]string{AnnotationCluster: cluster})
	delete(l.Annotations, AnnotationHandoverTo)
	l.Spec.HolderIdentity = ptr.To(sit.Me)
	l.Spec.LeaseTransitions = ptr.To(ptr.Deref(l.Spec.LeaseTransitions, 0) + 1)
	l.Spec.AcquireTime = ptr.To(metav1.NewMicroTime(now))
	l.Spec.RenewTime = l.Spec.AcquireTime
	// A take is counted by its reason below, not as a pass on request
	// when the informer shows this write first.
	s.mu.Lock()
	asked, wasAsked := s.requested[cluster]
	delete(s.requested, cluster)
	s.mu.Unlock()
	if cur == nil {
		l, err = s.leases().Create(ctx, l, metav1.CreateOptions{})
	} else {
		l, err = s.leases().Update(ctx, l, metav1.UpdateOptions{})
	}
	if err != nil && wasAsked {
		s.mu.Lock()
		s.requested[cluster] = asked
		s.mu.Unlock()
	}
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		// Another replica wrote first: its write is what the view will
		// show; the caller looks again.
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("shard: taking the member Lease of %s: %w", cluster, err)
	}
	s.mu.Lock()
	s.observeMember(l, now)
	s.taken[d.Reason]++
	s.mu.Unlock()
	s.opts.Logger.Info("member taken", "cluster", cluster, "reason", d.Reason, "from", sit.Holder, "term", ptr.Deref(l.Spec.LeaseTransitions, 0))
	s.recomputeSoon()
	return true, nil
}

// situationLocked is what Decide and AnswerRequest look at for a member
// whose Lease reads cur (nil: none); s.mu must be held.
func (s *Sharder) situationLocked(cluster string, cur *coordinationv1.Lease, now time.Time) Situation {
	sit := Situation{Now: now, LeaseDuration: s.opts.LeaseDuration, Held: !s.stopped && s.heldLocked(), Me: s.inc,
		Assigned: s.assignedLocked(cluster), HolderSeen: now, HandoverSeen: now}
	if cur == nil {
		return sit
	}
	o := s.members[cluster]
	sit.Holder = ptr.Deref(cur.Spec.HolderIdentity, "")
	sit.HolderFormerMine = s.former[sit.Holder]
	sit.HolderAlive = s.aliveLocked(sit.Holder, now)
	if o.holder == sit.Holder {
		sit.HolderSeen = o.since
	}
	sit.HandoverTo = cur.Annotations[AnnotationHandoverTo]
	sit.HandoverToAlive = s.aliveLocked(sit.HandoverTo, now)
	if o.holder == sit.Holder && o.handoverTo == sit.HandoverTo {
		sit.HandoverSeen = o.asked
	}
	return sit
}

// request asks the member's live holder to pass the member over: this
// incarnation in the handover-to annotation, the holder unchanged
// (compare and swap on the version read; a conflict is looked at again
// on the next try).
func (s *Sharder) request(ctx context.Context, cluster string, cur *coordinationv1.Lease, sit Situation) error {
	l := cur.DeepCopy()
	l.Annotations = mergeMaps(l.Annotations, map[string]string{AnnotationHandoverTo: sit.Me})
	got, err := s.leases().Update(ctx, l, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("shard: asking the holder of %s for it: %w", cluster, err)
	}
	s.mu.Lock()
	s.requested[cluster] = sit.Me
	s.observeMember(got, sit.Now)
	s.mu.Unlock()
	s.opts.Logger.Info("asked the member's holder to pass it over", "cluster", cluster, "holder", sit.Holder)
	return nil
}

// answer is the holder's side of a handover request (AnswerRequest), on
// a fresh read of the member Lease: pass the member over to a live asker
// (holder, term +1, acquire time, the request dropped, compare and swap),
// or drop the request of one not live in this view and keep the member.
// This replica stopped acting on the member when it saw the request.
func (s *Sharder) answer(ctx context.Context, cluster string) error {
	cur, err := s.leases().Get(ctx, MemberLeaseName(cluster), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("shard: reading the member Lease of %s: %w", cluster, err)
	}
	now := s.clock.Now()
	s.mu.Lock()
	s.observeMember(cur, now)
	sit := s.situationLocked(cluster, cur, now)
	s.mu.Unlock()
	a := AnswerRequest(sit)
	if a == AnswerNone {
		return nil
	}
	l := cur.DeepCopy()
	delete(l.Annotations, AnnotationHandoverTo)
	if a == AnswerPass {
		l.Spec.HolderIdentity = ptr.To(sit.HandoverTo)
		l.Spec.LeaseTransitions = ptr.To(ptr.Deref(l.Spec.LeaseTransitions, 0) + 1)
		l.Spec.AcquireTime = ptr.To(metav1.NewMicroTime(now))
		l.Spec.RenewTime = l.Spec.AcquireTime
	}
	got, err := s.leases().Update(ctx, l, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		s.recomputeSoon() // the newer version's event looks again
		return nil
	}
	if err != nil {
		return fmt.Errorf("shard: answering the request for %s: %w", cluster, err)
	}
	s.mu.Lock()
	s.observeMember(got, now)
	s.mu.Unlock()
	if a == AnswerPass {
		s.opts.Logger.Info("member passed over on request", "cluster", cluster, "to", sit.HandoverTo, "term", ptr.Deref(got.Spec.LeaseTransitions, 0))
	} else {
		s.opts.Logger.Info("handover request from an incarnation not live in this view refused: keeping the member", "cluster", cluster, "from", sit.HandoverTo)
	}
	s.recomputeSoon()
	return nil
}

// refreshReplica reads the shard Lease of an incarnation's replica afresh
// into the view and reports whether the incarnation is live.
func (s *Sharder) refreshReplica(ctx context.Context, incarnation string) (bool, error) {
	l, err := s.leases().Get(ctx, ShardLeaseName(ReplicaOf(incarnation)), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("shard: reading the shard Lease of %s: %w", ReplicaOf(incarnation), err)
	}
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.observeReplica(l, now)
	return s.aliveLocked(incarnation, now), nil
}

// confirm is the fence before a destructive call in a member: a fresh read
// of its Lease must name this incarnation while the shard Lease is held,
// both checked after the read returned.
func (s *Sharder) confirm(ctx context.Context, cluster string) error {
	cur, err := s.leases().Get(ctx, MemberLeaseName(cluster), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: %s has no member Lease", ErrNotOwner, cluster)
	}
	if err != nil {
		return fmt.Errorf("shard: confirming the writer of %s: %w", cluster, err)
	}
	s.mu.Lock()
	s.observeMember(cur, s.clock.Now())
	holder, inc, held := ptr.Deref(cur.Spec.HolderIdentity, ""), s.inc, !s.stopped && s.heldLocked()
	s.mu.Unlock()
	if !held || holder != inc {
		return fmt.Errorf("%w: %s is written by %q", ErrNotOwner, cluster, holder)
	}
	return nil
}

// release clears the holder of a member Lease that still names this
// incarnation; the term stays, so the next writer's is higher.
func (s *Sharder) release(ctx context.Context, cluster string) error {
	s.mu.RLock()
	inc := s.inc
	s.mu.RUnlock()
	cur, err := s.leases().Get(ctx, MemberLeaseName(cluster), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("shard: reading the member Lease of %s: %w", cluster, err)
	}
	if inc == "" || ptr.Deref(cur.Spec.HolderIdentity, "") != inc {
		return nil
	}
	cur.Spec.HolderIdentity = nil
	got, err := s.leases().Update(ctx, cur, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		return nil // written by another since: not ours to release
	}
	if err != nil {
		return fmt.Errorf("shard: releasing the member Lease of %s: %w", cluster, err)
	}
	s.mu.Lock()
	s.observeMember(got, s.clock.Now())
	s.mu.Unlock()
	s.recomputeSoon()
	return nil
}

// drain marks the shard Lease draining (the others no longer assign this
// replica anything and take its members, make before break) and waits
// until this replica acts on no member.
func (s *Sharder) drain(ctx context.Context) error {
	s.mu.Lock()
	s.draining = true
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
	s.recomputeSoon()
	for {
		s.mu.RLock()
		holding := 0
		for m := range s.members {
			if s.holdsLocked(m) {
				holding++
			}
		}
		changed := s.changed
		s.mu.RUnlock()
		if holding == 0 {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("shard: draining with %d members still held: %w", holding, ctx.Err())
		}
	}
}

func mergeMaps(dst, src map[string]string) map[string]string {
	if dst == nil {
		dst = make(map[string]string, len(src))
	}
	maps.Copy(dst, src)
	return dst
}
