package clusters

import (
	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/syncer/member"
)

// readiness carries a probe outcome from a member's prober to the
// hysteresis engine, and the engine's decision on to the registry
// (StateChanged events, the connection status) and to whoever persists it.
// It holds no state of its own: the engine owns the decision, the Registry
// the connection status.
type readiness struct {
	engine Engine
	reg    *Registry
	// onObserve (may be nil) is Options.OnObserve.
	onObserve func(cluster string, st hysteresis.Status, transitions []hysteresis.Transition)
	// enqueue asks for the Secret's status to be written again.
	enqueue func(types.NamespacedName)
	log     logr.Logger
}

// observe is a member runtime's Observe callback (rt is the runtime that
// probed).
func (p *readiness) observe(cluster string, rt *member.Runtime, obs hysteresis.Observation) {
	var (
		hs          hysteresis.Status
		transitions []hysteresis.Transition
		err         error
	)
	key, changed, ok := p.reg.recordProbe(cluster, rt, func(secret types.NamespacedName, server string) (connection, []Event) {
		hs, transitions, err = p.engine.Observe(cluster, obs)
		events := make([]Event, 0, len(transitions))
		for _, t := range transitions {
			events = append(events, Event{Type: StateChanged, Cluster: cluster, Transition: t, Hysteresis: hs})
		}
		return connectionFor(obs, server, secret), events
	})
	if !ok {
		return
	}
	if err != nil {
		p.log.V(1).Info("observation not accepted by the hysteresis engine", "cluster", cluster, "error", err.Error())
	}
	if err == nil && p.onObserve != nil {
		p.onObserve(cluster, hs, transitions)
	}
	if changed {
		// The status annotations follow the connection, rate-limited.
		p.enqueue(key)
	}
}
