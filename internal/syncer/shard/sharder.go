package shard

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"

	"github.com/leafsync/leafsync/internal/runner"
	"github.com/leafsync/leafsync/internal/syncer/metrics"
)

// Defaults of the shard Lease: leader election's (controller-runtime's
// 15s duration; a 2s renewal keeps seven tries within one duration).
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewInterval = 2 * time.Second
)

func (o *Options) complete() error {
	if o.LeaseDuration == 0 {
		o.LeaseDuration = DefaultLeaseDuration
	}
	if o.RenewInterval == 0 {
		o.RenewInterval = DefaultRenewInterval
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Members == nil {
		o.Members = func() []string { return nil }
	}
	var errs []error
	if o.Client == nil {
		errs = append(errs, errors.New("shard: no client"))
	}
	if o.Namespace == "" || o.Ring == "" || o.Replica == "" {
		errs = append(errs, fmt.Errorf("shard: namespace %q, ring %q and replica %q are all required", o.Namespace, o.Ring, o.Replica))
	}
	if msgs := validation.IsDNS1123Subdomain(ShardLeaseName(o.Replica)); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("shard: replica %q makes no Lease name: %v", o.Replica, msgs))
	}
	if msgs := validation.IsValidLabelValue(o.Ring); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("shard: ring %q is no label value: %v", o.Ring, msgs))
	}
	if o.RenewInterval >= o.LeaseDuration {
		errs = append(errs, fmt.Errorf("shard: renewInterval %s must be shorter than leaseDuration %s", o.RenewInterval, o.LeaseDuration))
	}
	if o.LoadBound < 0 || o.LoadBound > 1 {
		errs = append(errs, fmt.Errorf("shard: loadBound %v is not in [0, 1]", o.LoadBound))
	}
	return errors.Join(errs...)
}

// heldLocked: the last renewal was sent less than LeaseDuration ago by the
// local monotonic clock. A paused process resumes with Held false: by
// then another replica may have seen its Lease expire.
func (s *Sharder) heldLocked() bool {
	return s.inc != "" && s.clock.Since(s.renewed) < s.opts.LeaseDuration
}

// lapsedLocked: this replica had an incarnation and does not hold its
// shard Lease now, whether or not tend has dropped the incarnation yet (a
// renewal that hangs holds tend up until the Lease lapses).
func (s *Sharder) lapsedLocked() bool {
	return s.lapsed || (s.inc != "" && !s.heldLocked())
}

// assignedLocked: a draining replica is assigned nothing, from the moment
// Drain is called.
func (s *Sharder) assignedLocked(cluster string) bool {
	return !s.draining && s.assigned[cluster] == s.opts.Replica
}

// holdsLocked: the member Lease names this incarnation, held now.
func (s *Sharder) holdsLocked(cluster string) bool {
	return !s.stopped && s.heldLocked() && s.members[cluster].holder == s.inc
}

// actingLocked: this incarnation holds the member and no other has asked
// for it: from the moment the request is seen the holder writes nothing
// more for the member, before it passes the Lease over (one writer at a
// time: the asker acts only once it sees itself as holder).
func (s *Sharder) actingLocked(cluster string) bool {
	o := s.members[cluster]
	return s.holdsLocked(cluster) && (o.handoverTo == "" || o.handoverTo == s.inc)
}

// aliveLocked: the incarnation holds a shard Lease seen renewing.
func (s *Sharder) aliveLocked(incarnation string, now time.Time) bool {
	if incarnation == "" {
		return false
	}
	if incarnation == s.inc {
		return s.heldLocked()
	}
	o, ok := s.replicas[ReplicaOf(incarnation)]
	return ok && o.holder == incarnation && o.alive(now)
}

// memberState is what the callers of OnChange care about for a member.
type memberState struct {
	// held: this replica holds its shard Lease (a member kept warm
	// through a lapse is taken back when it is held again).
	assigned, acting, held bool
	holder                 string
	holderAlive            bool
}

