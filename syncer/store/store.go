// Package store keeps the state of leafsync that must survive a restart or a
// change of leader: each member's hysteresis snapshot (clocks, streaks, flap
// penalty) and the downstream pod deletes leafsync owes or defers.
//
// State is kept per member cluster, one record each, so that a large fleet
// never builds one large object. Every write is conditional on the version
// read (a resourceVersion, an etcd mod revision): a replica that lost the
// lead gets ErrConflict and never silently overwrites its successor.
package store

import (
	"context"
	"errors"
	"time"
)

// ErrConflict: the record changed since it was read (another writer).
var ErrConflict = errors.New("store: conflicting write: the record changed since it was read")

// ErrNotFound: no record for the cluster.
var ErrNotFound = errors.New("store: no record")

// Version identifies what a writer read; "" means "no record yet".
type Version string

// ClusterState is everything persisted about one member cluster.
type ClusterState struct {
	// Hysteresis is the engine's snapshot of the cluster
	// (hysteresis.Fleet.SnapshotCluster).
	Hysteresis []byte `json:"hysteresis,omitempty"`
	// Deletes are downstream pod deletes leafsync owes or defers.
	Deletes []PendingDelete `json:"deletes,omitempty"`
}

// DeleteKind says why a downstream delete waits.
type DeleteKind string

const (
	// Owed: the host deleted the pod while the member was confirmed down;
	// the member pod is deleted when the member is reachable, per policy.
	Owed DeleteKind = "Owed"
	// Deferred: a stale eviction; the member pod is kept until the host's
	// replacement is Ready (or MaxDeferral passes).
	Deferred DeleteKind = "Deferred"
	// Retained: a stale eviction under the Retain policy; the member pod
	// is kept and reported as an orphan.
	Retained DeleteKind = "Retained"
)

// PendingDelete is one member pod whose deletion waits.
type PendingDelete struct {
	Kind      DeleteKind `json:"kind"`
	Namespace string     `json:"namespace"`
	Name      string     `json:"name"`
	// HostUID is the UID of the host pod that was deleted; the member pod
	// carries it in a label, so a recreated host pod (new UID) is told apart.
	HostUID string `json:"hostUID"`
	// Cause is the DisruptionTarget reason of the host deletion ("" for a
	// plain DELETE).
	Cause string `json:"cause,omitempty"`
	// Owner is the host pod's controller (Kind/name), to find its replacement.
	Owner string `json:"owner,omitempty"`
	// Since is when the delete was recorded; MaxDeferral counts from it.
	Since time.Time `json:"since"`
	// GracePeriodSeconds is the grace period to forward.
	GracePeriodSeconds *int64 `json:"gracePeriodSeconds,omitempty"`
}

// Store is a backend: memory (tests), kube (host objects, default), etcd.
type Store interface {
	// Get returns a cluster's state and its version, or ErrNotFound.
	Get(ctx context.Context, cluster string) (ClusterState, Version, error)
	// Put writes a cluster's state if its version is still v ("" to
	// create) and returns the new version, or ErrConflict.
	Put(ctx context.Context, cluster string, st ClusterState, v Version) (Version, error)
	// Delete removes a cluster's record if its version is still v.
	Delete(ctx context.Context, cluster string, v Version) error
	// List returns the names of clusters with a record.
	List(ctx context.Context) ([]string, error)
}
