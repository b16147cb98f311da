// Package clusters is the controller of registration Secrets: it validates
// each Secret (package registration), starts, reconnects and stops the
// member's runtime (package member), feeds probe outcomes to the hysteresis
// engine, reports problems as Events and status annotations on the Secret,
// and removes what leafsync created when a member is deregistered (finalizer
// leafsync.io/cleanup).
//
// Nothing in Reconcile talks to a member: connecting and probing happen in
// the member runtimes' goroutines, so one bad member never slows another.
package clusters

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/syncer/member"
	"github.com/leafsync/leafsync/syncer/registration"
)

// RuntimeSettings configure every member runtime.
type RuntimeSettings struct {
	// UserAgent names leafsync (and its version) to members.
	UserAgent string
	// Timeout bounds each member request that is not a watch.
	Timeout time.Duration
	// QPS and Burst limit requests to each member.
	QPS   float32
	Burst int
	// ProbeTimeout bounds one GET /readyz.
	ProbeTimeout time.Duration
	// Breaker configures each member's circuit breaker.
	Breaker member.BreakerSettings
	// SwapTimeout bounds how long a reconnect keeps the previous runtime
	// serving while the new one's caches sync (make before break).
	SwapTimeout time.Duration
}

// Options configure the controller.
type Options struct {
	// Namespace is the only namespace whose Secrets are read.
	Namespace string
	// Policy loosens the kubeconfig checks (exec, file references).
	Policy registration.Policy
	// Engine is the hysteresis engine (a *hysteresis.Fleet).
	Engine Engine
	// Runtime configures member runtimes.
	Runtime RuntimeSettings
	// Recorder records Events on registration Secrets.
	Recorder events.EventRecorder
	// Logger (the manager's logger when zero).
	Logger logr.Logger
	// StatusInterval is the least time between two connection-status
	// writes to the same Secret, so a flapping link does not turn into a
	// stream of writes and Events (default 5s).
	StatusInterval time.Duration
	// Now is the clock of status times (time.Now when nil).
	Now func() time.Time
	// OnBreakerChange (may be nil) is called on every state change of a
	// member's circuit breaker, e.g. to count it in metrics. It must not
	// block. (Changes are logged and counted in Status.Breaker anyway.)
	OnBreakerChange func(cluster string, from, to member.BreakerState)
	// Reader reads Nodes and pods for the leaf-name checks, straight from
	// the API server (nil: the controller's client). A GET per
	// registration change: the manager need not cache every Node.
	Reader client.Reader
	// Restore (may be nil) is called for a member that has no runtime in
	// this process yet, after it is added to the engine and before its
	// runtime starts probing: saved engine state restored here is in place
	// before the first observation. It may block briefly (reading the
	// state store); it bounds its own wait.
	Restore func(ctx context.Context, cluster string)
	// OnObserve (may be nil) is called after every observation the engine
	// accepted, with the resulting status and transitions (e.g. to persist
	// the engine's state). It must not block.
	OnObserve func(cluster string, st hysteresis.Status, transitions []hysteresis.Transition)
}

// Controller reconciles registration Secrets.
type Controller struct {
	client client.Client
	opts   Options
	log    logr.Logger
	reg    *Registry

	queueMu sync.Mutex
	queue   workqueue.TypedRateLimitingInterface[reconcile.Request]

	// pendingCleanup holds deregistrations whose Secret vanished before
	// the hooks succeeded (retried on requeue).
	pendingCleanup map[types.NamespacedName]Deregistration
	// lastWrite is when each Secret's status annotations were last written.
	lastWrite map[types.NamespacedName]time.Time
	// unknownReported is the unknown-annotation list last reported per Secret.
	unknownReported map[types.NamespacedName]string

	bg       sync.WaitGroup
	shutdown bool
}

