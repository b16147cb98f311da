package hysteresis

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"time"
)

// Errors returned by RawFleet and Fleet methods (wrapped with details; test with errors.Is).
var (
	ErrUnknownCluster   = errors.New("hysteresis: unknown cluster")
	ErrBadClass         = errors.New("hysteresis: failed observation needs a valid class")
	ErrBadSnapshot      = errors.New("hysteresis: bad snapshot")
	ErrSnapshotVersion  = errors.New("hysteresis: unsupported snapshot version")
	errEmptyClusterName = errors.New("hysteresis: empty cluster name")
)

// windowBuckets is the number of buckets the availability window is split
// into (each window/windowBuckets wide). Fixed, so no allocation per probe.
const windowBuckets = 60

type outcome uint8

const (
	none outcome = iota // no observation yet
	okay                // success
	hard                // network/server failure: counts towards NotReady
	soft                // auth/config failure: cordons, never NotReady
)

type slot struct{ epoch, ok, fail int64 } // evidence in ns per bucket

type cluster struct {
	name string
	ov   Overrides // overrides given to Add (on top of the file's)
	cfg  Config    // effective config

	maxCredit time.Duration // evidence one observation can add: 1.5×probeInterval
	width     int64         // availability bucket width, ns

	state            State
	since            time.Time
	outageSince      time.Time
	unreachableSince time.Time

	last       time.Time
	lastOut    outcome
	lastClass  Class
	lastDetail string

	failFor    time.Duration // failures (any class) continuous for
	hardActive bool          // network/server failing since the last success
	hardFor    time.Duration // network/server failures continuous for
	okFor      time.Duration // successes continuous for
	cause      string        // why NotReady was entered

	penalty   float64
	penaltyAt time.Time
	damped    bool

	held     bool
	heldFor  time.Duration // failure evidence while held
	released bool          // NotReady by the guard's release after massHoldMax
	// releasedAt is when the guard last released this cluster; the fleet's
	// release rate reads the latest of them (so it lives in snapshots).
	releasedAt time.Time
	cordoned   bool
	reason     string
	detail     string

	// lastRaw is the last observation's time as given, with its monotonic
	// clock reading if it had one (never in snapshots).
	lastRaw  time.Time
	step     time.Duration // Status.ClockStep
	counted  bool          // counted in RawFleet.failing
	slots    [windowBuckets]slot
	counters Counters
}

// RawFleet holds the engine state of every cluster. The mass-disconnect
// guard is fleet-wide, so all clusters of a fleet live in one RawFleet. Like
// raft's RawNode it has no lock: use it from one goroutine, or use Fleet.
// Its decisions depend only on the observations given to it, in order.
type RawFleet struct {
	cfg      FleetConfig
	clusters map[string]*cluster
	failing  int // clusters failing (network/server) and not yet NotReady
}

// NewRawFleet returns an empty RawFleet, or an error if cfg does not validate.
func NewRawFleet(cfg FleetConfig) (*RawFleet, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &RawFleet{cfg: cfg, clusters: make(map[string]*cluster)}, nil
}

// Add adds a cluster in state Ready, or updates the overrides of an existing
// cluster keeping its state. The effective config is the fleet defaults, then
// the config file's entry for the cluster (FleetConfig.Clusters), then o.
func (f *RawFleet) Add(name string, o Overrides) error {
	if name == "" {
		return errEmptyClusterName
	}
	_, err := f.add(name, o)
	return err
}

func (f *RawFleet) add(name string, o Overrides) (*cluster, error) {
	cfg := f.cfg.Clusters[name].Merge(o).Apply(f.cfg.Config)
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("cluster %q: %w", name, err)
	}
	c := f.clusters[name]
	if c == nil {
		c = &cluster{name: name}
		f.clusters[name] = c
	}
	c.ov = o
	c.setConfig(cfg)
	f.recount(c)
	return c, nil
}

