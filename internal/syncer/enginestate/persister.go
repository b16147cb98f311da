// Package enginestate keeps the hysteresis engine's state of each member
// across restarts and changes of leader: it decides when a member's engine
// snapshot is worth writing to the state store (transitions, and
// checkpoints while something is in progress — never once per probe), and
// hands it back to the engine's owner (the clusters Registry) before the
// member's first probe. Writes go
// through the store's Keeper. See docs/state-store.md.
//
// It also reports clock steps: an observation for which the engine
// re-anchored the member's times because the wall clock stepped (hysteresis
// Status.ClockStep; a restored snapshot written by a leader whose clock ran
// ahead shows up this way at the first probe) is logged, becomes a Warning
// Event ClockStepped on the member's registration Secret, and is written to
// the store at once, so that no later restore brings back the times from
// the other clock. The engine counts the steps
// (leafsync_member_clock_steps_total).
package enginestate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/retry"
	"github.com/leafsync/leafsync/internal/syncer/store"
)

// Target takes a cluster's saved snapshot and returns the restored status:
// the owner of the hysteresis engine (*clusters.Registry). The Persister
// never changes the engine itself; what it writes comes with each decision
// (Observed), never read back.
type Target interface {
	Restore(cluster string, snapshot []byte) (hysteresis.Status, error)
}

// Options tune a Persister; zero values take the defaults.
type Options struct {
	// CheckpointInterval is the least engine time between two writes of a
	// cluster's snapshot while a failure (or recovery) is in progress
	// (default 10s). A restart loses at most this much of a streak, plus
	// the restart gap beyond 1.5×probeInterval (which the engine does not
	// count as evidence).
	CheckpointInterval time.Duration
	// RestoreTimeout is how long, from the first restore of a leader's
	// term, restores wait for an unavailable store before members start
	// without their saved state (default 10s). Waiting longer would leave
	// leaf Leases unrenewed.
	RestoreTimeout time.Duration
	// Logger for restores and checkpoints.
	Logger logr.Logger
	// Clock is the wall clock (real when nil); engine decisions use the
	// observations' own times.
	Clock clock.Clock
	// Recorder (nil: none) receives the Warning Event ClockStepped, on
	// the object Regarding returns for the cluster (nil: no Event).
	Recorder  events.EventRecorder
	Regarding func(cluster string) runtime.Object
}

// Persister decides when a cluster's hysteresis snapshot is written, and
// restores it before the cluster's first probe.
//
// Written: on every transition (state change or cordon change, which
// includes a flap adding penalty and damping starting or ending); while a
// failure, a recovery or the mass-disconnect hold is in progress, at most
// every CheckpointInterval of engine time, so that a restart resumes the
// streak's clocks; and for one availability window after the last failure,
// at most every max(CheckpointInterval, window/10), so that the success
// evidence that dilutes past failures is kept too. Nothing is written while a
// member is simply Ready: a healthy fleet writes nothing, and no write ever
// happens once per probe unless CheckpointInterval is below the probe
// interval. The penalty's decay needs no writes: it is recomputed from the
// time it was last decayed, which the snapshot holds.
type Persister struct {
	keeper *store.Keeper
	opts   Options
	log    logr.Logger

	mu    sync.Mutex
	marks map[string]*mark
	stats Stats

	preloadMu    sync.Mutex
	firstRestore time.Time
	lastAttempt  time.Time
}

// mark is what the Persister remembers of a cluster.
type mark struct {
	observed  bool      // an observation was fed since this process started
	written   time.Time // engine time of the last snapshot written
	failingAt time.Time // engine time of the last observation in progress
}

// Stats are the Persister's figures.
type Stats struct {
	// Restored: clusters whose saved state was restored before their first
	// probe. Fresh: clusters that had no saved state. Unrestored:
	// clusters started without their saved state (store unavailable at
	// start, or a snapshot that could not be restored).
	Restored, Fresh, Unrestored int
	// Checkpoints is the number of snapshots handed to the Keeper.
	Checkpoints uint64
	// LastRestoreError is the last restore failure ("" if none).
	LastRestoreError string
}

