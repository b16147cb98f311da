// Package leaves keeps one leaf Node per registered member in the host:
// it follows the registry of members, recomputes each leaf from the
// member's informers and the hysteresis decision the registry's events
// carry (clusters.Member.Readiness), writes it with leafnode.Writer, and
// runs its Lease heartbeat, which renews while that decision says so.
package leaves

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/leafnode"
	"github.com/leafsync/leafsync/internal/runner"
	"github.com/leafsync/leafsync/internal/syncer/clusters"
	"github.com/leafsync/leafsync/internal/syncer/engage"
	"github.com/leafsync/leafsync/internal/syncer/member"
	"github.com/leafsync/leafsync/internal/syncer/metrics"
	"github.com/leafsync/leafsync/internal/syncer/registration"
)

// Options configure the controller.
type Options struct {
	// Host writes leaf Nodes.
	Host kubernetes.Interface
	// Nodes is the informer of the host's leaf Nodes (label
	// leafsync.io/cluster): the writer reads from it, not with a GET per
	// sync, and a Lease is renewed only for a Node it shows as the
	// cluster's leaf.
	Nodes coreinformers.NodeInformer
	// Leases renews the leaves' Leases: a client of its own, so renewals
	// never queue behind Node writes in a shared rate limiter.
	Leases   kubernetes.Interface
	Registry *clusters.Registry
	// LeafTaint is the fleet default for the leafsync.io/leaf taint.
	LeafTaint bool
	// Lease heartbeat: renew interval, lease duration, per-request timeout.
	RenewInterval, LeaseDuration, RenewTimeout time.Duration
	// ConditionHeartbeat refreshes conditions' lastHeartbeatTime.
	ConditionHeartbeat time.Duration
	// AllocatableEvery: allocatable changing alone is written at most this
	// often (leafnode.Writer).
	AllocatableEvery time.Duration
	// Resync recomputes every leaf at least this often.
	Resync time.Duration
	// Clock times the writes (clock.RealClock when nil).
	Clock clock.WithTicker
	// Recorder records an Event on the leaf Node for every transition.
	Recorder events.EventRecorder
	// Guard, when set, records each member's state for the eviction guard
	// before the leaf is written (internal/syncer/guard): the record says NotReady
	// before KCM can see the leaf NotReady.
	Guard interface {
		Set(ctx context.Context, cluster, leaf, state string, since time.Time) error
	}
	// Verification, when set, says whether a member's leaf carries the
	// leafsync.io/unverified taint, and its value (internal/syncer/verify);
	// the verifier calls Kick when that changes.
	Verification interface {
		Unverified(m clusters.Member) string
	}
	// OnRenew receives each renewal's lag (metrics); may be nil.
	OnRenew func(cluster string, lag time.Duration, err error)
	Logger  logr.Logger
}

// Controller runs one leaf per registered member. It is a manager.Runnable
// that needs leader election: only the leader writes leaves and Leases.
//
// Leaf writes go through one runner keyed by cluster (Reconcile): it
// folds the kicks (member objects changed, engine transition, leaf Node
// deleted) into one sync, never syncs a cluster on two workers at once,
// spaces a leaf's syncs by minGap (see pace: a member pod's kick does not
// hold back a node's), and retries failures with backoff.
type Controller struct {
	opts   Options
	log    logr.Logger
	clock  clock.WithTicker
	nodes  corelisters.NodeLister
	runner *runner.Runner[string]
	engage *engage.Runner
	leaves engage.Members[*leaf]
}

const (
	// minGap between two urgent syncs of one leaf (a burst of member node
	// changes is one write), and between a lazy sync and the last sync of
	// any kind (see pace).
	minGap = 500 * time.Millisecond
	// workers write leaves in parallel: a slow write of one leaf does not
	// hold back the others, and one member's change, a write of each of
	// its leaves at once, is spread over many round trips to the host (16
	// workers were all waiting on the host at times in bench-scale at 200
	// registrations). They bound the leaf writes in flight: the host
	// client has no rate limit.
	workers = 64
)

// New returns a Controller; Start runs it.
func New(o Options) *Controller {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	c := &Controller{opts: o, log: o.Logger.WithName("leaves"), clock: o.Clock}
	c.runner = runner.New[string](c, runner.Options[string]{Name: "leaves", Workers: workers,
		MinBackoff: time.Second, MaxBackoff: 30 * time.Second, Clock: o.Clock, Logger: c.log})
	c.engage = engage.NewRunner(c, c.log)
	return c
}

