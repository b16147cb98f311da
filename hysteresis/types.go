package hysteresis

import (
	"fmt"
	"time"
)

// Class is the class of a failed probe.
type Class uint8

// Failure classes. The zero Class is not a valid failure class (it is what a
// successful Observation carries).
const (
	// ClassNetwork: timeout, connection refused or reset, DNS.
	ClassNetwork Class = iota + 1
	// ClassServer: the member's API server answered 5xx or 429, or what
	// answered at its address is not an API server (a proxy's HTML 404).
	ClassServer
	// ClassAuth: the API server's 401/403 — leafsync's credentials, not the
	// member, are wrong.
	ClassAuth
	// ClassConfig: leafsync cannot even build a client (bad kubeconfig…).
	ClassConfig
)

var classNames = [...]string{"", "network", "server", "auth", "config"}

// String returns "network", "server", "auth" or "config" ("" for the zero
// Class, "Class(n)" for invalid values).
func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return fmt.Sprintf("Class(%d)", uint8(c))
}

func (c Class) valid() bool { return c >= ClassNetwork && c <= ClassConfig }

// counts reports whether failures of this class count towards NotReady
// (network and server do; auth and config are leafsync's own problem).
func (c Class) counts() bool { return c == ClassNetwork || c == ClassServer }

// ParseClass parses "network", "server", "auth" or "config".
func ParseClass(s string) (Class, error) {
	for i := ClassNetwork; i <= ClassConfig; i++ {
		if classNames[i] == s {
			return i, nil
		}
	}
	return 0, fmt.Errorf("unknown failure class %q (want network, server, auth or config)", s)
}

// MarshalText implements encoding.TextMarshaler.
func (c Class) MarshalText() ([]byte, error) {
	if c != 0 && !c.valid() {
		return nil, fmt.Errorf("invalid failure class %d", uint8(c))
	}
	return []byte(c.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler ("" gives the zero Class).
func (c *Class) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*c = 0
		return nil
	}
	v, err := ParseClass(string(b))
	if err != nil {
		return err
	}
	*c = v
	return nil
}

// State is the state of a cluster's leaf. The zero State is Ready: a newly
// added cluster is trusted until probes say otherwise (slow to evict).
type State uint8

// States. See the diagram in the package documentation.
const (
	Ready State = iota
	Suspect
	NotReady
	Recovering
)

// NumStates is the number of States; arrays indexed by State have this size.
const NumStates = 4

var stateNames = [NumStates]string{"Ready", "Suspect", "NotReady", "Recovering"}

