package clusters

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/syncer/member"
)

// observe is a member runtime's probe outcome (rt is the runtime that
// probed): the Registry feeds it to the engine and publishes the decision;
// the persister gets the same decision; the Secret's status follows the
// connection. It returns the probe interval the decision asks for (zero:
// unchanged).
func (r *runtimes) observe(cluster string, rt *member.Runtime, obs hysteresis.Observation) time.Duration {
	m, key, changed, ok, err := r.reg.observe(cluster, rt, obs)
	if !ok {
		return 0
	}
	if err != nil {
		r.log.V(1).Info("observation not accepted by the hysteresis engine", "cluster", cluster, "error", err.Error())
	} else if r.onObserve != nil {
		r.onObserve(cluster, m.Readiness)
	}
	if changed {
		// The status annotations follow the connection, rate-limited.
		r.enqueue(key)
	}
	return m.Readiness.Config.ProbeInterval.Duration
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
		return connection{phaseConnected, reasonConnected, fmt.Sprintf("connected to %s", server)}
	}
	what := fmt.Sprintf("%s (server %s)", obs.Detail, server)
	switch obs.Class {
	case hysteresis.ClassAuth:
		return connection{phaseUnauthorized, reasonUnauthorized, what + fmt.Sprintf(
			". Put a valid token or client certificate in data.kubeconfig of Secret %s "+
				"(`leafsync register --create-service-account` issues a long-lived ServiceAccount token) and check that it is bound to leafsync's ClusterRole in the member", secret)}
	case hysteresis.ClassConfig:
		if isTLSDetail(obs.Detail) {
			return connection{phaseMisconfigured, reasonTLSError, what + fmt.Sprintf(
				". Put the member's CA certificate in certificate-authority-data (and tls-server-name if the server's certificate names another host) in data.kubeconfig of Secret %s", secret)}
		}
		return connection{phaseMisconfigured, reasonMisconfigured, what + fmt.Sprintf(
			". Check the server URL in data.kubeconfig of Secret %s: it must be the member's Kubernetes API server", secret)}
	case hysteresis.ClassServer:
		return connection{phaseUnreachable, reasonServerError, what +
			". Check the member's control plane (API server, etcd), or what answers at the server URL (a load balancer or proxy, the URL's path); leafsync keeps probing, and the leaf stays Ready unless the outage outlasts notReadyAfter"}
	default:
		return connection{phaseUnreachable, reasonUnreachable, what +
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