// NeedLeaderElection: leaves and their Leases are written by the leader
// only; sharded, by every replica for the members it acts on.
func (c *Controller) NeedLeaderElection() bool { return !c.opts.Registry.Sharded() }

// Start follows the registry until ctx ends, then stops every leaf (the
// leaves stay in the host: a leafsync restart is not a deregistration).
func (c *Controller) Start(ctx context.Context) error {
	c.opts.Registry.OnDeregister("leaf-node", c.cleanup)
	c.nodes = c.opts.Nodes.Lister()
	// A leaf Node deleted by hand is written again at once, not at the
	// next resync: while it is missing, pod sync keeps its hands off the
	// leaf's pods.
	reg, err := c.opts.Nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if n, ok := obj.(*corev1.Node); ok {
				c.triggerLeaf(n.Name)
			} else if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				c.triggerLeaf(d.Key)
			}
		},
	})
	if err != nil {
		return err
	}
	defer func() { _ = c.opts.Nodes.Informer().RemoveEventHandler(reg) }()
	if !cache.WaitForCacheSync(ctx.Done(), c.opts.Nodes.Informer().HasSynced) {
		return nil
	}
	var wg sync.WaitGroup
	wg.Go(func() { c.runner.Run(ctx) })
	sub := c.opts.Registry.Subscribe()
	defer sub.Close()
	c.engage.Run(ctx, sub.Events()) // returns with every leaf stopped
	wg.Wait()
	return nil
}

// Engage starts the member's leaf, or points it at a new runtime or spec;
// a renamed leaf is replaced.
func (c *Controller) Engage(ctx context.Context, m clusters.Member) []engage.Handler {
	cluster := m.Cluster()
	l := c.leaf(cluster)
	if l != nil && l.name != m.Spec.LeafName {
		// Renamed: the old leaf goes, a new one comes.
		c.Disengage(cluster)
		// Sharded and handed over meanwhile: the member's writer renames it.
		if c.opts.Registry.Acting(cluster) {
			if err := l.writer.Delete(ctx); err != nil {
				c.log.Error(err, "removing renamed leaf", "leaf", l.name)
			}
		}
		l = nil
	}
	if l == nil {
		l = c.startLeaf(ctx, m)
		c.leaves.Set(cluster, l)
	} else {
		l.setMember(m)
	}
	c.syncNow(cluster)
	nodeKick := cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { c.syncNow(cluster) },
		UpdateFunc: func(old, cur any) {
			if member.NodeRecordChanged(old, cur) {
				c.syncNow(cluster)
			}
		},
		DeleteFunc: func(any) { c.syncNow(cluster) },
	}
	// A pod only changes the leaf's free resources, written at most every
	// AllocatableEvery: lazy (see pace).
	podKick := func(any) { c.runner.AddAfter(cluster, minGap) }
	return []engage.Handler{
		{Informer: m.Runtime.NodeInformer(), Handler: nodeKick},
		{Informer: m.Runtime.Pods().Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc: podKick, UpdateFunc: func(_, cur any) { podKick(cur) }, DeleteFunc: podKick,
		}},
	}
}

// Decided takes the engine's decision for the leaf and its heartbeat; a
// transition is recorded as an Event on the leaf, and written.
func (c *Controller) Decided(m clusters.Member) {
	l := c.leaf(m.Cluster())
	if l == nil {
		return
	}
	l.setMember(m)
	for _, tr := range m.Readiness.Transitions {
		l.recordTransition(tr)
	}
	if len(m.Readiness.Transitions) > 0 {
		c.syncNow(m.Cluster())
	}
}

// Kick syncs the member's leaf soon (its verification changed).
func (c *Controller) Kick(cluster string) { c.syncNow(cluster) }

// syncNow syncs the member's leaf for an urgent cause (see pace).
func (c *Controller) syncNow(cluster string) {
	if l := c.leaf(cluster); l != nil {
		l.urgent.Store(true)
	}
	c.runner.Add(cluster)
}

// Disengage stops the member's leaf (the Node stays).
func (c *Controller) Disengage(cluster string) {
	if l, ok := c.leaves.Take(cluster); ok {
		l.stop()
	}
}

func (c *Controller) leaf(cluster string) *leaf {
	l, _ := c.leaves.Get(cluster)
	return l
}

// triggerLeaf looks again at the leaf of that Node name, if any.
func (c *Controller) triggerLeaf(name string) {
	c.leaves.Each(func(cluster string, l *leaf) {
		if l.name == name {
			l.urgent.Store(true)
			c.runner.Add(cluster)
		}
	})
}