// New returns a Controller. c must read Secrets from the manager's cache.
func New(c client.Client, o Options) (*Controller, error) {
	if o.Namespace == "" || o.Engine == nil || o.Recorder == nil {
		return nil, errors.New("clusters: Namespace, Engine and Recorder are required")
	}
	if o.StatusInterval <= 0 {
		o.StatusInterval = 5 * time.Second
	}
	if o.Runtime.SwapTimeout <= 0 {
		o.Runtime.SwapTimeout = 30 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger.GetSink() == nil {
		o.Logger = ctrl.Log
	}
	return &Controller{
		client:          c,
		opts:            o,
		log:             o.Logger.WithName("clusters"),
		reg:             newRegistry(o.Engine),
		pendingCleanup:  map[types.NamespacedName]Deregistration{},
		lastWrite:       map[types.NamespacedName]time.Time{},
		unknownReported: map[types.NamespacedName]string{},
	}, nil
}

// Registry returns the registry of members and statuses.
func (c *Controller) Registry() *Registry { return c.reg }

// SetupWithManager registers the controller, and a runnable that stops
// every member runtime when the manager stops.
func (c *Controller) SetupWithManager(mgr ctrl.Manager) error {
	pred := predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return c.relevant(e.Object) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return c.relevant(e.Object) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return c.relevant(e.ObjectOld) || c.relevant(e.ObjectNew) },
		GenericFunc: func(e event.GenericEvent) bool { return c.relevant(e.Object) },
	}
	if err := ctrl.NewControllerManagedBy(mgr).
		Named("clusters").
		// One worker: Reconcile never waits on a member (connecting and
		// probing run in the member runtimes), so it is fast; and the
		// bookkeeping of ownership between duplicate Secrets stays simple.
		WithOptions(controller.Options{MaxConcurrentReconciles: 1}).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(c.sameCluster), builder.WithPredicates(pred)).
		WatchesRawSource(source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			c.queueMu.Lock()
			c.queue = q
			c.queueMu.Unlock()
			return nil
		})).
		Complete(c); err != nil {
		return err
	}
	return mgr.Add(c)
}

// Start implements manager.Runnable: it waits for the manager to stop, then
// stops every member runtime.
func (c *Controller) Start(ctx context.Context) error {
	<-ctx.Done()
	c.Shutdown()
	return nil
}

// NeedLeaderElection: member runtimes run only on the leader.
func (c *Controller) NeedLeaderElection() bool { return true }

// Shutdown stops every member runtime and waits for them. Reconcile starts
// nothing afterwards.
func (c *Controller) Shutdown() {
	c.reg.mu.Lock()
	c.shutdown = true
	var rts []*member.Runtime
	for _, e := range c.reg.entries {
		if e.pendingCancel != nil {
			e.pendingCancel()
		}
		if e.pending != nil {
			rts = append(rts, e.pending)
		}
		if e.active != nil {
			rts = append(rts, e.active)
		}
	}
	c.reg.mu.Unlock()
	for _, rt := range rts {
		rt.Stop()
	}
	c.bg.Wait()
}

// relevant: Secrets in our namespace that register (or registered) a member.
func (c *Controller) relevant(o client.Object) bool {
	if o == nil || o.GetNamespace() != c.opts.Namespace {
		return false
	}
	if _, ok := o.GetLabels()[registration.LabelCluster]; ok {
		return true
	}
	if controllerutil.ContainsFinalizer(o, registration.Finalizer) {
		return true
	}
	c.reg.mu.Lock()
	defer c.reg.mu.Unlock()
	_, ok := c.reg.statuses[client.ObjectKeyFromObject(o)]
	return ok
}

