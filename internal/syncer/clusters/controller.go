// Package clusters is the controller of registration Secrets: it validates
// each Secret (package registration), starts, reconnects and stops the
// member's runtime (package member), feeds probe outcomes to the hysteresis
// engine, reports problems as Events and status annotations on the Secret,
// and removes what leafsync created when a member is deregistered (finalizer
// leafsync.io/cleanup).
//
// One owner per piece of state:
//
//	Controller (reconcile.go)  registration lifecycle: a Secret's validation,
//	                           duplicates (claims.go), finalizer, cleanup hooks
//	runtimes (runtimes.go)     member runtimes: start, make-before-break
//	                           reconnect, stop
//	connect gate (identity.go) a runtime starts only for the member pinned
//	                           on the Secret and claimed by this host
//	                           (memberclaim.go)
//	Registry (registry.go)     what other components read: members, statuses,
//	                           events (subscription.go); the hysteresis
//	                           engine's only owner (registry_engine.go:
//	                           thresholds, a restored snapshot, removal)
//	readiness (readiness.go)   probe outcome -> Registry.observe (engine
//	                           step, Decided event) -> persister hook
//	reporter (reporter.go)     registry status -> Secret annotations and Events
//	ownership (ownership.go,   sharded across replicas: which members this
//	takeover.go)               replica runs and writes; a member is taken
//	                           before it is published, and handed over
//	                           without cleanup
//
// Nothing in Reconcile talks to a member: connecting and probing happen in
// the member runtimes' goroutines, so one bad member never slows another.
package clusters

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
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
	"github.com/leafsync/leafsync/internal/syncer/member"
	"github.com/leafsync/leafsync/internal/syncer/registration"
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
	// Engine is the hysteresis engine (a *hysteresis.Fleet). The Registry
	// owns it from here on: nothing else may change it.
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
	// Clock is the clock of status times and of StatusInterval (the real
	// clock when nil).
	Clock clock.PassiveClock
	// OnBreakerChange (may be nil) is called on every state change of a
	// member's circuit breaker, e.g. to count it in metrics. It must not
	// block. (Changes are logged and counted in Status.Breaker anyway.)
	OnBreakerChange func(cluster string, from, to member.BreakerState)
	// Reader reads Nodes and pods for the leaf-name checks, straight from
	// the API server (nil: the controller's client). A GET per
	// registration change: the manager need not cache every Node.
	Reader client.Reader
	// Restore (may be nil) is called for a member that has no runtime in
	// this process yet, after its thresholds are in the engine and before
	// its runtime starts probing: a saved snapshot handed to
	// into.Restore here is in place before the first observation. It may
	// block briefly (reading the state store); it bounds its own wait.
	Restore func(ctx context.Context, cluster string, into *Registry)
	// TakenBack (may be nil; sharded) is called once this replica took
	// back a member it kept warm while its shard Lease lapsed (nothing
	// is restored: its runtime and engine state stayed; it acts on the
	// member from the take on): the state store reads the member's
	// records in the new writer term. It bounds its own wait.
	TakenBack func(ctx context.Context, cluster string)
	// OnObserve (may be nil) is called after every observation the engine
	// accepted, with the decision the Decided event carries (e.g. to
	// persist its Snapshot). It must not block.
	OnObserve func(cluster string, d hysteresis.Decision)
	// Ownership (nil: not sharded) is this replica's share of the members
	// when they are sharded across replicas (ownership.go).
	Ownership Ownership
	// FenceLeaf (sharded; nil: none) writes the leaf of a member this
	// replica has just taken, before the member is published; the take
	// counts once it succeeded (fence.go).
	FenceLeaf func(ctx context.Context, cluster, leaf string) error
}