// New returns a Persister writing through keeper.
func New(keeper *store.Keeper, o Options) *Persister {
	if o.CheckpointInterval <= 0 {
		o.CheckpointInterval = 10 * time.Second
	}
	if o.RestoreTimeout <= 0 {
		o.RestoreTimeout = 10 * time.Second
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
	return &Persister{keeper: keeper, opts: o, log: o.Logger, marks: map[string]*mark{}}
}

// ErrRestoreTooLate: a restore was asked after the cluster's first
// observation in this process; restoring then would rewind the engine.
var ErrRestoreTooLate = errors.New("enginestate: restore after the cluster's first observation refused")

// Restore reads a cluster's saved hysteresis snapshot and hands it to
// into, the engine's owner. It must be called before the cluster's first
// observation (the clusters controller calls it just before starting the
// member's runtime). It reports whether saved state was restored. A
// cluster with no saved state starts fresh (nil error); if the store cannot
// be read within RestoreTimeout of the term's first restore, the cluster
// starts fresh and the error says why (the saved record is merged, not
// overwritten, when the store is back).
func (p *Persister) Restore(ctx context.Context, cluster string, into Target) (bool, error) {
	p.mu.Lock()
	// Sharded, a member comes back to a replica after another wrote it:
	// it is restored again (the Registry still refuses a member that runs).
	if m := p.marks[cluster]; m != nil && m.observed && !p.keeper.Sharded() {
		p.mu.Unlock()
		return false, fmt.Errorf("%w (cluster %s)", ErrRestoreTooLate, cluster)
	}
	p.mu.Unlock()

	if !p.keeper.Known(cluster) {
		if err := p.read(ctx, cluster); err != nil {
			p.count(func(s *Stats) {
				s.Unrestored++
				s.LastRestoreError = err.Error()
			})
			return false, fmt.Errorf("state of cluster %s not restored, starting fresh: %w", cluster, err)
		}
	}
	saved := Snapshot.Get(p.keeper, cluster)
	if len(saved) == 0 {
		p.count(func(s *Stats) { s.Fresh++ })
		return false, nil
	}
	hs, err := into.Restore(cluster, saved)
	if err != nil {
		err = fmt.Errorf("saved state of cluster %s cannot be restored, starting fresh: %w", cluster, err)
		p.count(func(s *Stats) {
			s.Unrestored++
			s.LastRestoreError = err.Error()
		})
		return false, err
	}
	p.mu.Lock()
	m := &mark{written: hs.LastObserved}
	switch {
	case inProgress(hs):
		m.failingAt = hs.LastObserved
	case !hs.Since.IsZero():
		// Ready since Since: the last failure was then (a flap's end or a
		// recovery); keep the window's evidence saved until it rolls out.
		m.failingAt = hs.Since
	}
	p.marks[cluster] = m
	p.stats.Restored++
	p.mu.Unlock()
	p.log.Info("restored saved readiness state", "cluster", cluster, "state", hs.State.String(),
		"cordoned", hs.Cordoned, "since", hs.Since, "lastObserved", hs.LastObserved, "penalty", hs.Penalty)
	return true, nil
}

// read reads the saved state a restore needs: every record once per term
// (preload); sharded across replicas, the member's own records, since the
// replica that wrote it until now may have checkpointed it after any
// earlier read.
func (p *Persister) read(ctx context.Context, cluster string) error {
	if !p.keeper.Sharded() {
		return p.preload(ctx)
	}
	ctx, cancel := context.WithTimeout(ctx, p.opts.RestoreTimeout)
	defer cancel()
	return p.keeper.Load(ctx, cluster)
}

// preload reads every record once per term, waiting for an unavailable
// store until RestoreTimeout after the term's first restore; later, it
// tries again at most every 5s, briefly, so that no member waits long.
func (p *Persister) preload(ctx context.Context) error {
	p.preloadMu.Lock()
	defer p.preloadMu.Unlock()
	if p.keeper.Preloaded() {
		return nil
	}
	now := p.opts.Clock.Now()
	if p.firstRestore.IsZero() {
		p.firstRestore = now
	}
	deadline := p.firstRestore.Add(p.opts.RestoreTimeout)
	if !now.Before(deadline) {
		if now.Sub(p.lastAttempt) < 5*time.Second {
			return fmt.Errorf("state store unavailable since the leader started")
		}
		deadline = now.Add(time.Second)
	}
	// Each read is bounded by the deadline too, should the store hang.
	ctx, cancel := context.WithTimeout(ctx, deadline.Sub(now))
	defer cancel()
	var n int
	var last error // the store's, not ctx's: the reason members start fresh
	err := retry.Notify(ctx, p.opts.Clock, untilDeadline{preloadRetry(), p.opts.Clock, deadline}, func() (err error) {
		p.lastAttempt = p.opts.Clock.Now()
		n, err = p.keeper.Preload(ctx)
		last = err
		return err
	}, nil)
	if err != nil {
		return fmt.Errorf("reading saved state: %w", cmp.Or(last, err))
	}
	p.log.Info("read saved state of the fleet", "records", n, "backend", p.keeper.Backend())
	return nil
}

// preloadRetry spaces the reads of an unavailable store: 100ms, doubling,
// at most 2s.
func preloadRetry() backoff.BackOff {
	return backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(100*time.Millisecond), backoff.WithMultiplier(2),
		backoff.WithMaxInterval(2*time.Second), backoff.WithRandomizationFactor(0),
		backoff.WithMaxElapsedTime(0)) // untilDeadline bounds it
}

