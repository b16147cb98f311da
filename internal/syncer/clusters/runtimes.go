package clusters

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/syncer/member"
	"github.com/leafsync/leafsync/internal/syncer/registration"
)

// runtimes starts, reconnects and stops member runtimes. A reconnect is
// make before break: the new runtime connects while the active one keeps
// serving, and replaces it once its caches synced (or after SwapTimeout).
// runtimes owns the reconnects in progress and the goroutines that stop
// runtimes; the Registry holds the active runtime everyone else uses.
type runtimes struct {
	settings        RuntimeSettings
	reg             *Registry
	onObserve       func(cluster string, d hysteresis.Decision)
	onBreakerChange func(cluster string, from, to member.BreakerState)
	// enqueue asks for the Secret's status to be written again.
	enqueue func(types.NamespacedName)
	// verify checks a runtime's member once before it starts (identity.go).
	verify func(ctx context.Context, spec *registration.Spec, rt *member.Runtime) verdict
	// releaseClaim drops this host's claim in a deregistered member.
	releaseClaim func(ctx context.Context, cluster string, rt *member.Runtime)
	clock        clock.Clock
	log          logr.Logger
	// take (nil: not sharded) makes this replica the member's writer
	// (Ownership.Take); changed wakes a take that waits for it
	// (Ownership.Changed); restore hands the member's saved state to the
	// Registry once taken.
	take    func(ctx context.Context, cluster string) (bool, error)
	changed func(cluster string) <-chan struct{}
	restore func(ctx context.Context, cluster string)
	// takeBackFrom (Ownership.TakeBack) takes back a member kept warm
	// through a lapse of the shard Lease (takeBack); resume (may be nil)
	// follows it.
	takeBackFrom func(ctx context.Context, cluster string) (bool, error)
	resume       func(ctx context.Context, cluster string)

	mu       sync.Mutex
	swaps    map[string]*swap              // reconnects in progress, by cluster
	pending  map[string]*swap              // sharded: runtimes waiting to take their member, by cluster
	backs    map[string]context.CancelFunc // sharded: takes back under way, by cluster (takeBack)
	gates    map[*member.Runtime]context.CancelFunc
	shutdown bool
	bg       sync.WaitGroup
}

// swap is a reconnect in progress.
type swap struct {
	rt     *member.Runtime
	spec   *registration.Spec
	cancel func()
}

// apply starts, reconnects or updates the member for a valid spec.
func (r *runtimes) apply(spec *registration.Spec) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.shutdown {
		return nil
	}
	m, registered := r.reg.Member(spec.Cluster)
	switch {
	case !registered && r.take != nil:
		return r.takeOverLocked(spec)

	case !registered:
		rt, err := r.newRuntime(spec)
		if err != nil {
			return err
		}
		r.reg.add(spec, rt)
		r.startGatedLocked(spec, rt)
		r.log.Info("member registered", "cluster", spec.Cluster, "server", spec.Server, "leaf", spec.LeafName)

	case m.Spec.ConnectionHash != spec.ConnectionHash:
		if sw := r.swaps[spec.Cluster]; sw != nil && sw.spec.ConnectionHash == spec.ConnectionHash {
			return nil // already reconnecting to exactly this
		}
		r.cancelSwapLocked(spec.Cluster)
		rt, err := r.newRuntime(spec)
		if err != nil {
			return err
		}
		gate, cancel := context.WithCancel(context.Background())
		r.swaps[spec.Cluster] = &swap{rt: rt, spec: spec, cancel: cancel}
		r.reg.reconnecting(spec)
		r.log.Info("member kubeconfig changed: reconnecting", "cluster", spec.Cluster, "server", spec.Server)
		r.bg.Add(1)
		go func() {
			defer r.bg.Done()
			defer cancel()
			// The new runtime starts only once its member passed the
			// identity check; until then the active one keeps serving.
			if !r.admit(gate, spec, rt) {
				return // superseded or shutting down; whoever cancelled stops rt
			}
			rt.Start(context.Background())
			ctx, cancelSync := context.WithTimeout(gate, r.settings.SwapTimeout)
			defer cancelSync()
			synced := rt.WaitForCacheSync(ctx)
			if !synced && errors.Is(gate.Err(), context.Canceled) {
				return // superseded or shutting down; whoever cancelled stops rt
			}
			r.promote(spec.Cluster, rt, synced)
		}()

	default:
		// The Secret may have gone back to the kubeconfig in use.
		r.cancelSwapLocked(spec.Cluster)
		r.reg.update(spec)
	}
	return nil
}

// startGatedLocked starts rt once its member passed the connect gate
// (identity.go); r.mu must be held. It returns the gate's cancel.
func (r *runtimes) startGatedLocked(spec *registration.Spec, rt *member.Runtime) context.CancelFunc {
	ctx, cancel := context.WithCancel(context.Background())
	r.gates[rt] = cancel
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		if r.admit(ctx, spec, rt) {
			rt.Start(context.Background())
		}
		r.mu.Lock()
		delete(r.gates, rt)
		r.mu.Unlock()
	}()
	return cancel
}

