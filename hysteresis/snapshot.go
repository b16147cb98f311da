package hysteresis

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"time"
)

// SnapshotVersion is the version written in snapshots. Restore accepts
// exactly this version; a future version will add a migration here.
const SnapshotVersion = 1

// clusterSnapshot is the stable encoding of one cluster's state. Field names
// are part of the persisted format: change them only with a new version.
type clusterSnapshot struct {
	Version   int        `json:"version"`
	Cluster   string     `json:"cluster"`
	Overrides *Overrides `json:"overrides,omitempty"`

	State       State     `json:"state"`
	Since       time.Time `json:"since,omitzero"`
	OutageSince time.Time `json:"outageSince,omitzero"`
	// UnreachableSince: absent in snapshots written before it existed,
	// where it is taken to be OutageSince.
	UnreachableSince time.Time `json:"unreachableSince,omitzero"`

	Last *lastSnapshot `json:"last,omitempty"`

	FailFor    Duration `json:"failFor"`
	HardActive bool     `json:"hardActive"`
	HardFor    Duration `json:"hardFor"`
	OKFor      Duration `json:"okFor"`
	Cause      string   `json:"cause,omitempty"`

	Penalty   float64   `json:"penalty"`
	PenaltyAt time.Time `json:"penaltyAt,omitzero"`
	Damped    bool      `json:"damped"`

	Held       bool      `json:"held"`
	HeldFor    Duration  `json:"heldFor,omitzero"`
	Released   bool      `json:"released,omitempty"`
	ReleasedAt time.Time `json:"releasedAt,omitzero"`
	Cordoned   bool      `json:"cordoned"`
	Reason     string    `json:"reason,omitempty"`
	Detail     string    `json:"detail,omitempty"`

	Window   windowSnapshot   `json:"window"`
	Counters countersSnapshot `json:"counters"`
}

type lastSnapshot struct {
	Time   time.Time `json:"t"`
	OK     bool      `json:"ok"`
	Class  Class     `json:"class,omitempty"`
	Detail string    `json:"detail,omitempty"`
}

type windowSnapshot struct {
	// Width of a bucket; if the restored cluster's window gives another
	// width, the window starts empty.
	Width   Duration       `json:"width"`
	Buckets []slotSnapshot `json:"buckets,omitempty"`
}

type slotSnapshot struct {
	Epoch int64    `json:"epoch"` // bucket number: unix ns / width
	OK    Duration `json:"ok"`
	Fail  Duration `json:"fail"`
}

type countersSnapshot struct {
	FlapsSuppressed uint64              `json:"flapsSuppressed"`
	Transitions     map[string]uint64   `json:"transitions,omitempty"` // "From->To"
	TimeIn          map[string]Duration `json:"timeIn,omitempty"`
	Cordoned        Duration            `json:"cordoned"`
	MaxPenalty      float64             `json:"maxPenalty"`
	ClockSteps      uint64              `json:"clockSteps,omitempty"`
}

type fleetSnapshot struct {
	Version  int               `json:"version"`
	Clusters []clusterSnapshot `json:"clusters"`
}

func (c *cluster) snapshot() clusterSnapshot {
	s := clusterSnapshot{
		Version:          SnapshotVersion,
		Cluster:          c.name,
		State:            c.state,
		Since:            c.since,
		OutageSince:      c.outageSince,
		UnreachableSince: c.unreachableSince,
		FailFor:          D(c.failFor),
		HardActive:       c.hardActive,
		HardFor:          D(c.hardFor),
		OKFor:            D(c.okFor),
		Cause:            c.cause,
		Penalty:          c.penalty,
		PenaltyAt:        c.penaltyAt,
		Damped:           c.damped,
		Held:             c.held,
		HeldFor:          D(c.heldFor),
		Released:         c.released,
		ReleasedAt:       c.releasedAt,
		Cordoned:         c.cordoned,
		Reason:           c.reason,
		Detail:           c.detail,
		Window:           windowSnapshot{Width: D(time.Duration(c.width))},
	}
	if c.ov != (Overrides{}) {
		ov := c.ov
		s.Overrides = &ov
	}
	if c.lastOut != none {
		s.Last = &lastSnapshot{Time: c.last, OK: c.lastOut == okay, Class: c.lastClass, Detail: c.lastDetail}
	}
	for _, sl := range c.slots {
		if sl.ok != 0 || sl.fail != 0 {
			s.Window.Buckets = append(s.Window.Buckets, slotSnapshot{Epoch: sl.epoch, OK: D(time.Duration(sl.ok)), Fail: D(time.Duration(sl.fail))})
		}
	}
	sort.Slice(s.Window.Buckets, func(i, j int) bool { return s.Window.Buckets[i].Epoch < s.Window.Buckets[j].Epoch })
	k := c.counters
	s.Counters = countersSnapshot{FlapsSuppressed: k.FlapsSuppressed, Cordoned: D(k.Cordoned), MaxPenalty: k.MaxPenalty, ClockSteps: k.ClockSteps}
	for from := range NumStates {
		if k.TimeIn[from] != 0 {
			if s.Counters.TimeIn == nil {
				s.Counters.TimeIn = map[string]Duration{}
			}
			s.Counters.TimeIn[State(from).String()] = D(k.TimeIn[from])
		}
		for to := range NumStates {
			if n := k.Transitions[from][to]; n != 0 {
				if s.Counters.Transitions == nil {
					s.Counters.Transitions = map[string]uint64{}
				}
				s.Counters.Transitions[State(from).String()+"->"+State(to).String()] = n
			}
		}
	}
	return s
}

