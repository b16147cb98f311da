package clusters

import (
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/types"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/syncer/member"
	"github.com/leafsync/leafsync/internal/syncer/registration"
)

// The Registry's writers, used only inside the package: runtimes (which
// runtime is active, and each probe outcome: observe) and the Controller
// (statuses and refusals). The engine's other writers are in
// registry_engine.go. Each change and the Event it publishes happen
// under one lock, so subscribers see changes in order.

// add registers a new cluster with rt as its active runtime.
func (r *Registry) add(spec *registration.Spec, rt *member.Runtime) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := &entry{cluster: spec.Cluster, secret: spec.Secret, spec: spec, active: rt, generation: 1,
		conn: connection{phasePending, reasonConnecting, fmt.Sprintf("connecting to %s", spec.Server)}}
	// The starting point: a restored state, or a fresh one.
	e.readiness, _ = r.engine.Current(spec.Cluster)
	r.entries[spec.Cluster] = e
	r.publishLocked(Event{Type: MemberAdded, Cluster: spec.Cluster, Member: e.member()})
}

// update takes a spec that keeps the active connection (same
// ConnectionHash).
func (r *Registry) update(spec *registration.Spec) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entries[spec.Cluster]
	if e == nil {
		return
	}
	prev := e.spec
	e.secret, e.spec = spec.Secret, spec
	if prev.LeafName != spec.LeafName || !reflect.DeepEqual(prev.Annotations, spec.Annotations) {
		r.publishLocked(Event{Type: MemberUpdated, Cluster: spec.Cluster, Member: e.member(), Previous: prev})
	}
}

// reconnecting records that a new runtime for spec is connecting while
// the active one keeps serving.
func (r *Registry) reconnecting(spec *registration.Spec) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.entries[spec.Cluster]; e != nil {
		e.secret, e.reconnectingTo = spec.Secret, spec.Server
	}
}

// reconnectAbandoned records that no new runtime is connecting any more.
func (r *Registry) reconnectAbandoned(cluster string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.entries[cluster]; e != nil {
		e.reconnectingTo = ""
		if e.refusal != nil && e.refusal.rt != e.active {
			e.refusal = nil
		}
	}
}

// setHostIdentity records the host's identity.
func (r *Registry) setHostIdentity(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.host = id
}

// identityRefused records that rt reaches a member leafsync refuses. It
// reports whether the Secret's status changed (rt is still the cluster's
// active runtime or reconnect, and the reason or message is new).
func (r *Registry) identityRefused(cluster string, rt *member.Runtime, re *registration.Error) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entries[cluster]
	if e == nil {
		return false
	}
	if f := e.refusal; f != nil && f.rt == rt && *f.err == *re {
		return false
	}
	e.refusal = &refusal{rt: rt, err: re}
	return true
}

// identityConfirmed clears a refusal of rt: its member is the one recorded
// and this host's to register.
func (r *Registry) identityConfirmed(cluster string, rt *member.Runtime) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.entries[cluster]; e != nil && e.refusal != nil && e.refusal.rt == rt {
		e.refusal = nil
		return true
	}
	return false
}

// replace makes rt, connected for spec, the cluster's active runtime. It
// returns the runtime replaced and the Secret that owns the cluster.
func (r *Registry) replace(spec *registration.Spec, rt *member.Runtime, conn connection) (*member.Runtime, types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entries[spec.Cluster]
	if e == nil {
		return nil, types.NamespacedName{}
	}
	old, prev := e.active, e.spec
	e.active, e.spec, e.reconnectingTo = rt, spec, ""
	if e.refusal != nil && e.refusal.rt != rt {
		e.refusal = nil
	}
	e.generation++
	e.conn = conn
	r.publishLocked(Event{Type: MemberReplaced, Cluster: spec.Cluster, Member: e.member(), Previous: prev})
	return old, e.secret
}

