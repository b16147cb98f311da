package clusters

import (
	"encoding/json"
	"fmt"

	"github.com/leafsync/leafsync/hysteresis"
)

// The engine's writers. The Registry is the hysteresis engine's only
// owner: a member's thresholds (the Controller), its saved snapshot (the
// state store's persister, before the first probe), each probe outcome
// (observe, registry_write.go) and its removal (runtimes) change the
// engine here, under the Registry's lock, and the entry's readiness follows
// in the same step, so what the Registry publishes is never older than the
// engine.

// setThresholds adds a cluster to the engine with its per-cluster
// overrides, or applies new overrides to its state. A registered member's
// readiness takes the new configuration (the next probe interval with it).
func (r *Registry) setThresholds(cluster string, o hysteresis.Overrides) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.engine.Add(cluster, o); err != nil {
		return err
	}
	if d, ok := r.engine.Current(cluster); ok {
		if e := r.entries[cluster]; e != nil {
			e.readiness.Config = d.Config
		}
	}
	return nil
}

// Restore puts a cluster's saved engine snapshot (hysteresis
// SnapshotCluster) in place of its state, and returns the restored status.
// The snapshot must be of that cluster. Only before the member's first probe: it is refused once the cluster has
// a runtime in this process, for restoring then would rewind decisions
// already published. The member's MemberAdded event carries the restored
// readiness.
func (r *Registry) Restore(cluster string, snapshot []byte) (hysteresis.Status, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.entries[cluster] != nil {
		return hysteresis.Status{}, fmt.Errorf("cluster %s is already running: restoring its saved state would rewind its readiness", cluster)
	}
	var head struct {
		Cluster string `json:"cluster"`
	}
	if err := json.Unmarshal(snapshot, &head); err != nil {
		return hysteresis.Status{}, err
	}
	if head.Cluster != cluster {
		return hysteresis.Status{}, fmt.Errorf("the record holds a snapshot of cluster %q", head.Cluster)
	}
	if err := r.engine.RestoreCluster(snapshot); err != nil {
		return hysteresis.Status{}, err
	}
	d, _ := r.engine.Current(cluster)
	return d.Status, nil
}

// forget drops the engine state of a cluster that is not registered (a
// deregistered member, or one whose runtime could not be built).
func (r *Registry) forget(cluster string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.entries[cluster] == nil {
		r.engine.Remove(cluster)
	}
}

// readiness is the cluster's latest decision: its entry's, or the engine's
// starting point (thresholds, a restored state) before it has one.
func (r *Registry) readiness(cluster string) (hysteresis.Decision, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.entries[cluster]; e != nil {
		return e.readiness, true
	}
	return r.engine.Current(cluster)
}