// recompute is the runner's one reconcile: it computes the assignment from
// the registered members and the live replicas, and tells OnChange about
// every member whose assignment, holder, or holder's liveness changed.
func (s *Sharder) recompute(context.Context, string) (runner.Result, error) {
	registered := s.opts.Members()
	now := s.clock.Now()

	s.mu.Lock()
	var replicas []string
	for r, o := range s.replicas {
		if r != s.opts.Replica && o.alive(now) && !o.draining {
			replicas = append(replicas, r)
		}
	}
	// A lapse of this replica's own Lease does not move its members in
	// its own view: the others may still see it live (a slow renewal
	// that landed), and it takes them back once held (KeepWarm).
	if (s.heldLocked() || s.lapsedLocked()) && !s.draining {
		replicas = append(replicas, s.opts.Replica)
	}
	// Most recomputations follow a renewal, which changes neither input:
	// the assignment is computed again only when one of them changed.
	registered = slices.Compact(slices.Sorted(slices.Values(registered)))
	slices.Sort(replicas)
	if !slices.Equal(registered, s.inputs.members) || !slices.Equal(replicas, s.inputs.replicas) {
		s.assigned = Assign(registered, replicas, s.opts.LoadBound)
		s.inputs.members, s.inputs.replicas = registered, replicas
	}
	s.live = len(replicas)
	states := make(map[string]memberState, len(registered))
	for _, m := range slices.Concat(registered, slices.Collect(maps.Keys(s.members))) {
		states[m] = memberState{
			assigned:    s.assignedLocked(m),
			acting:      s.actingLocked(m),
			held:        s.heldLocked(),
			holder:      s.members[m].holder,
			holderAlive: s.aliveLocked(s.members[m].holder, now),
		}
	}
	var changed []string
	for m, st := range states {
		if prev, ok := s.last[m]; !ok || prev != st {
			changed = append(changed, m)
		}
	}
	for m := range s.last {
		if _, ok := states[m]; !ok {
			changed = append(changed, m)
		}
	}
	s.last = states
	for _, m := range changed {
		if ch, ok := s.waiting[m]; ok {
			close(ch)
			delete(s.waiting, m)
		}
	}
	var asked []string
	for m := range s.members {
		if s.askedLocked(m) {
			asked = append(asked, m)
		}
	}
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()

	if len(changed) > 0 && s.opts.OnChange != nil {
		slices.Sort(changed)
		s.opts.OnChange(changed)
	}
	for _, m := range asked {
		s.queue.Add(answerKeyPrefix + m)
	}
	return runner.Result{}, nil
}

// answerKeyPrefix queues the answer to a handover request for a member.
const answerKeyPrefix = "answer/"

// reconcile is the runner's one reconciler: the answer to a member's
// handover request, or the recomputation of the assignment.
func (s *Sharder) reconcile(ctx context.Context, key string) (runner.Result, error) {
	if cluster, ok := strings.CutPrefix(key, answerKeyPrefix); ok {
		return runner.Result{}, s.answer(ctx, cluster)
	}
	return s.recompute(ctx, key)
}

// askedLocked: another incarnation asks this one, its holder, for the
// member.
func (s *Sharder) askedLocked(cluster string) bool {
	o := s.members[cluster]
	return s.holdsLocked(cluster) && o.handoverTo != "" && o.handoverTo != s.inc
}

// recomputeSoon queues a recomputation; many coalesce into one.
func (s *Sharder) recomputeSoon() { s.queue.Add("assignment") }

func (s *Sharder) metricsState() metrics.ShardState {
	s.mu.RLock()
	defer s.mu.RUnlock()
	st := metrics.ShardState{Replica: s.opts.Replica, Live: s.live, Held: s.heldLocked(), Handovers: map[string]uint64{}}
	for m := range s.members {
		if s.actingLocked(m) {
			st.Acting++
		}
	}
	for m := range s.assigned {
		if s.assignedLocked(m) {
			st.Assigned++
		}
	}
	for r, n := range s.taken {
		st.Handovers[string(r)] = n
	}
	return st
}