func bad(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBadSnapshot}, a...)...)
}

// check validates a decoded snapshot before anything is changed.
func (s *clusterSnapshot) check() error {
	if s.Version != SnapshotVersion {
		return fmt.Errorf("%w %d (want %d)", ErrSnapshotVersion, s.Version, SnapshotVersion)
	}
	if s.Cluster == "" {
		return bad("no cluster name")
	}
	if int(s.State) >= NumStates {
		return bad("cluster %q: invalid state", s.Cluster)
	}
	if s.FailFor.Duration < 0 || s.HardFor.Duration < 0 || s.OKFor.Duration < 0 || s.HeldFor.Duration < 0 {
		return bad("cluster %q: negative streak", s.Cluster)
	}
	if math.IsNaN(s.Penalty) || math.IsInf(s.Penalty, 0) || s.Penalty < 0 {
		return bad("cluster %q: invalid penalty %g", s.Cluster, s.Penalty)
	}
	if s.Last != nil && !s.Last.OK && !s.Last.Class.valid() {
		return bad("cluster %q: failed last observation without class", s.Cluster)
	}
	if s.Last == nil && s.State != Ready {
		return bad("cluster %q: state %s without any observation", s.Cluster, s.State)
	}
	if !s.UnreachableSince.IsZero() && (s.OutageSince.IsZero() || s.UnreachableSince.After(s.OutageSince)) {
		return bad("cluster %q: unreachableSince %s without an outage that began after it (outageSince %s)", s.Cluster, s.UnreachableSince, s.OutageSince)
	}
	for tr := range s.Counters.Transitions {
		if _, _, ok := parseTransitionKey(tr); !ok {
			return bad("cluster %q: bad transition counter key %q", s.Cluster, tr)
		}
	}
	for st := range s.Counters.TimeIn {
		if _, err := ParseState(st); err != nil {
			return bad("cluster %q: bad timeIn key %q", s.Cluster, st)
		}
	}
	return nil
}

func parseTransitionKey(k string) (State, State, bool) {
	for i := 0; i+2 <= len(k); i++ {
		if k[i:i+2] == "->" {
			from, err1 := ParseState(k[:i])
			to, err2 := ParseState(k[i+2:])
			return from, to, err1 == nil && err2 == nil
		}
	}
	return 0, 0, false
}

// restore replaces c's state (not its config) with s, which must be checked.
func (c *cluster) restore(s *clusterSnapshot) {
	cfg, ov, width := c.cfg, c.ov, c.width
	*c = cluster{name: c.name, ov: ov, cfg: cfg, maxCredit: c.maxCredit, width: width, counted: c.counted}
	c.state, c.since, c.outageSince = s.State, norm0(s.Since), norm0(s.OutageSince)
	c.unreachableSince = norm0(s.UnreachableSince)
	if c.unreachableSince.IsZero() {
		c.unreachableSince = c.outageSince
	}
	if s.Last != nil {
		c.last = norm(s.Last.Time)
		c.lastOut = okay
		if !s.Last.OK {
			c.lastOut = soft
			if s.Last.Class.counts() {
				c.lastOut = hard
			}
			c.lastClass, c.lastDetail = s.Last.Class, s.Last.Detail
		}
	}
	c.failFor, c.hardActive, c.hardFor, c.okFor, c.cause = s.FailFor.Duration, s.HardActive, s.HardFor.Duration, s.OKFor.Duration, s.Cause
	c.penalty, c.penaltyAt, c.damped = s.Penalty, norm0(s.PenaltyAt), s.Damped
	c.held, c.cordoned, c.reason, c.detail = s.Held, s.Cordoned, s.Reason, s.Detail
	c.heldFor, c.released, c.releasedAt = s.HeldFor.Duration, s.Released, norm0(s.ReleasedAt)
	if int64(s.Window.Width.Duration) == width {
		for _, b := range s.Window.Buckets {
			sl := &c.slots[((b.Epoch%windowBuckets)+windowBuckets)%windowBuckets]
			if b.Epoch >= sl.epoch || (sl.ok == 0 && sl.fail == 0) {
				*sl = slot{epoch: b.Epoch, ok: int64(b.OK.Duration), fail: int64(b.Fail.Duration)}
			}
		}
	}
	k := &c.counters
	k.FlapsSuppressed, k.Cordoned, k.MaxPenalty = s.Counters.FlapsSuppressed, s.Counters.Cordoned.Duration, s.Counters.MaxPenalty
	k.ClockSteps = s.Counters.ClockSteps
	for key, n := range s.Counters.Transitions {
		from, to, _ := parseTransitionKey(key)
		k.Transitions[from][to] = n
	}
	for key, d := range s.Counters.TimeIn {
		st, _ := ParseState(key)
		k.TimeIn[st] = d.Duration
	}
}