// String returns "Ready", "Suspect", "NotReady" or "Recovering".
func (s State) String() string {
	if int(s) < NumStates {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// LeafReady reports whether the leaf Node should be Ready (its Lease
// renewed): true for Ready and Suspect. A Recovering leaf stays NotReady
// until readyAfter of continuous success.
func (s State) LeafReady() bool { return s == Ready || s == Suspect }

// ParseState parses a State name as returned by String.
func ParseState(name string) (State, error) {
	for i, n := range stateNames {
		if n == name {
			return State(i), nil
		}
	}
	return 0, fmt.Errorf("unknown state %q", name)
}

// MarshalText implements encoding.TextMarshaler.
func (s State) MarshalText() ([]byte, error) {
	if int(s) >= NumStates {
		return nil, fmt.Errorf("invalid state %d", uint8(s))
	}
	return []byte(s.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (s *State) UnmarshalText(b []byte) error {
	v, err := ParseState(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// Reasons given in Status.Reason and Transition.Reason. They are stable
// identifiers (CamelCase, like Kubernetes condition reasons); Status.Detail
// carries the human text of the last failed probe.
const (
	// The last probe failed with that class.
	ReasonNetworkFailure = "NetworkFailure"
	ReasonServerFailure  = "ServerFailure"
	ReasonAuthFailure    = "AuthFailure"
	ReasonConfigFailure  = "ConfigFailure"
	// NotReady because availability over the window fell below
	// minAvailability (a link flapping faster than notReadyAfter).
	ReasonLowAvailability = "LowAvailability"
	// The cluster would be NotReady but the mass-disconnect guard holds it.
	ReasonMassDisconnect = "MassDisconnect"
	// Probes succeed again, waiting for readyAfter of continuous success.
	ReasonRecovering = "Recovering"
	// Cordoned by flap damping: the penalty went above suppress and has not
	// yet decayed below reuse.
	ReasonFlapDamped = "FlapDamped"
)

func classReason(c Class) string {
	switch c {
	case ClassNetwork:
		return ReasonNetworkFailure
	case ClassServer:
		return ReasonServerFailure
	case ClassAuth:
		return ReasonAuthFailure
	default:
		return ReasonConfigFailure
	}
}

// Observation is the outcome of one probe of a member cluster.
type Observation struct {
	// Time the probe completed. An observation earlier than the cluster's
	// previous one is re-anchored, not dropped (Status.ClockStep). Times
	// from time.Now carry a monotonic clock reading, which lets the engine
	// see a step of the wall clock between two observations either way.
	Time time.Time
	// OK is true if the probe succeeded.
	OK bool
	// Class of the failure; required when OK is false, ignored otherwise.
	Class Class
	// Detail is free text (e.g. the error) surfaced in Status.Detail.
	Detail string
}

// Status is the decision for one cluster as of its last observation.
type Status struct {
	State State
	// Cordoned: the leaf should carry the NoSchedule taint.
	Cordoned bool
	// Reason is one of the Reason constants, or "" when all is well.
	Reason string
	// Detail is the Detail of the last failed observation, when Reason is
	// about a failure.
	Detail string
	// Since is when State was entered (zero if never changed).
	Since time.Time
	// OutageSince is when the current outage went NotReady; it is kept
	// through Recovering → NotReady relapses and is zero otherwise.
	OutageSince time.Time
	// UnreachableSince is when the member stopped answering in the current
	// outage: the start of the failure streak that went NotReady
	// (notReadyAfter before OutageSince, or less when availability ran
	// low). When the mass-disconnect guard held the cluster, it is the
	// release (OutageSince). Kept through relapses; zero outside an outage.
	UnreachableSince time.Time
	// LastObserved is the time of the last observation (zero if none).
	LastObserved time.Time
	// Penalty is the flap-damping penalty as of LastObserved.
	Penalty float64
	// Damped: cordoned by flap damping.
	Damped bool
	// Held: the mass-disconnect guard is keeping the cluster out of NotReady.
	Held bool
	// HeldFor is the failure evidence gathered while held; at massHoldMax
	// the guard lets go of the cluster (at the fleet's release rate).
	HeldFor time.Duration
	// Released: the cluster is NotReady because the guard let go of it
	// after massHoldMax, during a mass disconnect.
	Released bool
	// ClockStep is how far the wall clock stepped between the previous
	// observation and the last one (negative: back), zero if it did not.
	// Within one process it is the wall clock's difference from the
	// monotonic clock (beyond 1s). Across processes (the previous
	// observation came from a snapshot) only a step back shows: the last
	// observation lay -ClockStep before the previous one, which was
	// written by a clock that ran ahead. Either way the engine moved the
	// cluster's times (Since, OutageSince, UnreachableSince,
	// LastObserved…) by the step, so they read in the new clock.
	ClockStep time.Duration
}

// Transition is one change of a cluster's decision. From == To when only
// Cordoned changed.
type Transition struct {
	Time     time.Time
	Cluster  string
	From, To State
	// Cordoned and Reason are the values after the change.
	Cordoned bool
	Reason   string
}

// Counters are cumulative per-cluster figures for metrics. They are part of
// snapshots, so they survive restarts.
type Counters struct {
	// FlapsSuppressed counts Suspect → Ready transitions: failures that did
	// not last long enough to make the leaf NotReady.
	FlapsSuppressed uint64
	// Transitions[from][to] counts state changes.
	Transitions [NumStates][NumStates]uint64
	// TimeIn[state] is the time spent in each state, measured between
	// observations (a gap is charged to the state the cluster was in).
	TimeIn [NumStates]time.Duration
	// Cordoned is the time spent cordoned, measured the same way.
	Cordoned time.Duration
	// Penalty is the current flap penalty (as of the last observation).
	Penalty float64
	// MaxPenalty is the highest penalty reached.
	MaxPenalty float64
	// ClockSteps counts the clock steps seen (Status.ClockStep), either
	// way.
	ClockSteps uint64
}