// cleanup is the deregistration hook: the leaf Node and its Lease go.
func (c *Controller) cleanup(ctx context.Context, d clusters.Deregistration) error {
	if err := c.engage.Disengage(ctx, d.Cluster); err != nil {
		return err // the leaf may still write its Node
	}
	w := leafnode.Writer{Client: c.opts.Host, Cluster: d.Cluster, Name: d.LeafName}
	if err := w.Delete(ctx); err != nil {
		return err
	}
	metrics.ForgetCluster(d.Cluster)
	return nil
}

// Reconcile syncs the cluster's leaf, and asks to look again when a
// held-back allocatable change is due, and at the latest after Resync. A
// sync within minGap of the last one waits for it.
func (c *Controller) Reconcile(_ context.Context, cluster string) (runner.Result, error) {
	l := c.leaf(cluster)
	if l == nil {
		return runner.Result{}, nil // stopped
	}
	urgent := l.urgent.Swap(false)
	if wait := l.pace.wait(c.clock.Now(), urgent); wait > 0 {
		if urgent {
			l.urgent.Store(true)
		}
		return runner.Result{RequeueAfter: wait}, nil
	}
	err := l.sync()
	l.pace.synced(c.clock.Now(), urgent)
	if err != nil {
		if l.ctx.Err() != nil {
			return runner.Result{}, nil // stopped meanwhile
		}
		return runner.Result{}, fmt.Errorf("syncing leaf node %s: %w", l.name, err)
	}
	next := c.opts.Resync
	if d := l.writer.Deferred; d > 0 && d < next {
		// Written when due even if the member goes quiet.
		next = d
	}
	return runner.Result{RequeueAfter: next}, nil
}

// leaf is one member's leaf Node: its writer and Lease heartbeat.
type leaf struct {
	c       *Controller
	cluster string
	name    string
	writer  *leafnode.Writer
	log     logr.Logger
	// pace spaces the leaf's syncs; urgent: a cause since the last sync
	// was urgent (see pace).
	pace   pace
	urgent atomic.Bool

	// mu guards member: the registry's latest view of the member,
	// Readiness included (the leaf's and the heartbeat's decision).
	mu     sync.Mutex
	member clusters.Member

	// syncMu is held while syncing: stop waits for a sync under way, after
	// which the leaf writes nothing (its Node may be deleted next).
	syncMu  sync.Mutex
	stopped bool

	ctx       context.Context
	cancel    context.CancelFunc
	lease     *leafnode.Heartbeat // renews while the leaf's decision says so
	heartbeat sync.WaitGroup
}

func (c *Controller) startLeaf(parent context.Context, m clusters.Member) *leaf {
	metrics.InitCluster(m.Cluster())
	ctx, cancel := context.WithCancel(parent)
	l := &leaf{
		c:       c,
		cluster: m.Cluster(),
		name:    m.Spec.LeafName,
		log:     c.log.WithValues("cluster", m.Cluster(), "leaf", m.Spec.LeafName),
		member:  m,
		ctx:     ctx,
		cancel:  cancel,
		writer: &leafnode.Writer{
			Client:           c.opts.Host,
			Cluster:          m.Cluster(),
			Nodes:            c.nodes,
			Name:             m.Spec.LeafName,
			HeartbeatEvery:   c.opts.ConditionHeartbeat,
			AllocatableEvery: c.opts.AllocatableEvery,
			Clock:            c.clock,
		},
	}
	// Sharded: asked again after a write refused for a stale version (a
	// write checked before a pause, sent after the member moved).
	l.writer.Allowed = func() bool { return c.opts.Registry.Acting(l.cluster) }
	leases := c.opts.Leases
	if leases == nil {
		leases = c.opts.Host
	}
	owned := func() bool {
		// Sharded: only the member's writer renews (checked at every
		// renewal, so a replica that lost the member stops at once).
		if !c.opts.Registry.Acting(l.cluster) {
			return false
		}
		n, err := c.nodes.Get(l.name)
		return err == nil && leafnode.Owns(n, l.cluster)
	}
	hb := &leafnode.Heartbeat{
		Client:   leases,
		Cluster:  l.cluster,
		Owned:    owned,
		Name:     l.name,
		Interval: c.opts.RenewInterval,
		Duration: c.opts.LeaseDuration,
		Timeout:  c.opts.RenewTimeout,
		OnRenew: func(lag time.Duration, err error) {
			if err != nil {
				metrics.LeaseRenewalFailuresVec.WithLabelValues(l.cluster).Inc()
			} else {
				metrics.LeaseRenewalLagVec.WithLabelValues(l.cluster).Observe(lag.Seconds())
			}
			if c.opts.OnRenew != nil {
				c.opts.OnRenew(l.cluster, lag, err)
			}
		},
		Log:   l.log,
		Clock: c.clock,
	}
	l.lease = hb
	hb.SetRenewing(m.Readiness.Status.State.LeafReady())
	l.heartbeat.Go(func() { hb.Run(ctx) })
	return l
}