func (c *cluster) setConfig(cfg Config) {
	c.cfg = cfg
	c.maxCredit = cfg.ProbeInterval.Duration * 3 / 2
	w := int64(cfg.Window.Duration) / windowBuckets
	if w < 1 {
		w = 1
	}
	if w != c.width {
		c.slots = [windowBuckets]slot{}
		c.width = w
	}
}

// Remove forgets a cluster. Removing an unknown cluster does nothing.
func (f *RawFleet) Remove(name string) {
	if c := f.clusters[name]; c != nil {
		if c.counted {
			f.failing--
		}
		delete(f.clusters, name)
	}
}

// Clusters returns the names of all clusters, sorted.
func (f *RawFleet) Clusters() []string {
	names := make([]string, 0, len(f.clusters))
	for n := range f.clusters {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Config returns the effective config of a cluster.
func (f *RawFleet) Config(name string) (Config, bool) {
	c := f.clusters[name]
	if c == nil {
		return Config{}, false
	}
	return c.cfg, true
}

// Status returns a cluster's decision as of its last observation.
func (f *RawFleet) Status(name string) (Status, bool) {
	c := f.clusters[name]
	if c == nil {
		return Status{}, false
	}
	return c.status(), true
}

// Counters returns a cluster's counters.
func (f *RawFleet) Counters(name string) (Counters, bool) {
	c := f.clusters[name]
	if c == nil {
		return Counters{}, false
	}
	k := c.counters
	k.Penalty = c.penalty
	return k, true
}

func (c *cluster) status() Status {
	return Status{
		State:            c.state,
		Cordoned:         c.cordoned,
		Reason:           c.reason,
		Detail:           c.detail,
		Since:            c.since,
		OutageSince:      c.outageSince,
		UnreachableSince: c.unreachableSince,
		LastObserved:     c.last,
		Penalty:          c.penalty,
		Damped:           c.damped,
		Held:             c.held,
		HeldFor:          c.heldFor,
		Released:         c.released,
		ClockStep:        c.step,
	}
}

// norm strips the monotonic clock reading and location, so that decisions
// are the same whether a time came from time.Now or from a snapshot.
func norm(t time.Time) time.Time { return time.Unix(0, t.UnixNano()).UTC() }

// Observe feeds one probe outcome of a cluster to the engine and returns the
// cluster's new Status and the transitions it caused (nil when nothing
// changed; at most two state changes, e.g. Ready → Suspect → NotReady when
// availability is already too low). A decision that changes nothing does
// not allocate. Errors (unknown cluster, failure without a valid class)
// leave the state unchanged.
//
// A clock step is not a reason to drop an observation: the cluster's times
// are re-anchored to the observation's clock and Status.ClockStep says by
// how much it stepped (see "Evidence and gaps" in the package
// documentation).
func (f *RawFleet) Observe(name string, o Observation) (Status, []Transition, error) {
	c := f.clusters[name]
	if c == nil {
		return Status{}, nil, fmt.Errorf("%w %q", ErrUnknownCluster, name)
	}
	out := okay
	if !o.OK {
		if !o.Class.valid() {
			return c.status(), nil, fmt.Errorf("%w: cluster %q: class %q", ErrBadClass, name, o.Class)
		}
		out = soft
		if o.Class.counts() {
			out = hard
		}
	}
	t := norm(o.Time)
	c.step = 0
	if c.lastOut != none {
		if step, ok := c.clockStep(o.Time, t); ok {
			c.step = step
			c.counters.ClockSteps++
		}
	}
	c.lastRaw = o.Time
	return f.observe(c, t, out, o)
}

// clockStepSlack is how far the wall clock may drift from the monotonic
// clock between two probes before it counts as a step (NTP slews by at
// most 0.5ms/s).
const clockStepSlack = time.Second

// clockStep re-anchors the cluster's times if the wall clock stepped
// between the last observation and this one (raw as given, t normalised),
// and reports the step. Within one process both times carry Go's monotonic
// clock reading: the step is the wall clock's difference from it, in
// either direction, and the observation keeps its true distance from the
// last one. Otherwise (the last observation came from a snapshot, or a
// clock without monotonic readings) only a time before the last one shows
// a step: the observation is taken to come one probe interval after the
// last one.
func (c *cluster) clockStep(raw, t time.Time) (time.Duration, bool) {
	wall := t.Sub(c.last)
	if monotonic(raw) && monotonic(c.lastRaw) {
		step := wall - raw.Sub(c.lastRaw)
		if step < -clockStepSlack || step > clockStepSlack || wall < 0 {
			c.reanchor(step)
			return step, true
		}
		return 0, false
	}
	if wall >= 0 {
		return 0, false
	}
	c.reanchor(wall - c.cfg.ProbeInterval.Duration)
	return wall, true
}

// monotonic reports whether t carries a monotonic clock reading (as
// time.Now's do; stripping it changes the value).
func monotonic(t time.Time) bool { return t != t.Round(0) }

// reanchor moves every time the cluster holds by off (the clock's step),
// so that its history reads in the clock of the observation that stepped:
// durations (streaks, time in states, evidence in the window) stay as they
// were, and no time lies ahead of the observation. The availability
// buckets move by whole buckets (off rounded down to the bucket width).
func (c *cluster) reanchor(off time.Duration) {
	for _, t := range []*time.Time{&c.since, &c.outageSince, &c.unreachableSince, &c.last, &c.penaltyAt, &c.releasedAt} {
		if !t.IsZero() {
			*t = t.Add(off)
		}
	}
	k := floorDiv(int64(off), c.width) // rounded down: no bucket ends up ahead of the new clock
	old := c.slots
	c.slots = [windowBuckets]slot{}
	for _, s := range old {
		if s.ok == 0 && s.fail == 0 {
			continue
		}
		s.epoch += k
		d := &c.slots[((s.epoch%windowBuckets)+windowBuckets)%windowBuckets]
		if s.epoch >= d.epoch || (d.ok == 0 && d.fail == 0) {
			*d = s
		}
	}
}

func (f *RawFleet) observe(c *cluster, t time.Time, out outcome, o Observation) (Status, []Transition, error) {
	cfg := &c.cfg

	// Account time spent since the previous observation, and the evidence
	// this observation adds. Evidence is only the time between two
	// observations with the same outcome, and at most maxCredit of it: a
	// gap in observations is evidence of nothing.
	var credit time.Duration
	prev := c.lastOut
	if prev != none {
		dt := t.Sub(c.last)
		c.counters.TimeIn[c.state] += dt
		if c.cordoned {
			c.counters.Cordoned += dt
		}
		credit = min(dt, c.maxCredit)
	}
	c.decay(t)

	switch out {
	case okay:
		if prev == okay {
			c.okFor += credit
			c.addWindow(t, credit, 0)
		} else {
			c.okFor = 0
		}
		c.failFor, c.hardFor, c.hardActive, c.heldFor = 0, 0, false, 0
		c.lastClass, c.lastDetail = 0, ""
	case hard, soft:
		if prev == hard || prev == soft {
			c.failFor += credit
		} else {
			c.failFor = 0
		}
		if out == hard {
			if prev == hard {
				c.hardFor += credit
				c.addWindow(t, 0, credit)
				if c.held {
					c.heldFor += credit
				}
			}
			if !c.hardActive {
				c.hardActive, c.hardFor = true, 0
			}
		}
		c.okFor = 0
		c.lastClass, c.lastDetail = o.Class, o.Detail
	}
	c.last, c.lastOut = t, out
	f.recount(c)

	var buf [2]Transition
	n := 0
	step := func(to State) {
		from, suspectSince := c.state, c.since
		c.counters.Transitions[from][to]++
		c.state, c.since = to, t
		switch {
		case to == NotReady && from != Recovering:
			c.outageSince, c.unreachableSince = t, t
			// The outage began when the failure streak did, unless the
			// mass-disconnect guard held it: its release is paced, and
			// backdating would undo the pacing.
			if from == Suspect && !c.released {
				c.unreachableSince = suspectSince
			}
		case to == Ready:
			c.outageSince, c.unreachableSince = time.Time{}, time.Time{}
		}
		if to != NotReady {
			c.released = false
		}
		c.heldFor = 0
		f.recount(c)
		c.derive()
		buf[n] = Transition{Time: t, Cluster: c.name, From: from, To: to, Cordoned: c.cordoned, Reason: c.reason}
		n++
	}
	wasCordoned, was := c.cordoned, c.state
	c.held = false

	switch c.state {
	case Ready:
		if out == hard {
			step(Suspect)
		}
	case Suspect:
		if out == okay {
			c.flap()
			step(Ready)
		}
	case NotReady:
		if out == okay {
			step(Recovering)
		}
	case Recovering:
		switch {
		case out == okay && c.okFor >= cfg.ReadyAfter.Duration:
			step(Ready)
		case out == hard:
			// A relapse: the outage clock (OutageSince) is not reset.
			if f.holds(c, t) {
				c.held = true
			} else {
				c.cause = classReason(o.Class)
				step(NotReady)
			}
		}
	}
	if c.state == Suspect && out == hard {
		cause := ""
		switch {
		case c.hardFor >= cfg.NotReadyAfter.Duration:
			cause = classReason(o.Class)
		case c.lowAvailability(t):
			cause = ReasonLowAvailability
		}
		if cause != "" {
			if f.holds(c, t) {
				c.held = true
			} else {
				c.cause = cause
				step(NotReady)
			}
		}
	}
	c.derive()

	if n == 0 && c.cordoned == wasCordoned {
		return c.status(), nil, nil
	}
	if n == 0 {
		buf[0] = Transition{Time: t, Cluster: c.name, From: was, To: was, Cordoned: c.cordoned, Reason: c.reason}
		n = 1
	} else {
		// Cordoned/Reason of the last change are the final ones (e.g. held).
		buf[n-1].Cordoned, buf[n-1].Reason = c.cordoned, c.reason
	}
	ts := make([]Transition, n)
	copy(ts, buf[:n])
	return c.status(), ts, nil
}

// decay applies the exponential decay of the flap penalty up to t, and lifts
// damping once the penalty is below reuse.
func (c *cluster) decay(t time.Time) {
	if c.penalty > 0 && t.After(c.penaltyAt) {
		c.penalty *= math.Exp2(-t.Sub(c.penaltyAt).Seconds() / c.cfg.HalfLife.Seconds())
		if c.penalty < 1e-3 {
			c.penalty = 0
		}
	}
	c.penaltyAt = t
	if c.damped && c.penalty < c.cfg.Reuse {
		c.damped = false
	}
}

// flap counts a suppressed flap and charges its penalty.
func (c *cluster) flap() {
	c.counters.FlapsSuppressed++
	if c.cfg.PenaltyPerFlap <= 0 {
		return
	}
	c.penalty = min(c.penalty+c.cfg.PenaltyPerFlap, c.cfg.MaxPenalty)
	c.counters.MaxPenalty = max(c.counters.MaxPenalty, c.penalty)
	if c.penalty > c.cfg.Suppress {
		c.damped = true
	}
}

// derive computes Cordoned, Reason and Detail from the rest of the state.
func (c *cluster) derive() {
	failing := c.lastOut == hard || c.lastOut == soft
	c.cordoned = c.state == NotReady || c.state == Recovering || c.damped ||
		(failing && c.failFor >= c.cfg.CordonAfter.Duration)
	c.detail = ""
	switch {
	case c.held:
		c.reason, c.detail = ReasonMassDisconnect, c.lastDetail
	case failing:
		c.reason, c.detail = classReason(c.lastClass), c.lastDetail
		if c.state == NotReady && c.lastOut == hard && c.cause == ReasonLowAvailability {
			c.reason = ReasonLowAvailability
		}
	case c.state == Recovering:
		c.reason = ReasonRecovering
	case c.damped:
		c.reason = ReasonFlapDamped
	default:
		c.reason = ""
	}
}

// recount keeps RawFleet.failing in step with c: a cluster counts as failing
// for the mass guard while network/server probes fail and it is not (yet)
// NotReady, or is NotReady only because the guard released it (so one
// release does not end the episode and let every other held cluster go at
// once). Other NotReady clusters do not count, so a few dead clusters
// cannot hold the guard on.
func (f *RawFleet) recount(c *cluster) {
	want := c.hardActive && (c.state != NotReady || c.released)
	if want != c.counted {
		c.counted = want
		if want {
			f.failing++
		} else {
			f.failing--
		}
	}
}

// holds reports whether the mass-disconnect guard keeps c out of NotReady
// at t: it is guarded, and either it has not been held for massHoldMax yet,
// or another cluster was released less than massReleaseInterval ago. When
// it lets go, c is marked released (the caller moves it to NotReady).
func (f *RawFleet) holds(c *cluster, t time.Time) bool {
	if !f.guarded(c) {
		return false
	}
	if c.heldFor < c.cfg.MassHoldMax.Duration {
		return true
	}
	if last := f.lastRelease(t); !last.IsZero() && t.Sub(last) < c.cfg.MassReleaseInterval.Duration {
		return true
	}
	c.released, c.releasedAt = true, t
	return false
}

// lastRelease is the latest time the guard let go of any cluster, as of t.
// A release stamped after t was stamped by a clock that ran ahead (another
// cluster's, not yet re-anchored by an observation of its own): it is taken
// to be at t, once and for good, so that pacing resumes massReleaseInterval
// later instead of waiting for that clock.
func (f *RawFleet) lastRelease(t time.Time) time.Time {
	var last time.Time
	for _, c := range f.clusters {
		if c.releasedAt.After(t) {
			c.releasedAt = t
		}
		if c.releasedAt.After(last) {
			last = c.releasedAt
		}
	}
	return last
}

// guarded reports whether the mass-disconnect condition, with c's
// thresholds, holds: at least massMin clusters and at least massFraction of
// the fleet are failing.
func (f *RawFleet) guarded(c *cluster) bool {
	n := f.failing
	return n >= c.cfg.MassMin && float64(n) >= c.cfg.MassFraction*float64(len(f.clusters))-1e-9
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func (c *cluster) addWindow(t time.Time, ok, fail time.Duration) {
	if ok == 0 && fail == 0 {
		return
	}
	e := floorDiv(t.UnixNano(), c.width)
	s := &c.slots[((e%windowBuckets)+windowBuckets)%windowBuckets]
	if s.epoch != e {
		*s = slot{epoch: e}
	}
	s.ok += int64(ok)
	s.fail += int64(fail)
}

// lowAvailability: the window holds at least half a window of evidence, at
// least notReadyAfter of it failure, and availability (success evidence /
// all evidence) is below minAvailability.
func (c *cluster) lowAvailability(t time.Time) bool {
	if c.cfg.MinAvailability <= 0 {
		return false
	}
	ok, fail := c.windowSums(t)
	return fail >= int64(c.cfg.NotReadyAfter.Duration) &&
		2*(ok+fail) >= int64(c.cfg.Window.Duration) &&
		float64(ok) < c.cfg.MinAvailability*float64(ok+fail)
}

func (c *cluster) windowSums(t time.Time) (ok, fail int64) {
	e := floorDiv(t.UnixNano(), c.width)
	for i := range c.slots {
		s := &c.slots[i]
		if s.epoch > e-windowBuckets && s.epoch <= e {
			ok += s.ok
			fail += s.fail
		}
	}
	return ok, fail
}