// untilDeadline cuts b's waits short at deadline, so that the last read is
// at the deadline (an elapsed-time bound would give up at the read before),
// and stops after it.
type untilDeadline struct {
	backoff.BackOff
	clk      clock.PassiveClock
	deadline time.Time
}

func (u untilDeadline) NextBackOff() time.Duration {
	left := u.deadline.Sub(u.clk.Now())
	if left <= 0 {
		return backoff.Stop
	}
	return min(u.BackOff.NextBackOff(), left)
}

// Observed is called after every observation the engine accepted, with its
// decision (clusters.Options.OnObserve). It writes the decision's snapshot
// when it is worth writing (see Persister). It never blocks on the store.
func (p *Persister) Observed(cluster string, d hysteresis.Decision) {
	st, window := d.Status, d.Config.Window.Duration
	now := st.LastObserved
	p.mu.Lock()
	m := p.marks[cluster]
	if m == nil {
		m = &mark{}
		p.marks[cluster] = m
	}
	m.observed = true
	stepped := st.ClockStep != 0
	if stepped {
		// The marks are engine times of the old clock: bring them to the
		// new one, or checkpoints would wait for the old clock.
		m.written, m.failingAt = earliest(m.written, now), earliest(m.failingAt, now)
	}
	failing := inProgress(st)
	if failing {
		m.failingAt = now
	}
	interval := p.opts.CheckpointInterval
	due := false
	switch {
	case len(d.Transitions) > 0 || stepped:
		due = true
	case failing:
		due = m.written.IsZero() || now.Sub(m.written) >= interval
	case !m.failingAt.IsZero() && now.Sub(m.failingAt) <= window:
		due = now.Sub(m.written) >= max(interval, window/10)
	}
	if !due {
		p.mu.Unlock()
		return
	}
	m.written = now
	p.stats.Checkpoints++
	p.mu.Unlock()
	if err := Snapshot.Set(p.keeper, cluster, d.Snapshot); err != nil {
		p.log.Error(err, "engine snapshot not kept", "cluster", cluster)
	}
	if stepped {
		p.clockStepped(cluster, st)
	}
}

// ReasonClockStepped is the reason of the Warning Event about a clock step.
const ReasonClockStepped = "ClockStepped"

// clockStepped tells people that the clock of a member's probes stepped.
func (p *Persister) clockStepped(cluster string, st hysteresis.Status) {
	step := st.ClockStep.Round(time.Millisecond)
	var msg string
	if step < 0 {
		msg = fmt.Sprintf("a probe of member %s is stamped %s, %s before the one before it: "+
			"leafsync's wall clock stepped back, or its saved state was written by a leader whose clock ran ahead",
			cluster, st.LastObserved.UTC().Format(time.RFC3339), -step)
	} else {
		msg = fmt.Sprintf("leafsync's wall clock stepped %s ahead between two probes of member %s (probe stamped %s)",
			step, cluster, st.LastObserved.UTC().Format(time.RFC3339))
	}
	msg += ". No probe is dropped: the member's readiness times were moved by the step and read in the new clock; " +
		"check time synchronisation (NTP) on the nodes leafsync runs on"
	p.log.Info("clock stepped: member's readiness times re-anchored", "cluster", cluster, "step", st.ClockStep.String(), "observed", st.LastObserved)
	if p.opts.Recorder == nil || p.opts.Regarding == nil {
		return
	}
	if obj := p.opts.Regarding(cluster); obj != nil {
		p.opts.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonClockStepped, "Probe", "%s", msg)
	}
}

func earliest(t, now time.Time) time.Time {
	if t.After(now) {
		return now
	}
	return t
}

// Forget drops a deregistered cluster's saved state (a deregistration
// hook: an error keeps the registration's finalizer, and it is retried).
func (p *Persister) Forget(ctx context.Context, cluster string) error {
	p.mu.Lock()
	delete(p.marks, cluster)
	p.mu.Unlock()
	return p.keeper.ForgetNow(ctx, cluster)
}

// Stats returns the Persister's figures.
func (p *Persister) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

func (p *Persister) count(fn func(*Stats)) {
	p.mu.Lock()
	fn(&p.stats)
	p.mu.Unlock()
}

// inProgress: something is under way whose clocks a restart must resume —
// a failure streak (of any class), a hold by the mass-disconnect guard, an
// outage or a recovery.
func inProgress(st hysteresis.Status) bool {
	if st.State != hysteresis.Ready || st.Held {
		return true
	}
	switch st.Reason {
	case hysteresis.ReasonNetworkFailure, hysteresis.ReasonServerFailure, hysteresis.ReasonAuthFailure,
		hysteresis.ReasonConfigFailure, hysteresis.ReasonLowAvailability, hysteresis.ReasonMassDisconnect:
		return true
	}
	return false
}
