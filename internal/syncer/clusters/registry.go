package clusters

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/syncer/member"
	"github.com/leafsync/leafsync/internal/syncer/registration"
)

// Engine is the hysteresis engine; *hysteresis.Fleet implements it. The
// Registry is its only owner: every change (a member's thresholds, a
// restored snapshot, a probe outcome, a removal) goes through a Registry
// method, under the Registry's lock. State is keyed by cluster name, so it
// survives a reconnect (only the member runtime is replaced).
type Engine interface {
	Add(name string, o hysteresis.Overrides) error
	Remove(name string)
	RestoreCluster(snapshot []byte) error
	Current(name string) (hysteresis.Decision, bool)
	Step(name string, o hysteresis.Observation) (hysteresis.Decision, error)
}

var _ Engine = (*hysteresis.Fleet)(nil)

// Member is a registered member cluster as other components see it.
type Member struct {
	// Spec is the registration in use (cluster, leaf name, annotations).
	Spec *registration.Spec
	// Runtime holds the member's clients and informers. It is replaced on
	// reconnect (see MemberReplaced): do not keep it past that event.
	Runtime *member.Runtime
	// Generation increases with every reconnect.
	Generation int
	// Readiness is the engine's latest decision for the member: its Status
	// and Config (the probe interval, the thresholds); in a Decided event
	// also the transitions and the Snapshot to persist.
	Readiness hysteresis.Decision
}

// Cluster returns the member's name.
func (m Member) Cluster() string { return m.Spec.Cluster }

// EventType is the kind of a registry Event.
type EventType string

// Registry event types.
const (
	// MemberAdded: a member is registered and its runtime started (its
	// caches may still be syncing). Also replayed to new subscribers for
	// every member already registered.
	MemberAdded EventType = "MemberAdded"
	// MemberReplaced: the member reconnected with a new runtime (rotated
	// credentials, new endpoint); the previous runtime is being stopped.
	// Re-register informer handlers on Member.Runtime. The hysteresis
	// state carried over.
	MemberReplaced EventType = "MemberReplaced"
	// MemberUpdated: options changed without a reconnect (leaf name,
	// thresholds, other annotations). Previous holds the former spec.
	MemberUpdated EventType = "MemberUpdated"
	// MemberRemoved: the member's runtime is stopping (deregistration, or
	// hand-over to another Secret). Cleanup of what leafsync created goes
	// through Registry.OnDeregister hooks, not through this event.
	MemberRemoved EventType = "MemberRemoved"
	// Decided: the engine decided on a probe of the member
	// (Member.Readiness: the new status, the transitions if any, the
	// snapshot to persist, the probe interval). One per probe outcome of
	// the active runtime.
	Decided EventType = "Decided"
	// ConnectionChanged: the registration's phase or reason changed (Status).
	ConnectionChanged EventType = "ConnectionChanged"
)

// Event is a change of a registered member.
type Event struct {
	Type    EventType
	Cluster string
	// Member is set for MemberAdded/Replaced/Updated/Removed and Decided.
	Member Member
	// Previous is the former spec for MemberReplaced and MemberUpdated.
	Previous *registration.Spec
	// Status is set for ConnectionChanged.
	Status Status
}

// Deregistration tells cleanup hooks what to remove.
type Deregistration struct {
	Cluster  string
	LeafName string
	Secret   types.NamespacedName
	// Annotations are the Secret's leafsync.io/ annotations.
	Annotations map[string]string
}

// CleanupFunc removes what a component created for a member. It must be
// idempotent; an error keeps the finalizer and the hook is retried.
type CleanupFunc func(ctx context.Context, d Deregistration) error

// entry is what the registry knows of one registered cluster.
type entry struct {
	cluster    string
	secret     types.NamespacedName
	spec       *registration.Spec
	active     *member.Runtime
	generation int
	// conn is what the last probe of the active runtime says.
	conn connection
	// readiness is the engine's latest decision.
	readiness hysteresis.Decision
	// invalid is set while the Secret's latest content is refused; the
	// previous, valid spec keeps running.
	invalid *registration.Error
	// reconnectingTo is the server of a new runtime being connected
	// (make before break), empty when none is.
	reconnectingTo string
	// refusal is set while a runtime of the cluster (the active one, or a
	// reconnect's) reaches a member leafsync refuses: another cluster than
	// the one recorded, or one another host claims (identity.go).
	refusal *refusal
}

// refusal is a runtime whose member is refused, and why.
type refusal struct {
	rt  *member.Runtime
	err *registration.Error
}

func (e *entry) member() Member {
	return Member{Spec: e.spec, Runtime: e.active, Generation: e.generation, Readiness: e.readiness}
}