func norm0(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return norm(t)
}

// Snapshot encodes the state of every cluster (and the overrides each was
// added with) as versioned JSON, clusters sorted by name.
func (f *RawFleet) Snapshot() ([]byte, error) {
	fs := fleetSnapshot{Version: SnapshotVersion, Clusters: make([]clusterSnapshot, 0, len(f.clusters))}
	for _, c := range f.clusters {
		fs.Clusters = append(fs.Clusters, c.snapshot())
	}
	sort.Slice(fs.Clusters, func(i, j int) bool { return fs.Clusters[i].Cluster < fs.Clusters[j].Cluster })
	return json.Marshal(fs)
}

// SnapshotCluster encodes one cluster's state as versioned JSON (what the
// state store persists per cluster).
func (f *RawFleet) SnapshotCluster(name string) ([]byte, error) {
	c := f.clusters[name]
	if c == nil {
		return nil, fmt.Errorf("%w %q", ErrUnknownCluster, name)
	}
	return json.Marshal(c.snapshot())
}

// Restore restores every cluster of a fleet snapshot. A cluster of the
// snapshot that the fleet does not have is added with the overrides recorded
// in the snapshot; a cluster it has keeps its current config (config is not
// state) and gets the snapshot's state. Clusters not in the snapshot are left
// alone. Either the whole snapshot is restored or nothing is.
func (f *RawFleet) Restore(data []byte) error {
	var fs fleetSnapshot
	if err := json.Unmarshal(data, &fs); err != nil {
		return bad("%v", err)
	}
	if fs.Version != SnapshotVersion {
		return fmt.Errorf("%w %d (want %d)", ErrSnapshotVersion, fs.Version, SnapshotVersion)
	}
	seen := map[string]bool{}
	for i := range fs.Clusters {
		s := &fs.Clusters[i]
		if err := s.check(); err != nil {
			return err
		}
		if seen[s.Cluster] {
			return bad("cluster %q twice", s.Cluster)
		}
		seen[s.Cluster] = true
		if f.clusters[s.Cluster] == nil {
			if err := f.cfg.Clusters[s.Cluster].Merge(ovOf(s)).Apply(f.cfg.Config).Validate(); err != nil {
				return fmt.Errorf("restoring cluster %q: %w", s.Cluster, err)
			}
		}
	}
	for i := range fs.Clusters {
		f.restore(&fs.Clusters[i])
	}
	return nil
}

// RestoreCluster restores one cluster from a SnapshotCluster encoding, with
// the same rules as Restore. A restart is not a flap: nothing is counted and
// the clocks (streaks, Since, penalty) continue from the snapshot.
func (f *RawFleet) RestoreCluster(data []byte) error {
	var s clusterSnapshot
	if err := json.Unmarshal(data, &s); err != nil {
		return bad("%v", err)
	}
	if err := s.check(); err != nil {
		return err
	}
	return f.restore(&s)
}

func ovOf(s *clusterSnapshot) Overrides {
	if s.Overrides == nil {
		return Overrides{}
	}
	return *s.Overrides
}

func (f *RawFleet) restore(s *clusterSnapshot) error {
	c := f.clusters[s.Cluster]
	if c == nil {
		var err error
		if c, err = f.add(s.Cluster, ovOf(s)); err != nil {
			return err
		}
	}
	c.restore(s)
	f.recount(c)
	return nil
}
