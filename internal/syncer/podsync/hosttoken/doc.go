// Package hosttoken gives a pod on a leaf the identity of its host
// ServiceAccount, as a kubelet gives a pod on a node its own: for every
// serviceAccountToken source of the host pod's projected volumes, a token
// of the pod's ServiceAccount requested from the host (TokenRequest, bound
// to the host pod by name and UID, with the projection's audience and
// expirationSeconds), kept in one member Secret per pod (SecretName) with
// the host's CA and the host API server's address the member reaches. The
// member pod reads them there (podsync/translate: the token sources, the
// CA, KUBERNETES_SERVICE_HOST/PORT).
//
//	host pod created on the leaf            every resync (Refresh)
//	  Ensure: TokenRequest per source         due (RefreshAt)?   -> request again, apply
//	          create <pod>-host-token         missing, pod runs? -> request, create
//	  member pod created                      host pod gone?     -> delete
//	  Own: the member pod owns the Secret     (the member's GC also deletes it with its pod)
//
// Why the defaults:
//   - Refresh at 80% of the shortest lifetime the host granted, at most a
//     day after issue: the kubelet's token manager does the same, so a
//     client that rereads its token file (client-go does) never holds an
//     expired one while the member is reachable.
//   - expirationSeconds 3600 when a projection has none: the API's
//     default for the field.
//   - A pod whose token the host refuses, or whose Secret name the member
//     already uses for its own object, is not created and looks again
//     every 30 s (a Refusal, with an Event on the host pod): a kubelet's pod
//     waits the same way for a token volume it cannot mount.
//   - No host API address (Secrets.Server ""): no Secret, no token; the
//     member pod's Secret sources are optional, so it still runs.
//
// The Secret is the exposure: whoever may read Secrets in the member
// namespace can act as the pod's host ServiceAccount until the token
// expires or the host pod goes (docs/pod-sync.md, The identity a pod runs
// as).
package hosttoken
