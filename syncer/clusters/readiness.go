package clusters

import (
	"fmt"
	"strings"

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

// connection is what the last probe of the active runtime says.
type connection struct {
	phase   Phase
	reason  string
	message string
}

// connectionFor turns a probe outcome into a phase, reason and message.
func connectionFor(obs hysteresis.Observation, server string, secret types.NamespacedName) connection {
	if obs.OK {
		return connection{PhaseConnected, ReasonConnected, fmt.Sprintf("connected to %s", server)}
	}
	what := fmt.Sprintf("%s (server %s)", obs.Detail, server)
	switch obs.Class {
	case hysteresis.ClassAuth:
		return connection{PhaseUnauthorized, ReasonUnauthorized, what + fmt.Sprintf(
			". Put a valid token or client certificate in data.kubeconfig of Secret %s "+
				"(`leafsync register --create-service-account` issues a long-lived ServiceAccount token) and check that it is bound to leafsync's ClusterRole in the member", secret)}
	case hysteresis.ClassConfig:
		if isTLSDetail(obs.Detail) {
			return connection{PhaseMisconfigured, ReasonTLSError, what + fmt.Sprintf(
				". Put the member's CA certificate in certificate-authority-data (and tls-server-name if the server's certificate names another host) in data.kubeconfig of Secret %s", secret)}
		}
		return connection{PhaseMisconfigured, ReasonMisconfigured, what + fmt.Sprintf(
			". Check the server URL in data.kubeconfig of Secret %s: it must be the member's Kubernetes API server", secret)}
	case hysteresis.ClassServer:
		return connection{PhaseUnreachable, ReasonServerError, what +
			". Check the member's control plane (API server, etcd), or what answers at the server URL (a load balancer or proxy, the URL's path); leafsync keeps probing, and the leaf stays Ready unless the outage outlasts notReadyAfter"}
	default:
		return connection{PhaseUnreachable, ReasonUnreachable, what +
			". Check that the server URL resolves and is reachable from leafsync's pod (DNS, firewall, NetworkPolicy, proxy); leafsync keeps probing, and the leaf stays Ready unless the outage outlasts notReadyAfter"}
	}
}

func isTLSDetail(d string) bool {
	for _, s := range []string{"x509", "certificate", "tls:", "HTTP response to HTTPS"} {
		if strings.Contains(d, s) {
			return true
		}
	}
	return false
}
