package clusters

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/syncer/member"
)

// Phase is the state of a registration, as written to the Secret's
// leafsync.io/status annotation.
type Phase string

// Phases of a registration.
const (
	// phasePending: accepted; connecting (no probe answered yet).
	phasePending Phase = "Pending"
	// phaseConnected: the last probe of the member succeeded.
	phaseConnected Phase = "Connected"
	// phaseUnreachable: the last probe failed with a network or server
	// error (the member, or the way to it, is down or overloaded).
	phaseUnreachable Phase = "Unreachable"
	// phaseUnauthorized: the member rejects leafsync's credentials.
	phaseUnauthorized Phase = "Unauthorized"
	// phaseMisconfigured: leafsync cannot talk to the member as configured
	// (server certificate not trusted, not TLS, a malformed URL…).
	phaseMisconfigured Phase = "Misconfigured"
	// phaseRefused: the Secret is invalid or unsafe; nothing runs for it.
	phaseRefused Phase = "Refused"
	// PhaseDuplicate: an older Secret registers the same cluster name.
	PhaseDuplicate Phase = "Duplicate"
	// phaseTerminating: deregistration is cleaning up.
	phaseTerminating Phase = "Terminating"
)

// Reasons of Events and of the leafsync.io/status-reason annotation, in
// addition to the registration.Reason* values (refusals).
const (
	reasonConnecting       = "Connecting"
	reasonReconnecting     = "Reconnecting"
	reasonConnected        = "MemberConnected"
	reasonUnreachable      = "MemberUnreachable"
	reasonServerError      = "MemberServerError"
	reasonUnauthorized     = "MemberUnauthorized"
	reasonTLSError         = "MemberTLSError"
	reasonMisconfigured    = "MemberMisconfigured"
	reasonDuplicateCluster = "DuplicateCluster"
	// reasonLeafNameTaken: the leaf name is a Node leafsync does not own.
	reasonLeafNameTaken = "LeafNameTaken"
	// reasonDuplicateLeafName: an older Secret's member uses the leaf name.
	reasonDuplicateLeafName = "DuplicateLeafName"
	// reasonLeafRenameWithPods: the leaf is renamed while pods are on it.
	reasonLeafRenameWithPods = "LeafRenameWithPods"
	// reasonMemberIdentityChanged: the kubeconfig reaches another cluster
	// than the member recorded at first contact.
	reasonMemberIdentityChanged = "MemberIdentityChanged"
	// reasonMemberClaimed: another host registers the member under the
	// same cluster name (its claim in the member says so).
	reasonMemberClaimed     = "MemberClaimed"
	reasonUnknownAnnotation = "UnknownAnnotation"
	reasonClientSetupFailed = "ClientSetupFailed"
	reasonDeregistering     = "Deregistering"
	reasonDeregistered      = "Deregistered"
	reasonCleanupFailed     = "CleanupFailed"
)

// Status is what leafsync reports about one registration Secret.
type Status struct {
	// Cluster is the leafsync.io/cluster label value.
	Cluster string
	// Secret is the registration Secret.
	Secret types.NamespacedName
	// Phase, Reason and Message are also written to the Secret's
	// annotations. Message says what is wrong and what to do.
	Phase   Phase
	Reason  string
	Message string
	// Since is when Phase or Reason last changed.
	Since time.Time
	// Server and LeafName of the registration in use (empty if refused).
	Server   string
	LeafName string
	// Generation counts connections made for this cluster (1 for the
	// first, +1 per reconnect after a credential or endpoint change).
	Generation int
	// LastProbe is the last probe outcome (zero if none).
	LastProbe hysteresis.Observation
	// Breaker is the member's circuit breaker.
	Breaker member.BreakerStats
	// Hysteresis is the engine's decision for the cluster (zero if the
	// cluster is not registered).
	Hysteresis hysteresis.Status
	// Synced: the member's Node and Pod caches have synced.
	Synced bool
}

// Warning reports whether the status is a problem a person should look at.
func (s Status) Warning() bool {
	switch s.Phase {
	case phasePending, phaseConnected:
		return s.Reason != "" && !isOKReason(s.Reason)
	case phaseTerminating:
		return s.Reason == reasonCleanupFailed
	}
	return true
}

func isOKReason(r string) bool {
	switch r {
	case reasonConnecting, reasonReconnecting, reasonConnected, reasonDeregistering:
		return true
	}
	return false
}
