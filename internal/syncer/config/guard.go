package config

import (
	"errors"
	"fmt"
	"strings"

	"github.com/leafsync/leafsync/internal/syncer/guard"
)

// EvictionGuard configures the eviction guard in the host's API server
// (docs/eviction-guard.md): a ValidatingAdmissionPolicy refusing the taint
// manager's delete of a pod on a leaf whose member leafsync has not
// confirmed NotReady.
type EvictionGuard struct {
	// Enabled: leafsync keeps the per-member readiness records the policy
	// reads, and ensures the policy and its binding at start when it may.
	// Disabled, an existing policy has no records to refuse with and lets
	// every delete through.
	Enabled bool `json:"enabled"`
	// Identities are the users whose pod deletes the guard checks: KCM's
	// taint-eviction controller deletes as node-controller.
	Identities []string `json:"identities"`
}

// defaultEvictionGuard guards against KCM's taint-eviction controller.
func defaultEvictionGuard() EvictionGuard {
	return EvictionGuard{Enabled: true, Identities: []string{guard.DefaultIdentity}}
}

func (g EvictionGuard) validate() error {
	if !g.Enabled {
		return nil
	}
	var errs []error
	if len(g.Identities) == 0 {
		errs = append(errs, fmt.Errorf("evictionGuard.identities is empty: name the users whose evictions are guarded (default %s), or set evictionGuard.enabled: false", guard.DefaultIdentity))
	}
	for _, id := range g.Identities {
		if id == "" || strings.ContainsAny(id, "\"\\\n") {
			errs = append(errs, fmt.Errorf("evictionGuard.identities: %q is not a username (empty, or with quotes, backslashes or newlines)", id))
		}
	}
	return errors.Join(errs...)
}
