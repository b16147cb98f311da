// Package kubeletapi serves the kubelet API of leafsync's leaves, so that
// `kubectl logs`, `exec`, `attach` and `port-forward` reach pods the host
// placed on a leaf. The host's API server calls a node's kubelet for
// those; for a leaf, leafsync answers, and proxies each request to the
// same pod's subresource in the member's API server:
//
//	kubectl ─▶ host API server ─▶ leafsync :10250 ─▶ member API server ─▶ member kubelet
//	            pods/exec            /exec/ns/pod/c     pods/pod/exec
//
// What a request goes through, in order (Server, handler):
//
//  0. Bounded connections: at most MaxUnauthenticatedConnections open at
//     once before a request on them authenticates (authGate; the rest
//     wait to be accepted); the TLS handshake and each request's headers
//     within HandshakeTimeout, the request within RequestTimeout until it
//     is proxied, a kept-alive connection idle for IdleTimeout at most; a
//     401 closes its connection.
//  1. TLS with a serving certificate from files (reloaded when they
//     change: a cert-manager Certificate's Secret) or self-signed.
//  2. Authentication as a kubelet does it (delegated): a client
//     certificate of the host's client CA, read and watched from
//     kube-system/extension-apiserver-authentication, or a bearer token
//     (TokenReview). Anonymous requests are refused (401).
//  3. The host pod is read; its node must be a leaf (label
//     leafsync.io/cluster) — otherwise 404, to a user allowed nodes/proxy
//     on every node, and 403 to others (one address serves every leaf:
//     they must not learn which pods exist).
//  4. Authorisation by SubjectAccessReview, as a kubelet does it:
//     nodes/proxy on that leaf, verb get (logs) or create (streams, which
//     a WebSocket opens with a GET). Decisions are cached as the
//     kubelet's are (allowed 5m, denied 30s). Refused: 403.
//  5. The pod must be synced (leafsync.io/member-uid on the host pod, a
//     member pod whose leafsync.io/host-uid label is the host pod's UID),
//     and a UID in the path must be the host pod's — otherwise 404.
//  6. Fail fast: when the member is NotReady (the hysteresis decision) or
//     its circuit breaker is open, 502 with the reason, without dialing.
//  7. Proxy: containerLogs through the member's breaker-wrapped transport
//     (its failures count for the breaker); exec, attach and portForward
//     as a raw upgraded connection (SPDY, or WebSocket if that is what
//     arrives) dialed with connectTimeout and the member's credentials
//     (k8s.io/apimachinery/pkg/util/proxy.UpgradeAwareHandler), through
//     the proxy the member's transport uses (viaProxy). The read and
//     write deadlines are lifted first: a stream is the user's. The
//     kubelet's query (input/output/error/tty = 1, port) becomes the API's
//     (stdin/stdout/stderr/tty = true, ports); see memberRequest.
//
// The member pod has the host pod's namespace and name (pod sync's rule),
// so only the host's credentials are swapped for the member's.
//
// Advertiser writes the address on every leaf (status.addresses
// InternalIP and status.daemonEndpoints.kubeletEndpoint.port, server-side
// apply as field manager leafsync-kubeletapi). Both it and the server run
// only on the leader, and the address is the leader's own pod IP: the
// non-leaders have no member clients to proxy with, and a Service would
// send requests to any ready replica. A new leader rewrites every leaf as
// soon as it leads (its informer replays them).
package kubeletapi