// Controller reconciles registration Secrets: it owns the registration
// lifecycle, and wires the other owners together.
type Controller struct {
	client   client.Client
	opts     Options
	log      logr.Logger
	reg      *Registry
	runtimes *runtimes
	reporter *reporter

	queueMu sync.Mutex
	queue   workqueue.TypedRateLimitingInterface[reconcile.Request]

	// pendingCleanup holds deregistrations whose Secret vanished before
	// the hooks succeeded (retried on requeue). Only the single worker
	// uses it.
	pendingCleanup map[types.NamespacedName]Deregistration
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
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger.GetSink() == nil {
		o.Logger = ctrl.Log
	}
	log := o.Logger.WithName("clusters")
	reg := newRegistry(o.Engine, o.Clock)
	reg.own = o.Ownership
	ctl := &Controller{
		client:         c,
		opts:           o,
		log:            log,
		reg:            reg,
		pendingCleanup: map[types.NamespacedName]Deregistration{},
	}
	ctl.reporter = newReporter(c, reg, o.Recorder, o.StatusInterval, o.Clock)
	ctl.reporter.may = ctl.writes
	ctl.runtimes = &runtimes{
		settings:        o.Runtime,
		reg:             reg,
		onObserve:       o.OnObserve,
		onBreakerChange: o.OnBreakerChange,
		enqueue:         ctl.enqueue,
		verify:          ctl.verify,
		releaseClaim: func(ctx context.Context, cluster string, rt *member.Runtime) {
			if host := reg.HostIdentity(); host != "" {
				if err := releaseClaim(ctx, rt.Client(), cluster, host); err != nil {
					log.Info("could not remove this host's claim in the deregistered member; delete it there by hand to register the member from another host",
						"cluster", cluster, "claim", claimNamespace+"/"+claimName(cluster), "error", err.Error())
				}
			}
		},
		clock:   probeClock(o.Clock),
		log:     log,
		swaps:   map[string]*swap{},
		gates:   map[*member.Runtime]context.CancelFunc{},
		pending: map[string]*swap{},
		backs:   map[string]context.CancelFunc{},
	}
	if own := o.Ownership; own != nil {
		ctl.runtimes.take, ctl.runtimes.changed = own.Take, own.Changed
		ctl.runtimes.takeBackFrom, ctl.runtimes.resume = own.TakeBack, o.TakenBack
		ctl.runtimes.restore = func(ctx context.Context, cluster string) {
			if o.Restore != nil {
				o.Restore(ctx, cluster, reg)
			}
		}
	}
	if own := o.Ownership; own != nil && o.FenceLeaf != nil {
		ctl.runtimes.take = ctl.runtimes.fencedTake(own.Take, o.FenceLeaf)
	}
	return ctl, nil
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
		WithOptions(c.controllerOptions()).
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

// controllerOptions: one worker, since Reconcile never waits on a member
// (connecting and probing run in the member runtimes), so it is fast, and
// the bookkeeping of ownership between duplicate Secrets stays simple.
// Sharded, every replica reconciles its share, leader or not.
func (c *Controller) controllerOptions() controller.Options {
	return controller.Options{MaxConcurrentReconciles: 1, NeedLeaderElection: ptr.To(c.NeedLeaderElection())}
}

// Start implements manager.Runnable: it waits for the manager to stop, then
// stops every member runtime.
func (c *Controller) Start(ctx context.Context) error {
	<-ctx.Done()
	c.Shutdown()
	return nil
}

// NeedLeaderElection: member runtimes run only on the leader, unless
// members are sharded (every replica runs its share).
func (c *Controller) NeedLeaderElection() bool { return !c.reg.Sharded() }

// Shutdown stops every member runtime and waits for them. Reconcile starts
// nothing afterwards.
func (c *Controller) Shutdown() { c.runtimes.stopAll() }

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
	return c.reg.hasStatus(client.ObjectKeyFromObject(o))
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

// probeClock is the clock that times and stamps probes: Options.Clock when
// it can also wait, so that probe outcomes and status times share one
// clock.
func probeClock(c clock.PassiveClock) clock.Clock {
	if cc, ok := c.(clock.Clock); ok {
		return cc
	}
	return clock.RealClock{}
}