// setMember points the leaf at a (new) member runtime, spec or decision.
func (l *leaf) setMember(m clusters.Member) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.member = m
	l.lease.SetRenewing(m.Readiness.Status.State.LeafReady())
}

func (l *leaf) current() clusters.Member {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.member
}

func (l *leaf) stop() {
	l.cancel()
	l.syncMu.Lock()
	l.stopped = true
	l.syncMu.Unlock()
	l.heartbeat.Wait()
}

// sync recomputes the leaf and writes it.
func (l *leaf) sync() error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if l.stopped || !l.c.opts.Registry.Acting(l.cluster) {
		return nil // sharded: another replica writes the leaf now
	}
	ctx := l.ctx
	m := l.current()
	st := m.Readiness.Status
	in := leafnode.Input{
		Cluster:  l.cluster,
		LeafName: l.name,
		Status:   st,
		Config:   m.Readiness.Config,
		Options:  l.options(m),
	}
	if v := l.c.opts.Verification; v != nil {
		in.Unverified = v.Unverified(m)
	}
	synced := m.Runtime.HasSynced()
	if synced {
		// The pods leafsync placed are the host scheduler's to account
		// for; the others are in the cache as their usage only.
		in.MemberNodes, in.ForeignUsage = m.Runtime.Nodes(), m.Runtime.ForeignUsage()
	}
	d := leafnode.Compute(in)
	if !synced {
		// Until the member's caches have synced once, the member's
		// resources are unknown, not zero.
		d.Capacity, d.Allocatable = nil, nil
	}
	if g := l.c.opts.Guard; g != nil {
		if err := g.Set(ctx, l.cluster, l.name, st.State.String(), st.Since); err != nil {
			return err // the leaf is not written ahead of its record
		}
	}
	before := l.writer.Writes
	err := l.writer.Sync(ctx, d)
	metrics.LeafWritesVec.WithLabelValues(l.cluster).Add(float64(l.writer.Writes - before))
	if err == nil && d.Allocatable != nil {
		for name, q := range d.Allocatable {
			metrics.LeafAllocatableVec.WithLabelValues(l.cluster, string(name)).Set(q.AsApproximateFloat64())
		}
	}
	return err
}

func (l *leaf) options(m clusters.Member) leafnode.Options {
	o := leafnode.Options{LeafTaint: l.c.opts.LeafTaint, IsSyncedPod: member.IsLeafsyncPod}
	if v, ok := m.Spec.Annotations[registration.AnnotationLeafTaint]; ok {
		if b, err := strconv.ParseBool(v); err == nil {
			o.LeafTaint = b
		}
	}
	if v := m.Spec.Annotations[registration.AnnotationNodeSelector]; v != "" {
		if sel, err := labels.Parse(v); err == nil {
			o.NodeSelector = sel
		}
	}
	return o
}

// recordTransition puts an Event on the leaf Node for a state change.
func (l *leaf) recordTransition(tr hysteresis.Transition) {
	if l.c.opts.Recorder == nil || !l.c.opts.Registry.Acting(l.cluster) {
		return // sharded: the member's writer records its transitions
	}
	ref := &corev1.ObjectReference{Kind: "Node", Name: l.name, UID: "", APIVersion: "v1"}
	// Reasons are distinct per kind of change: the events API folds events
	// of the same reason on one object into a series that keeps the first
	// note, so a recovery must not share the reason of a suppressed flap.
	typ, reason := corev1.EventTypeNormal, "Leaf"+tr.To.String()
	switch {
	case tr.To == hysteresis.NotReady:
		typ = corev1.EventTypeWarning
	case tr.From == hysteresis.Suspect && tr.To == hysteresis.Ready:
		reason = "LeafFlapSuppressed"
	}
	if tr.From == tr.To {
		reason = "LeafUncordoned"
		if tr.Cordoned {
			reason = "LeafCordoned"
		}
	}
	note := fmt.Sprintf("member %s: %s -> %s, cordoned=%v", l.cluster, tr.From, tr.To, tr.Cordoned)
	if tr.Reason != "" {
		note += " (" + tr.Reason + ")"
	}
	l.c.opts.Recorder.Eventf(ref, nil, typ, reason, "Transition", note)
}