// remove deregisters a cluster. It returns what cleanup hooks need and the
// active runtime (for the caller to stop); ok is false if the cluster was
// not registered.
func (r *Registry) remove(cluster string) (d Deregistration, active *member.Runtime, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entries[cluster]
	if e == nil {
		return Deregistration{}, nil, false
	}
	delete(r.entries, cluster)
	r.publishLocked(Event{Type: MemberRemoved, Cluster: cluster, Member: e.member()})
	return Deregistration{Cluster: cluster, LeafName: e.spec.LeafName, Secret: e.secret, Annotations: e.spec.Annotations}, e.active, true
}

// observe feeds a probe outcome of rt to the engine and publishes the
// decision (a Decided event), if rt is the cluster's active runtime:
// outcomes of a runtime that is not (or no longer) active are dropped, so a
// reconnect never doubles observations. Engine and registry change under
// one lock, so Decided events keep their order with MemberReplaced and
// MemberRemoved. It returns the member with its new decision, the owning
// Secret and whether the connection's phase or reason changed; ok is false
// if the outcome was dropped, err says why the engine refused it (the
// connection is recorded all the same).
func (r *Registry) observe(cluster string, rt *member.Runtime, obs hysteresis.Observation) (m Member, secret types.NamespacedName, changed, ok bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entries[cluster]
	if e == nil || e.active != rt {
		return Member{}, types.NamespacedName{}, false, false, nil
	}
	d, err := r.engine.Step(cluster, obs)
	if err == nil {
		e.readiness = d
		r.publishLocked(Event{Type: Decided, Cluster: cluster, Member: e.member()})
	}
	conn := connectionFor(obs, e.spec.Server, e.secret)
	changed = conn.phase != e.conn.phase || conn.reason != e.conn.reason
	e.conn = conn
	return e.member(), e.secret, changed, true, err
}

// clusterOf returns the cluster whose registration a Secret owns, if any.
func (r *Registry) clusterOf(key types.NamespacedName) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.entries {
		if e.secret == key {
			return e.cluster, true
		}
	}
	return "", false
}

// hasStatus reports whether the registry has a status for a Secret.
func (r *Registry) hasStatus(key types.NamespacedName) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.statuses[key]
	return ok
}

// setStatus records a Secret's status, keeping Since when nothing changed.
func (r *Registry) setStatus(st Status) Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.setStatusLocked(st)
}

func (r *Registry) setStatusLocked(st Status) Status {
	prev, ok := r.statuses[st.Secret]
	if ok && prev.Phase == st.Phase && prev.Reason == st.Reason {
		st.Since = prev.Since
	} else {
		st.Since = r.clock.Now()
	}
	r.statuses[st.Secret] = st
	if !ok || prev.Phase != st.Phase || prev.Reason != st.Reason {
		r.publishLocked(Event{Type: ConnectionChanged, Cluster: st.Cluster, Status: st})
	}
	return st
}

// refuse records that a Secret's content is refused. If the Secret owns
// the cluster, the cluster keeps running on its previous spec; otherwise
// the Secret gets phase (it runs nothing).
func (r *Registry) refuse(cluster string, key types.NamespacedName, phase Phase, re *registration.Error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.entries[cluster]; e != nil && e.secret == key {
		e.invalid = re
		r.setStatusLocked(e.status())
		return
	}
	r.setStatusLocked(Status{Cluster: cluster, Secret: key, Phase: phase, Reason: re.Reason, Message: re.Message})
}

// accepted clears a refusal of the cluster's registration.
func (r *Registry) accepted(cluster string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.entries[cluster]; e != nil {
		e.invalid = nil
	}
}

// currentStatus returns a Secret's status, first brought up to date with
// the cluster's entry if the Secret owns it.
func (r *Registry) currentStatus(cluster string, key types.NamespacedName) (Status, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.entries[cluster]; e != nil && e.secret == key {
		r.setStatusLocked(e.status())
	}
	st, ok := r.statuses[key]
	return st, ok
}

// forgetStatus drops a Secret's status.
func (r *Registry) forgetStatus(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.statuses, key)
}