// cancelSwapLocked abandons a reconnect in progress, if any.
func (r *runtimes) cancelSwapLocked(cluster string) {
	if r.abandonLocked(r.swaps, cluster) {
		r.reg.reconnectAbandoned(cluster)
	}
}

// abandonLocked cancels the cluster's runtime in m (a reconnect or a
// take under way), if any, and stops it; r.mu must be held.
func (r *runtimes) abandonLocked(m map[string]*swap, cluster string) bool {
	sw := m[cluster]
	if sw == nil {
		return false
	}
	delete(m, cluster)
	sw.cancel()
	r.stopAsync(sw.rt)
	return true
}

// promote makes a reconnected runtime the active one and stops the old.
func (r *runtimes) promote(cluster string, rt *member.Runtime, synced bool) {
	r.mu.Lock()
	sw := r.swaps[cluster]
	if sw == nil || sw.rt != rt || r.shutdown {
		r.mu.Unlock()
		return
	}
	delete(r.swaps, cluster)
	conn := connection{phasePending, reasonReconnecting, fmt.Sprintf("reconnected to %s; waiting for the first probe", sw.spec.Server)}
	if !synced {
		conn.message = fmt.Sprintf("switched to the new kubeconfig for %s although its caches did not sync within %s", sw.spec.Server, r.settings.SwapTimeout)
	}
	old, key := r.reg.replace(sw.spec, rt, conn)
	if old != nil {
		r.stopAsync(old)
	}
	r.mu.Unlock()
	r.log.Info("member reconnected", "cluster", cluster, "server", sw.spec.Server, "synced", synced)
	r.enqueue(key)
}

// stop deregisters a cluster and stops its runtimes. With forget, its
// hysteresis state goes too (registered or not). It returns what cleanup hooks need (zero if
// the cluster was not registered).
func (r *runtimes) stop(cluster string, forget bool) Deregistration {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cancelPendingLocked(cluster)
	r.cancelTakeBackLocked(cluster)
	d, active, ok := r.reg.remove(cluster)
	if forget {
		r.reg.forget(cluster)
	}
	if !ok {
		return Deregistration{}
	}
	r.cancelSwapLocked(cluster)
	if active != nil {
		if forget && r.releaseClaim != nil && r.gates[active] == nil {
			// Deregistered: the member may be registered by another host.
			// Best effort, bounded: an unreachable member keeps its claim
			// (docs/architecture.md says how to remove it).
			r.bg.Add(1)
			go func() {
				defer r.bg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				r.releaseClaim(ctx, cluster, active)
				active.Stop()
			}()
		} else {
			r.stopAsync(active)
		}
	}
	r.log.Info("member runtime stopped", "cluster", cluster, "deregistered", forget)
	return d
}

// stopAll stops every member runtime and waits for them; apply starts
// nothing afterwards.
func (r *runtimes) stopAll() {
	r.mu.Lock()
	r.shutdown = true
	var rts []*member.Runtime
	for _, sw := range r.swaps {
		sw.cancel()
		rts = append(rts, sw.rt)
	}
	for _, p := range r.pending {
		p.cancel()
		rts = append(rts, p.rt)
	}
	for _, cancel := range r.gates {
		cancel()
	}
	for _, cancel := range r.backs {
		cancel()
	}
	for _, m := range r.reg.Members() {
		if m.Runtime != nil {
			rts = append(rts, m.Runtime)
		}
	}
	r.mu.Unlock()
	for _, rt := range rts {
		rt.Stop()
	}
	r.bg.Wait()
}

// stopAsync stops rt (and its identity check, if under way) in the
// background; r.mu must be held.
func (r *runtimes) stopAsync(rt *member.Runtime) {
	if cancel := r.gates[rt]; cancel != nil {
		cancel()
	}
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		rt.Stop()
	}()
}

// newRuntime builds (does not start) a member runtime for spec.
func (r *runtimes) newRuntime(spec *registration.Spec) (*member.Runtime, error) {
	cluster := spec.Cluster
	rs := r.settings
	var rt *member.Runtime
	rt, err := member.New(member.Options{
		Cluster:         cluster,
		RESTConfig:      spec.RESTConfig,
		UserAgent:       rs.UserAgent,
		Timeout:         rs.Timeout,
		QPS:             rs.QPS,
		Burst:           rs.Burst,
		ProbeTimeout:    rs.ProbeTimeout,
		Breaker:         rs.Breaker,
		ProbeInterval:   r.probeInterval(cluster),
		Observe:         func(obs hysteresis.Observation) time.Duration { return r.observe(cluster, rt, obs) },
		OnBreakerChange: r.onBreakerChange,
		Logger:          r.log,
		Clock:           r.clock,
	})
	return rt, err
}

// probeInterval is the cluster's probe interval before its first
// decision; every decision carries the next one.
func (r *runtimes) probeInterval(cluster string) time.Duration {
	if d, ok := r.reg.readiness(cluster); ok && d.Config.ProbeInterval.Duration > 0 {
		return d.Config.ProbeInterval.Duration
	}
	return hysteresis.DefaultConfig().ProbeInterval.Duration
}
