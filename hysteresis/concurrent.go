package hysteresis

import "sync"

// Fleet is a RawFleet behind a mutex, safe for concurrent use (in
// leafsync the clusters Registry changes it, and metrics read its
// counters). It adds nothing but the lock: every decision is RawFleet's.
type Fleet struct {
	mu  sync.Mutex
	raw *RawFleet
}

// NewFleet returns an empty Fleet, or an error if cfg does not validate.
func NewFleet(cfg FleetConfig) (*Fleet, error) {
	raw, err := NewRawFleet(cfg)
	if err != nil {
		return nil, err
	}
	return &Fleet{raw: raw}, nil
}

// RestoreFleet is NewFleet followed by Restore.
func RestoreFleet(cfg FleetConfig, data []byte) (*Fleet, error) {
	f, err := NewFleet(cfg)
	if err != nil {
		return nil, err
	}
	if err := f.Restore(data); err != nil {
		return nil, err
	}
	return f, nil
}

// Add is RawFleet.Add.
func (f *Fleet) Add(name string, o Overrides) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.raw.Add(name, o)
}

// Remove is RawFleet.Remove.
func (f *Fleet) Remove(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.raw.Remove(name)
}

// Clusters is RawFleet.Clusters.
func (f *Fleet) Clusters() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.raw.Clusters()
}

// Config is RawFleet.Config.
func (f *Fleet) Config(name string) (Config, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.raw.Config(name)
}

// Status is RawFleet.Status.
func (f *Fleet) Status(name string) (Status, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.raw.Status(name)
}

// Counters is RawFleet.Counters.
func (f *Fleet) Counters(name string) (Counters, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.raw.Counters(name)
}

// Observe is RawFleet.Observe.
func (f *Fleet) Observe(name string, o Observation) (Status, []Transition, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.raw.Observe(name, o)
}

// Decision is what one observation yields, as raft's Ready: the cluster's
// new Status and the transitions that led there, its effective Config (the
// probe interval of the next probe, the thresholds a message names), and
// the cluster's Snapshot after the observation (what a caller persists, if
// it decides to). Consumers take what they need from it and never read the
// engine back.
type Decision struct {
	Status      Status
	Transitions []Transition
	Config      Config
	Snapshot    []byte
}

// Step feeds one observation to the cluster (RawFleet.Observe) and
// returns the Decision, read under the same lock as the observation so that
// its parts agree.
func (f *Fleet) Step(name string, o Observation) (Decision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, ts, err := f.raw.Observe(name, o)
	if err != nil {
		return Decision{}, err
	}
	cfg, _ := f.raw.Config(name)
	snap, err := f.raw.SnapshotCluster(name)
	if err != nil {
		return Decision{}, err
	}
	return Decision{Status: st, Transitions: ts, Config: cfg, Snapshot: snap}, nil
}

// Current is the cluster's Decision as of its last observation (or
// restore), with no transitions: what a consumer starts from.
func (f *Fleet) Current(name string) (Decision, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, ok := f.raw.Status(name)
	if !ok {
		return Decision{}, false
	}
	cfg, _ := f.raw.Config(name)
	return Decision{Status: st, Config: cfg}, true
}

// Snapshot is RawFleet.Snapshot.
func (f *Fleet) Snapshot() ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.raw.Snapshot()
}

// SnapshotCluster is RawFleet.SnapshotCluster.
func (f *Fleet) SnapshotCluster(name string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.raw.SnapshotCluster(name)
}

// Restore is RawFleet.Restore.
func (f *Fleet) Restore(data []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.raw.Restore(data)
}

// RestoreCluster is RawFleet.RestoreCluster.
func (f *Fleet) RestoreCluster(data []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.raw.RestoreCluster(data)
}