// sameCluster maps a Secret to itself and every Secret claiming the same
// cluster name, so a duplicate takes over when the winner goes.
func (c *Controller) sameCluster(ctx context.Context, o client.Object) []reconcile.Request {
	reqs := []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
	name, ok := o.GetLabels()[registration.LabelCluster]
	if !ok {
		return reqs
	}
	var list corev1.SecretList
	if err := c.client.List(ctx, &list, client.InNamespace(c.opts.Namespace), client.MatchingLabels{registration.LabelCluster: name}); err != nil {
		c.log.Error(err, "listing Secrets of a cluster", "cluster", name)
		return reqs
	}
	for i := range list.Items {
		if list.Items[i].Name != o.GetName() {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}

func (c *Controller) enqueue(key types.NamespacedName) {
	c.queueMu.Lock()
	q := c.queue
	c.queueMu.Unlock()
	if q != nil {
		q.Add(reconcile.Request{NamespacedName: key})
	}
}

// Reconcile brings one registration Secret's member in line with the Secret.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	key := req.NamespacedName
	log := c.log.WithValues("secret", key.String())
	if key.Namespace != c.opts.Namespace {
		return reconcile.Result{}, nil
	}
	var s corev1.Secret
	if err := c.client.Get(ctx, key, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, c.secretGone(ctx, key)
		}
		return reconcile.Result{}, err
	}
	cluster, labelled := s.Labels[registration.LabelCluster]
	if !s.DeletionTimestamp.IsZero() || !labelled {
		return c.deregister(ctx, &s)
	}

	// A Secret relabelled to another cluster deregisters the old one.
	if e := c.entryBySecret(key); e != nil && e.cluster != cluster {
		if err := c.teardown(ctx, &s, e.cluster, true); err != nil {
			_, _ = c.writeStatus(ctx, &s)
			return reconcile.Result{}, err
		}
	}

	winner, err := c.winner(ctx, cluster)
	if err != nil {
		return reconcile.Result{}, err
	}
	if winner != nil && winner.Name != s.Name {
		return c.duplicate(ctx, &s, winner)
	}

	spec, perr := registration.Parse(&s, c.opts.Policy)
	if perr == nil {
		var phase Phase
		if phase, perr = c.checkLeafName(ctx, &s, spec); perr != nil {
			res, err := c.refusedAs(ctx, &s, cluster, phase, perr.(*registration.Error))
			// Looked at again: the conflict may be resolved elsewhere.
			res.RequeueAfter = leafNameRetry
			return res, err
		}
	}
	if perr == nil {
		if err := c.opts.Engine.Add(spec.Cluster, spec.Overrides); err != nil {
			perr = &registration.Error{Reason: registration.ReasonInvalidAnnotation, Message: fmt.Sprintf(
				"the threshold annotations give an inconsistent configuration: %v; fix them (see docs/annotations.md)", err)}
		}
	}
	if perr != nil {
		var re *registration.Error
		if !errors.As(perr, &re) {
			re = &registration.Error{Reason: registration.ReasonInvalidKubeconfig, Message: perr.Error()}
		}
		return c.refused(ctx, &s, cluster, re)
	}
	c.reportUnknownAnnotations(&s)

	if err := c.ensureFinalizer(ctx, &s); err != nil {
		return reconcile.Result{}, err
	}
	if c.opts.Restore != nil {
		if _, running := c.reg.Member(spec.Cluster); !running {
			c.opts.Restore(ctx, spec.Cluster)
		}
	}
	if err := c.apply(spec); err != nil {
		log.Error(err, "building member runtime")
		if _, ok := c.reg.Member(spec.Cluster); !ok {
			c.opts.Engine.Remove(spec.Cluster) // nothing will observe it
		}
		re := &registration.Error{Reason: ReasonClientSetupFailed, Message: fmt.Sprintf(
			"cannot build a client from the kubeconfig: %v; fix data.kubeconfig", err)}
		return c.refused(ctx, &s, cluster, re)
	}
	return c.writeStatus(ctx, &s)
}

// entryBySecret returns the entry a Secret owns, if any.
func (c *Controller) entryBySecret(key types.NamespacedName) *entry {
	c.reg.mu.Lock()
	defer c.reg.mu.Unlock()
	for _, e := range c.reg.entries {
		if e.secret == key {
			return e
		}
	}
	return nil
}

