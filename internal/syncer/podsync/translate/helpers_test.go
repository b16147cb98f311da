package translate

import "github.com/leafsync/leafsync/internal/syncer/podsync/podtest"

// The shared fixtures (podtest), by their short names.
var hostPod = podtest.HostPod

const (
	testCluster = podtest.Cluster
	testHost    = podtest.Host
	testLeaf    = podtest.Leaf
)
