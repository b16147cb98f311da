package config

import (
	"errors"
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/leafsync/leafsync/hysteresis"
)

// Sharding spreads members over several active replicas (docs/scaling.md):
// each replica holds a shard Lease, and each member is written by exactly
// one replica at a time, named by the member's Lease.
type Sharding struct {
	// Enabled runs this replica as one of N active ones. Off: one replica
	// acts on every member (with leaderElection, the leader).
	Enabled bool `json:"enabled"`
	// Replica names this replica: its shard Lease is
	// leafsync-shard-<replica>, and members are assigned by this name.
	// Empty: $POD_NAME, else the host name (see ReplicaName).
	Replica string `json:"replica"`
	// Ring names the set of replicas that share members (the chart sets
	// the release name), so two installations in one namespace never take
	// each other's members.
	Ring string `json:"ring"`
	// LeaseDuration: a replica whose shard Lease was not renewed for this
	// long is dead to the others, which take its members; a replica that
	// could not renew its own for this long stops acting.
	LeaseDuration hysteresis.Duration `json:"leaseDuration"`
	// RenewInterval between two renewals of the shard Lease.
	RenewInterval hysteresis.Duration `json:"renewInterval"`
	// LoadBound is the bounded-loads epsilon: no replica is assigned more
	// than ceil((1+loadBound)·members/replicas).
	LoadBound float64 `json:"loadBound"`
	// DrainTimeout bounds how long a stopping replica (SIGTERM) waits for
	// the others to take its members before it stops.
	DrainTimeout hysteresis.Duration `json:"drainTimeout"`
}

func defaultSharding() Sharding {
	return Sharding{
		Ring:          "leafsync",
		LeaseDuration: hysteresis.Duration{Duration: 15 * time.Second},
		RenewInterval: hysteresis.Duration{Duration: 2 * time.Second},
		LoadBound:     0.05,
		DrainTimeout:  hysteresis.Duration{Duration: 30 * time.Second},
	}
}

// ReplicaName is the replica's name: sharding.replica, else $POD_NAME,
// else the host name.
func (s Sharding) ReplicaName() string {
	if s.Replica != "" {
		return s.Replica
	}
	if p := os.Getenv("POD_NAME"); p != "" {
		return p
	}
	h, _ := os.Hostname()
	return h
}

// validate checks the block; backend is store.backend (sharding needs a
// store every replica reads).
func (s Sharding) validate(backend string) error {
	if !s.Enabled {
		return nil
	}
	var errs []error
	// The name goes into a Lease name (leafsync-shard-<replica>).
	if msgs := validation.IsDNS1123Subdomain(s.ReplicaName()); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("sharding.replica %q (or $POD_NAME, or the host name) is not a valid name: %v", s.ReplicaName(), msgs))
	}
	if msgs := validation.IsValidLabelValue(s.Ring); s.Ring == "" || len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("sharding.ring %q must be a non-empty label value: %v", s.Ring, msgs))
	}
	if s.LeaseDuration.Duration <= 0 || s.RenewInterval.Duration <= 0 || s.DrainTimeout.Duration <= 0 {
		errs = append(errs, errors.New("sharding.leaseDuration, renewInterval and drainTimeout must all be positive"))
	} else if s.RenewInterval.Duration >= s.LeaseDuration.Duration {
		errs = append(errs, fmt.Errorf("sharding.renewInterval (%s) must be below sharding.leaseDuration (%s)", s.RenewInterval, s.LeaseDuration))
	}
	if s.LoadBound < 0 || s.LoadBound > 1 {
		errs = append(errs, fmt.Errorf("sharding.loadBound (%g) must be in [0, 1]", s.LoadBound))
	}
	if backend == StoreMemory {
		errs = append(errs, errors.New("sharding needs store.backend kube or etcd: a member's readiness state and owed deletes must move with the member to another replica, and memory is one process's"))
	}
	return errors.Join(errs...)
}