// status composes the current status of the Secret that owns e.
func (e *entry) status() Status {
	st := Status{
		Cluster:    e.cluster,
		Secret:     e.secret,
		Phase:      e.conn.phase,
		Reason:     e.conn.reason,
		Message:    e.conn.message,
		Server:     e.spec.Server,
		LeafName:   e.spec.LeafName,
		Generation: e.generation,
	}
	if e.reconnectingTo != "" {
		st.Reason = reasonReconnecting
		st.Message = fmt.Sprintf("the kubeconfig changed; connecting to %s while the previous connection keeps serving", e.reconnectingTo)
	}
	if f := e.refusal; f != nil {
		st.Reason, st.Message = f.err.Reason, f.err.Message
		if f.rt == e.active {
			st.Phase = phaseRefused
		} else {
			st.Message = "the new kubeconfig is refused, so leafsync keeps using the previous one: " + f.err.Message
		}
	}
	if e.invalid != nil {
		st.Reason = e.invalid.Reason
		st.Message = "the Secret's current content is refused, so leafsync keeps using the previous kubeconfig: " + e.invalid.Message
	}
	return st
}

type hook struct {
	name string
	fn   CleanupFunc
}

// Registry holds the registered members and the status of every
// registration Secret. Other components use it to find a member's clients
// and informers, read statuses, subscribe to changes, and hook into
// deregistration. It is safe for concurrent use.
//
// Inside the package, the registration lifecycle (Controller, runtimes)
// and readiness write to it only through the unexported methods in
// registry_write.go; its lock is held by no one else.
type Registry struct {
	engine Engine
	clock  clock.PassiveClock
	// own is the sharding's ownership (nil: not sharded); set once by New.
	own Ownership

	mu sync.Mutex
	// host is the host's identity, once read (identity.go).
	host     string
	entries  map[string]*entry               // by cluster name
	statuses map[types.NamespacedName]Status // by Secret
	subs     map[*Subscription]struct{}
	hooks    []hook
}

func newRegistry(engine Engine, clk clock.PassiveClock) *Registry {
	return &Registry{
		engine:   engine,
		clock:    clk,
		entries:  map[string]*entry{},
		statuses: map[types.NamespacedName]Status{},
		subs:     map[*Subscription]struct{}{},
	}
}

// Member returns a registered member by cluster name.
func (r *Registry) Member(cluster string) (Member, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entries[cluster]
	if e == nil {
		return Member{}, false
	}
	return e.member(), true
}

// Members returns every registered member, sorted by cluster name.
func (r *Registry) Members() []Member {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Member, 0, len(r.entries))
	for _, e := range r.entries {
		out = append(out, e.member())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Spec.Cluster < out[j].Spec.Cluster })
	return out
}

// HostIdentity returns the host's identity (the UID of its kube-system
// namespace), or "" until leafsync has read it. It is known before any
// member's runtime starts: member-side ownership labels carry it.
func (r *Registry) HostIdentity() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.host
}

// Hysteresis returns the engine's latest decision for a registered
// cluster (the Status of Member.Readiness).
func (r *Registry) Hysteresis(cluster string) (hysteresis.Status, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entries[cluster]
	if e == nil {
		return hysteresis.Status{}, false
	}
	return e.readiness.Status, true
}

// Status returns the status of the Secret that registers cluster (the
// winning one if several claim it).
func (r *Registry) Status(cluster string) (Status, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.entries[cluster]; e != nil {
		return r.liveLocked(r.statuses[e.secret], e), true
	}
	for _, st := range r.statuses {
		if st.Cluster == cluster && st.Phase != PhaseDuplicate {
			return st, true
		}
	}
	return Status{}, false
}

// Statuses returns the status of every registration Secret (refused and
// duplicate ones included), sorted by cluster then Secret name.
func (r *Registry) Statuses() []Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Status, 0, len(r.statuses))
	for key, st := range r.statuses {
		if e := r.entries[st.Cluster]; e != nil && e.secret == key {
			st = r.liveLocked(st, e)
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Cluster != out[j].Cluster {
			return out[i].Cluster < out[j].Cluster
		}
		return out[i].Secret.Name < out[j].Secret.Name
	})
	return out
}

// liveLocked adds the figures that change all the time.
func (r *Registry) liveLocked(st Status, e *entry) Status {
	if e.active != nil {
		st.LastProbe = e.active.Prober().Last()
		st.Breaker = e.active.Breaker().Stats()
		st.Synced = e.active.HasSynced()
	}
	st.Hysteresis = e.readiness.Status
	return st
}

// OnDeregister adds a cleanup hook run (in the order added) when a member
// is deregistered, before the Secret's finalizer is removed. Add hooks
// before the manager starts.
func (r *Registry) OnDeregister(name string, fn CleanupFunc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hooks = append(r.hooks, hook{name, fn})
}

func (r *Registry) hooksCopy() []hook {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hook(nil), r.hooks...)
}