// winner returns the Secret that owns a cluster name: the oldest, then the
// first by name.
func (c *Controller) winner(ctx context.Context, cluster string) (*corev1.Secret, error) {
	var list corev1.SecretList
	if err := c.client.List(ctx, &list, client.InNamespace(c.opts.Namespace), client.MatchingLabels{registration.LabelCluster: cluster}); err != nil {
		return nil, err
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	sort.Slice(list.Items, func(i, j int) bool {
		a, b := list.Items[i], list.Items[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
	return &list.Items[0], nil
}

// leafNameRetry: how often a registration refused for its leaf name is
// looked at again.
const leafNameRetry = 30 * time.Second

// checkLeafName refuses a leaf name leafsync may not use. leafsync writes,
// renews and deletes only Nodes (and their Leases and pods) it owns:
//   - a leaf name another cluster's registration uses goes to the older
//     Secret, so the first owner is never disturbed;
//   - a Node of that name that is not this cluster's leaf (no label
//     leafsync.io/cluster=<cluster>: a real worker, another tool's node) is
//     never taken over;
//   - a running member's leaf is not renamed while pods are bound to it
//     (they would be stranded on a leaf nobody serves).
func (c *Controller) checkLeafName(ctx context.Context, s *corev1.Secret, spec *registration.Spec) (Phase, error) {
	reader := c.opts.Reader
	if reader == nil {
		reader = c.client
	}
	leaf := spec.LeafName
	var list corev1.SecretList
	if err := c.client.List(ctx, &list, client.InNamespace(c.opts.Namespace), client.HasLabels{registration.LabelCluster}); err != nil {
		return PhaseRefused, &registration.Error{Reason: ReasonDuplicateLeafName, Message: fmt.Sprintf("cannot list registrations: %v", err)}
	}
	for i := range list.Items {
		o := &list.Items[i]
		other := o.Labels[registration.LabelCluster]
		if other == spec.Cluster || !o.DeletionTimestamp.IsZero() || leafNameOf(o, other) != leaf || !olderThan(o, s) {
			continue
		}
		return PhaseDuplicate, &registration.Error{Reason: ReasonDuplicateLeafName, Message: fmt.Sprintf(
			"Secret %s, created earlier, registers cluster %q with the same leaf name %s, so this Secret is ignored; give one of them another %s",
			client.ObjectKeyFromObject(o), other, leaf, registration.AnnotationLeafName)}
	}
	var node corev1.Node
	switch err := reader.Get(ctx, types.NamespacedName{Name: leaf}, &node); {
	case err == nil && node.Labels[registration.LabelCluster] != spec.Cluster:
		owner := "it is not a leafsync leaf"
		if o := node.Labels[registration.LabelCluster]; o != "" {
			owner = fmt.Sprintf("it is the leaf of cluster %q", o)
		}
		return PhaseRefused, &registration.Error{Reason: ReasonLeafNameTaken, Message: fmt.Sprintf(
			"Node %s exists and %s: leafsync never writes, renews or deletes a Node it does not own; choose another %s",
			leaf, owner, registration.AnnotationLeafName)}
	case err != nil && !apierrors.IsNotFound(err):
		return PhaseRefused, &registration.Error{Reason: ReasonLeafNameTaken, Message: fmt.Sprintf("cannot check that Node %s is free: %v", leaf, err)}
	}
	if m, ok := c.reg.Member(spec.Cluster); ok && m.Spec.LeafName != leaf {
		var pods corev1.PodList
		if err := reader.List(ctx, &pods, client.MatchingFields{"spec.nodeName": m.Spec.LeafName}); err != nil {
			return PhaseRefused, &registration.Error{Reason: ReasonLeafRenameWithPods, Message: fmt.Sprintf("cannot list the pods of leaf %s: %v", m.Spec.LeafName, err)}
		}
		if n := len(pods.Items); n > 0 {
			return PhaseRefused, &registration.Error{Reason: ReasonLeafRenameWithPods, Message: fmt.Sprintf(
				"the leaf is not renamed from %s to %s while %d pod(s) are bound to it (they would be stranded); the member keeps leaf %s until they are gone",
				m.Spec.LeafName, leaf, n, m.Spec.LeafName)}
		}
	}
	return "", nil
}

// olderThan: a was created before b (ties broken by name), the rule by
// which the first registration keeps what two claim.
func olderThan(a, b *corev1.Secret) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

// apply starts, reconnects or updates the member for a valid spec.
func (c *Controller) apply(spec *registration.Spec) error {
	c.reg.mu.Lock()
	defer c.reg.mu.Unlock()
	if c.shutdown {
		return nil
	}
	e := c.reg.entries[spec.Cluster]
	if e != nil {
		e.invalid = nil
	}
	switch {
	case e == nil:
		rt, err := c.newRuntime(spec)
		if err != nil {
			return err
		}
		e = &entry{cluster: spec.Cluster, secret: spec.Secret, spec: spec, active: rt, generation: 1,
			conn: connection{PhasePending, ReasonConnecting, fmt.Sprintf("connecting to %s", spec.Server)}}
		c.reg.entries[spec.Cluster] = e
		rt.Start(context.Background())
		c.log.Info("member registered", "cluster", spec.Cluster, "server", spec.Server, "leaf", spec.LeafName)
		c.reg.publishLocked(Event{Type: MemberAdded, Cluster: spec.Cluster, Member: e.member()})

	case e.spec.ConnectionHash != spec.ConnectionHash:
		if e.pending != nil && e.pendingSpec.ConnectionHash == spec.ConnectionHash {
			return nil // already reconnecting to exactly this
		}
		c.cancelPendingLocked(e)
		rt, err := c.newRuntime(spec)
		if err != nil {
			return err
		}
		e.secret = spec.Secret
		e.pending, e.pendingSpec = rt, spec
		ctx, cancel := context.WithTimeout(context.Background(), c.opts.Runtime.SwapTimeout)
		e.pendingCancel = cancel
		rt.Start(context.Background())
		c.log.Info("member kubeconfig changed: reconnecting", "cluster", spec.Cluster, "server", spec.Server)
		c.bg.Add(1)
		go func() {
			defer c.bg.Done()
			defer cancel()
			synced := rt.WaitForCacheSync(ctx)
			if !synced && errors.Is(ctx.Err(), context.Canceled) {
				return // superseded or shutting down; whoever cancelled stops rt
			}
			c.promote(spec.Cluster, rt, synced)
		}()

	default:
		if e.pending != nil {
			// The Secret went back to the kubeconfig in use.
			c.cancelPendingLocked(e)
		}
		prev := e.spec
		e.secret = spec.Secret
		e.spec = spec
		if prev.LeafName != spec.LeafName || !reflect.DeepEqual(prev.Annotations, spec.Annotations) {
			c.reg.publishLocked(Event{Type: MemberUpdated, Cluster: spec.Cluster, Member: e.member(), Previous: prev})
		}
	}
	return nil
}

// cancelPendingLocked abandons a reconnect in progress.
func (c *Controller) cancelPendingLocked(e *entry) {
	if e.pendingCancel != nil {
		e.pendingCancel()
	}
	if e.pending != nil {
		c.stopAsync(e.pending)
	}
	e.pending, e.pendingSpec, e.pendingCancel = nil, nil, nil
}

// promote makes a reconnected runtime the active one and stops the old.
func (c *Controller) promote(cluster string, rt *member.Runtime, synced bool) {
	c.reg.mu.Lock()
	e := c.reg.entries[cluster]
	if e == nil || e.pending != rt || c.shutdown {
		c.reg.mu.Unlock()
		return
	}
	old, prev := e.active, e.spec
	e.active, e.spec = rt, e.pendingSpec
	e.pending, e.pendingSpec, e.pendingCancel = nil, nil, nil
	e.generation++
	e.conn = connection{PhasePending, ReasonReconnecting, fmt.Sprintf("reconnected to %s; waiting for the first probe", e.spec.Server)}
	if !synced {
		e.conn.message = fmt.Sprintf("switched to the new kubeconfig for %s although its caches did not sync within %s", e.spec.Server, c.opts.Runtime.SwapTimeout)
	}
	c.reg.publishLocked(Event{Type: MemberReplaced, Cluster: cluster, Member: e.member(), Previous: prev})
	key, server := e.secret, e.spec.Server
	c.reg.mu.Unlock()
	c.log.Info("member reconnected", "cluster", cluster, "server", server, "synced", synced)
	if old != nil {
		c.stopAsync(old)
	}
	c.enqueue(key)
}

func (c *Controller) stopAsync(rt *member.Runtime) {
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		rt.Stop()
	}()
}

// newRuntime builds (does not start) a member runtime for spec.
func (c *Controller) newRuntime(spec *registration.Spec) (*member.Runtime, error) {
	cluster := spec.Cluster
	rs := c.opts.Runtime
	var rt *member.Runtime
	rt, err := member.New(member.Options{
		Cluster:      cluster,
		RESTConfig:   spec.RESTConfig,
		UserAgent:    rs.UserAgent,
		Timeout:      rs.Timeout,
		QPS:          rs.QPS,
		Burst:        rs.Burst,
		ProbeTimeout: rs.ProbeTimeout,
		Breaker:      rs.Breaker,
		ProbeInterval: func() time.Duration {
			if cfg, ok := c.opts.Engine.Config(cluster); ok && cfg.ProbeInterval.Duration > 0 {
				return cfg.ProbeInterval.Duration
			}
			return hysteresis.DefaultConfig().ProbeInterval.Duration
		},
		Observe:         func(cluster string, obs hysteresis.Observation) { c.observe(cluster, rt, obs) },
		OnBreakerChange: c.opts.OnBreakerChange,
		Logger:          c.log,
	})
	return rt, err
}

// observe feeds a probe outcome of the active runtime to the engine and
// updates the connection status. Outcomes of a runtime that is not (or no
// longer) active are dropped, so a reconnect never doubles observations.
func (c *Controller) observe(cluster string, rt *member.Runtime, obs hysteresis.Observation) {
	c.reg.mu.Lock()
	e := c.reg.entries[cluster]
	if e == nil || e.active != rt {
		c.reg.mu.Unlock()
		return
	}
	hs, transitions, err := c.opts.Engine.Observe(cluster, obs)
	if err != nil {
		c.log.V(1).Info("observation not accepted by the hysteresis engine", "cluster", cluster, "error", err.Error())
	}
	for _, t := range transitions {
		c.reg.publishLocked(Event{Type: StateChanged, Cluster: cluster, Transition: t, Hysteresis: hs})
	}
	conn := connectionFor(obs, e.spec.Server, e.secret)
	changed := conn.phase != e.conn.phase || conn.reason != e.conn.reason
	e.conn = conn
	key := e.secret
	c.reg.mu.Unlock()
	if err == nil && c.opts.OnObserve != nil {
		c.opts.OnObserve(cluster, hs, transitions)
	}
	if changed {
		c.enqueue(key)
	}
}

// statusFor composes the current status of the Secret that owns entry e.
func (c *Controller) statusFor(e *entry) Status {
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
	if e.pending != nil {
		st.Reason = ReasonReconnecting
		st.Message = fmt.Sprintf("the kubeconfig changed; connecting to %s while the previous connection keeps serving", e.pendingSpec.Server)
	}
	if e.invalid != nil {
		st.Reason = e.invalid.Reason
		st.Message = "the Secret's current content is refused, so leafsync keeps using the previous kubeconfig: " + e.invalid.Message
	}
	return st
}

// setStatus records a Secret's status, keeping Since when nothing changed.
func (c *Controller) setStatus(st Status) Status {
	c.reg.mu.Lock()
	defer c.reg.mu.Unlock()
	return c.setStatusLocked(st)
}

func (c *Controller) setStatusLocked(st Status) Status {
	prev, ok := c.reg.statuses[st.Secret]
	if ok && prev.Phase == st.Phase && prev.Reason == st.Reason {
		st.Since = prev.Since
	} else {
		st.Since = c.opts.Now()
	}
	c.reg.statuses[st.Secret] = st
	if !ok || prev.Phase != st.Phase || prev.Reason != st.Reason {
		c.reg.publishLocked(Event{Type: ConnectionChanged, Cluster: st.Cluster, Status: st})
	}
	return st
}

// refused handles a Secret that cannot be used as it is.
func (c *Controller) refused(ctx context.Context, s *corev1.Secret, cluster string, re *registration.Error) (reconcile.Result, error) {
	return c.refusedAs(ctx, s, cluster, PhaseRefused, re)
}

// refusedAs is refused with the phase of a Secret that runs nothing.
func (c *Controller) refusedAs(ctx context.Context, s *corev1.Secret, cluster string, phase Phase, re *registration.Error) (reconcile.Result, error) {
	key := client.ObjectKeyFromObject(s)
	c.reg.mu.Lock()
	e := c.reg.entries[cluster]
	if e != nil && e.secret == key {
		e.invalid = re
		c.setStatusLocked(c.statusFor(e))
	} else {
		c.setStatusLocked(Status{Cluster: cluster, Secret: key, Phase: phase, Reason: re.Reason, Message: re.Message})
	}
	c.reg.mu.Unlock()
	return c.writeStatus(ctx, s)
}

// duplicate handles a Secret that loses to an older one.
func (c *Controller) duplicate(ctx context.Context, s *corev1.Secret, winner *corev1.Secret) (reconcile.Result, error) {
	key := client.ObjectKeyFromObject(s)
	cluster := s.Labels[registration.LabelCluster]
	if e := c.entryBySecret(key); e != nil {
		// An older Secret now claims the cluster: hand over without
		// cleanup (the cluster stays registered).
		if err := c.teardown(ctx, s, e.cluster, false); err != nil {
			return reconcile.Result{}, err
		}
		c.enqueue(client.ObjectKeyFromObject(winner))
	}
	if err := c.removeFinalizer(ctx, s); err != nil {
		return reconcile.Result{}, err
	}
	c.setStatus(Status{Cluster: cluster, Secret: key, Phase: PhaseDuplicate, Reason: ReasonDuplicateCluster, Message: fmt.Sprintf(
		"Secret %s, created earlier, already registers cluster %q, so this Secret is ignored; delete one of the two Secrets, or give this one another %s label value",
		client.ObjectKeyFromObject(winner), cluster, registration.LabelCluster)})
	return c.writeStatus(ctx, s)
}

// deregister handles a Secret being deleted or no longer labelled.
func (c *Controller) deregister(ctx context.Context, s *corev1.Secret) (reconcile.Result, error) {
	key := client.ObjectKeyFromObject(s)
	cluster := s.Labels[registration.LabelCluster]
	if e := c.entryBySecret(key); e != nil {
		cluster = e.cluster
	}
	if controllerutil.ContainsFinalizer(s, registration.Finalizer) {
		if err := c.teardown(ctx, s, cluster, true); err != nil {
			_, _ = c.writeStatus(ctx, s)
			return reconcile.Result{}, err
		}
		if s.DeletionTimestamp.IsZero() {
			// Label removed: the Secret stays; so should nothing of ours.
			if err := c.clearStatusAnnotations(ctx, s); err != nil {
				return reconcile.Result{}, err
			}
		}
		if err := c.removeFinalizer(ctx, s); err != nil {
			return reconcile.Result{}, err
		}
		c.event(s, corev1.EventTypeNormal, ReasonDeregistered, "Deregister", fmt.Sprintf(
			"cluster %q is deregistered: its connection is closed and what leafsync created for it is removed", cluster))
	} else if e := c.entryBySecret(key); e != nil {
		// No finalizer (removed by hand): still stop and clean up.
		if err := c.teardown(ctx, s, e.cluster, true); err != nil {
			return reconcile.Result{}, err
		}
	}
	c.forget(key)
	return reconcile.Result{}, nil
}

// secretGone handles a Secret that no longer exists.
func (c *Controller) secretGone(ctx context.Context, key types.NamespacedName) error {
	if e := c.entryBySecret(key); e != nil {
		d := c.stopEntry(e.cluster, true)
		c.pendingCleanup[key] = d
	}
	if d, ok := c.pendingCleanup[key]; ok {
		if err := c.runHooks(ctx, d); err != nil {
			return err
		}
		delete(c.pendingCleanup, key)
	}
	c.forget(key)
	return nil
}

func (c *Controller) forget(key types.NamespacedName) {
	c.reg.mu.Lock()
	delete(c.reg.statuses, key)
	c.reg.mu.Unlock()
	delete(c.lastWrite, key)
	delete(c.unknownReported, key)
}

// teardown stops a cluster's runtime and, if cleanup, forgets its
// hysteresis state and runs the deregistration hooks.
func (c *Controller) teardown(ctx context.Context, s *corev1.Secret, cluster string, cleanup bool) error {
	d := c.stopEntry(cluster, cleanup)
	if d.Cluster == "" {
		d = Deregistration{Cluster: cluster, Secret: client.ObjectKeyFromObject(s), LeafName: leafNameOf(s, cluster), Annotations: leafsyncAnnotations(s)}
		if cleanup && cluster != "" {
			c.opts.Engine.Remove(cluster)
		}
	}
	if !cleanup || cluster == "" {
		return nil
	}
	c.setStatus(Status{Cluster: cluster, Secret: d.Secret, Phase: PhaseTerminating, Reason: ReasonDeregistering, Message: "removing what leafsync created for the cluster"})
	if err := c.runHooks(ctx, d); err != nil {
		// The caller writes this status (annotations and a Warning Event).
		c.setStatus(Status{Cluster: cluster, Secret: d.Secret, Phase: PhaseTerminating, Reason: ReasonCleanupFailed, Message: err.Error()})
		return err
	}
	return nil
}

// stopEntry removes a cluster's entry and stops its runtimes. With forget,
// its hysteresis state goes too. It returns what hooks need (zero if there
// was no entry).
func (c *Controller) stopEntry(cluster string, forget bool) Deregistration {
	c.reg.mu.Lock()
	defer c.reg.mu.Unlock()
	e := c.reg.entries[cluster]
	if e == nil {
		return Deregistration{}
	}
	delete(c.reg.entries, cluster)
	c.cancelPendingLocked(e)
	if e.active != nil {
		c.stopAsync(e.active)
	}
	if forget {
		c.opts.Engine.Remove(cluster)
	}
	c.reg.publishLocked(Event{Type: MemberRemoved, Cluster: cluster, Member: e.member()})
	c.log.Info("member runtime stopped", "cluster", cluster, "deregistered", forget)
	return Deregistration{Cluster: cluster, LeafName: e.spec.LeafName, Secret: e.secret, Annotations: e.spec.Annotations}
}

func (c *Controller) runHooks(ctx context.Context, d Deregistration) error {
	var errs []error
	for _, h := range c.reg.hooksCopy() {
		if err := h.fn(ctx, d); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", h.name, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("cleanup of cluster %q failed, will retry (the Secret keeps its %s finalizer until it succeeds): %w",
			d.Cluster, registration.Finalizer, errors.Join(errs...))
	}
	return nil
}

func leafNameOf(s *corev1.Secret, cluster string) string {
	if v := s.Annotations[registration.AnnotationLeafName]; v != "" {
		return v
	}
	return registration.LeafNamePrefix + cluster
}

func leafsyncAnnotations(s *corev1.Secret) map[string]string {
	out := map[string]string{}
	for k, v := range s.Annotations {
		if strings.HasPrefix(k, registration.AnnotationPrefix) {
			out[k] = v
		}
	}
	return out
}

func (c *Controller) ensureFinalizer(ctx context.Context, s *corev1.Secret) error {
	if controllerutil.ContainsFinalizer(s, registration.Finalizer) {
		return nil
	}
	orig := s.DeepCopy()
	controllerutil.AddFinalizer(s, registration.Finalizer)
	return c.client.Patch(ctx, s, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
}

func (c *Controller) removeFinalizer(ctx context.Context, s *corev1.Secret) error {
	if !controllerutil.ContainsFinalizer(s, registration.Finalizer) {
		return nil
	}
	orig := s.DeepCopy()
	controllerutil.RemoveFinalizer(s, registration.Finalizer)
	err := c.client.Patch(ctx, s, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	return client.IgnoreNotFound(err)
}

var statusAnnotations = []string{
	registration.AnnotationStatus, registration.AnnotationStatusReason,
	registration.AnnotationStatusMessage, registration.AnnotationStatusTime,
}

func (c *Controller) clearStatusAnnotations(ctx context.Context, s *corev1.Secret) error {
	orig := s.DeepCopy()
	changed := false
	for _, k := range statusAnnotations {
		if _, ok := s.Annotations[k]; ok {
			delete(s.Annotations, k)
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return c.client.Patch(ctx, s, client.MergeFrom(orig))
}

// writeStatus brings the Secret's status annotations in line with the
// registry, emitting an Event when the phase or reason changes. Writes
// driven by the connection are spaced by StatusInterval.
func (c *Controller) writeStatus(ctx context.Context, s *corev1.Secret) (reconcile.Result, error) {
	key := client.ObjectKeyFromObject(s)
	c.reg.mu.Lock()
	if e := c.reg.entries[s.Labels[registration.LabelCluster]]; e != nil && e.secret == key {
		c.setStatusLocked(c.statusFor(e))
	}
	st, ok := c.reg.statuses[key]
	c.reg.mu.Unlock()
	if !ok {
		return reconcile.Result{}, nil
	}
	msg := truncate(st.Message, 1000)
	if st.Reason == ReasonConnecting {
		switch Phase(s.Annotations[registration.AnnotationStatus]) {
		case PhaseConnected, PhaseUnreachable, PhaseUnauthorized, PhaseMisconfigured:
			// leafsync restarted: keep the last known connection state
			// until the first probe says otherwise (no write, no Event).
			return reconcile.Result{}, nil
		}
	}
	if s.Annotations[registration.AnnotationStatus] == string(st.Phase) &&
		s.Annotations[registration.AnnotationStatusReason] == st.Reason &&
		// Connection messages carry changing error details; only a
		// refusal's message is worth a write of its own.
		(st.Phase != PhaseRefused || s.Annotations[registration.AnnotationStatusMessage] == msg) {
		return reconcile.Result{}, nil
	}
	if last, ok := c.lastWrite[key]; ok {
		if wait := c.opts.StatusInterval - c.opts.Now().Sub(last); wait > 0 {
			return reconcile.Result{RequeueAfter: wait}, nil
		}
	}
	orig := s.DeepCopy()
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[registration.AnnotationStatus] = string(st.Phase)
	s.Annotations[registration.AnnotationStatusReason] = st.Reason
	s.Annotations[registration.AnnotationStatusMessage] = msg
	s.Annotations[registration.AnnotationStatusTime] = st.Since.UTC().Format(time.RFC3339)
	if err := c.client.Patch(ctx, s, client.MergeFrom(orig)); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	c.lastWrite[key] = c.opts.Now()
	eventType := corev1.EventTypeNormal
	if st.Warning() {
		eventType = corev1.EventTypeWarning
	}
	c.event(s, eventType, st.Reason, actionFor(st.Phase), msg)
	return reconcile.Result{}, nil
}

func actionFor(p Phase) string {
	switch p {
	case PhaseRefused, PhaseDuplicate:
		return "Register"
	case PhaseTerminating:
		return "Deregister"
	default:
		return "Connect"
	}
}

func (c *Controller) event(s *corev1.Secret, eventType, reason, action, msg string) {
	c.opts.Recorder.Eventf(s, nil, eventType, reason, action, "%s", truncate(msg, 1000))
}

// reportUnknownAnnotations warns once per change about leafsync.io/
// annotations nothing reads (most likely misspelt).
func (c *Controller) reportUnknownAnnotations(s *corev1.Secret) {
	key := client.ObjectKeyFromObject(s)
	unknown := registration.UnknownAnnotations(s.Annotations)
	joined := strings.Join(unknown, ",")
	if c.unknownReported[key] == joined {
		return
	}
	c.unknownReported[key] = joined
	if len(unknown) == 0 {
		return
	}
	c.event(s, corev1.EventTypeWarning, ReasonUnknownAnnotation, "Register", fmt.Sprintf(
		"annotations %s are not read by leafsync (misspelt?); see docs/annotations.md for the supported ones", joined))
}
