// Package leaves keeps one leaf Node per registered member in the host:
// it follows the registry of members, recomputes each leaf from the
// member's informers and the hysteresis decision, writes it with
// leafnode.Writer, and runs its Lease heartbeat.
package leaves

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/leafnode"
	"github.com/leafsync/leafsync/syncer/clusters"
	"github.com/leafsync/leafsync/syncer/member"
	"github.com/leafsync/leafsync/syncer/metrics"
	"github.com/leafsync/leafsync/syncer/registration"
)

// Annotations of a registration Secret read here.
const (
	// AnnotationNodeSelector restricts which member nodes a leaf offers (a
	// label selector, e.g. "pool=leaf").
	AnnotationNodeSelector = registration.AnnotationNodeSelector
	// AnnotationLeafTaint turns the leafsync.io/leaf taint on or off for one
	// member ("true"/"false"), overriding the fleet setting.
	AnnotationLeafTaint = registration.AnnotationLeafTaint
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
	// Thresholds gives a member's effective thresholds (for messages); the
	// hysteresis Fleet.
	Thresholds interface {
		Config(cluster string) (hysteresis.Config, bool)
	}
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
	// Recorder records an Event on the leaf Node for every transition.
	Recorder events.EventRecorder
	// Guard, when set, records each member's state for the eviction guard
	// before the leaf is written (syncer/guard): the record says NotReady
	// before KCM can see the leaf NotReady.
	Guard interface {
		Set(ctx context.Context, cluster, leaf, state string, since time.Time) error
	}
	// OnRenew receives each renewal's lag (metrics); may be nil.
	OnRenew func(cluster string, lag time.Duration, err error)
	Logger  logr.Logger
}

// Controller runs one leaf per registered member. It is a manager.Runnable
// that needs leader election: only the leader writes leaves and Leases.
type Controller struct {
	opts  Options
	log   logr.Logger
	nodes corelisters.NodeLister

	mu     sync.Mutex
	leaves map[string]*leaf
	wg     sync.WaitGroup
}

// New returns a Controller; Start runs it.
func New(o Options) *Controller {
	return &Controller{opts: o, log: o.Logger.WithName("leaves"), leaves: map[string]*leaf{}}
}

// NeedLeaderElection: leaves and their Leases are written by the leader only.
func (c *Controller) NeedLeaderElection() bool { return true }

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
	sub := c.opts.Registry.Subscribe()
	defer sub.Close()
	defer c.stopAll()
	sub.Each(ctx, func(ev clusters.Event) { c.handle(ctx, ev) })
	return nil
}

func (c *Controller) handle(ctx context.Context, ev clusters.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.leaves[ev.Cluster]
	switch ev.Type {
	case clusters.MemberAdded, clusters.MemberReplaced, clusters.MemberUpdated:
		if l != nil && l.name != ev.Member.Spec.LeafName {
			// Renamed: the old leaf goes, a new one comes.
			l.stop()
			if err := l.writer.Delete(ctx); err != nil {
				c.log.Error(err, "removing renamed leaf", "leaf", l.name)
			}
			delete(c.leaves, ev.Cluster)
			l = nil
		}
		if l == nil {
			l = c.startLeaf(ctx, ev.Member)
			c.leaves[ev.Cluster] = l
			return
		}
		l.setMember(ev.Member)
	case clusters.MemberRemoved:
		if l != nil {
			l.stop()
			delete(c.leaves, ev.Cluster)
		}
	case clusters.StateChanged:
		if l != nil {
			l.recordTransition(ev.Transition)
			l.trigger()
		}
	}
}

// triggerLeaf looks again at the leaf of that Node name, if any.
func (c *Controller) triggerLeaf(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range c.leaves {
		if l.name == name {
			l.trigger()
		}
	}
}

// cleanup is the deregistration hook: the leaf Node and its Lease go.
func (c *Controller) cleanup(ctx context.Context, d clusters.Deregistration) error {
	c.mu.Lock()
	if l := c.leaves[d.Cluster]; l != nil {
		l.stop()
		delete(c.leaves, d.Cluster)
	}
	c.mu.Unlock()
	w := leafnode.Writer{Client: c.opts.Host, Cluster: d.Cluster, Name: d.LeafName}
	if err := w.Delete(ctx); err != nil {
		return err
	}
	metrics.ForgetCluster(d.Cluster)
	return nil
}

func (c *Controller) stopAll() {
	c.mu.Lock()
	for name, l := range c.leaves {
		l.stop()
		delete(c.leaves, name)
	}
	c.mu.Unlock()
	c.wg.Wait()
}

// leaf is one member's leaf Node: a sync loop and a Lease heartbeat.
type leaf struct {
	c       *Controller
	cluster string
	name    string
	writer  *leafnode.Writer
	log     logr.Logger

	mu       sync.Mutex
	member   clusters.Member
	handlers []handlerRef

	kick   chan struct{}
	cancel context.CancelFunc
	done   sync.WaitGroup
}

type handlerRef struct {
	informer cache.SharedIndexInformer
	reg      cache.ResourceEventHandlerRegistration
}

func (c *Controller) startLeaf(parent context.Context, m clusters.Member) *leaf {
	metrics.InitCluster(m.Cluster())
	ctx, cancel := context.WithCancel(parent)
	l := &leaf{
		c:       c,
		cluster: m.Cluster(),
		name:    m.Spec.LeafName,
		log:     c.log.WithValues("cluster", m.Cluster(), "leaf", m.Spec.LeafName),
		kick:    make(chan struct{}, 1),
		cancel:  cancel,
		writer: &leafnode.Writer{
			Client:           c.opts.Host,
			Cluster:          m.Cluster(),
			Nodes:            c.nodes,
			Name:             m.Spec.LeafName,
			HeartbeatEvery:   c.opts.ConditionHeartbeat,
			AllocatableEvery: c.opts.AllocatableEvery,
		},
	}
	l.setMember(m)
	leases := c.opts.Leases
	if leases == nil {
		leases = c.opts.Host
	}
	owned := func() bool {
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
		ShouldRenew: func() bool {
			st, ok := c.opts.Registry.Hysteresis(l.cluster)
			return ok && st.State.LeafReady() && owned()
		},
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
		Log: l.log,
	}
	l.done.Add(2)
	c.wg.Add(2)
	go func() { defer c.wg.Done(); defer l.done.Done(); l.run(ctx) }()
	go func() { defer c.wg.Done(); defer l.done.Done(); hb.Run(ctx) }()
	return l
}

// setMember points the leaf at a (new) member runtime: informer handlers
// move to the new runtime's informers.
func (l *leaf) setMember(m clusters.Member) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.removeHandlersLocked()
	l.member = m
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { l.trigger() },
		UpdateFunc: func(any, any) { l.trigger() },
		DeleteFunc: func(any) { l.trigger() },
	}
	for _, inf := range []cache.SharedIndexInformer{m.Runtime.Nodes().Informer(), m.Runtime.Pods().Informer()} {
		reg, err := inf.AddEventHandler(h)
		if err != nil {
			l.log.Error(err, "watching member objects")
			continue
		}
		l.handlers = append(l.handlers, handlerRef{inf, reg})
	}
	l.trigger()
}

func (l *leaf) removeHandlersLocked() {
	for _, h := range l.handlers {
		_ = h.informer.RemoveEventHandler(h.reg)
	}
	l.handlers = nil
}

func (l *leaf) trigger() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

func (l *leaf) stop() {
	l.mu.Lock()
	l.removeHandlersLocked()
	l.mu.Unlock()
	l.cancel()
	l.done.Wait()
}

// run recomputes and writes the leaf on every kick (member objects changed,
// engine transition), at most every 500ms, and at least every Resync;
// allocatable alone is written at most every AllocatableEvery.
func (l *leaf) run(ctx context.Context) {
	const minGap = 500 * time.Millisecond
	resync := time.NewTicker(l.c.opts.Resync)
	defer resync.Stop()
	retry := time.Duration(0)
	for {
		err := l.sync(ctx)
		if err != nil {
			retry = min(max(2*retry, time.Second), 30*time.Second)
			l.log.Error(err, "syncing leaf node; retrying", "in", retry)
		} else {
			retry = 0
		}
		var retryC <-chan time.Time
		switch {
		case retry > 0:
			retryC = time.After(retry)
		case l.writer.Deferred > 0:
			// An allocatable change held back: written when due even if
			// the member goes quiet.
			retryC = time.After(l.writer.Deferred)
		}
		select {
		case <-ctx.Done():
			return
		case <-l.kick:
		case <-resync.C:
		case <-retryC:
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(minGap):
		}
	}
}

func (l *leaf) sync(ctx context.Context) error {
	l.mu.Lock()
	m := l.member
	l.mu.Unlock()
	st, ok := l.c.opts.Registry.Hysteresis(l.cluster)
	if !ok {
		return nil
	}
	cfg, _ := l.c.opts.Thresholds.Config(l.cluster)
	in := leafnode.Input{
		Cluster:  l.cluster,
		LeafName: l.name,
		Status:   st,
		Config:   cfg,
		Options:  l.options(m),
	}
	synced := m.Runtime.HasSynced()
	if synced {
		nodes, err := m.Runtime.NodeLister().List(labels.Everything())
		if err != nil {
			return err
		}
		pods, err := m.Runtime.PodLister().List(labels.Everything())
		if err != nil {
			return err
		}
		in.MemberNodes, in.MemberPods = nodes, pods
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
	if v, ok := m.Spec.Annotations[AnnotationLeafTaint]; ok {
		if b, err := strconv.ParseBool(v); err == nil {
			o.LeafTaint = b
		}
	}
	if v := m.Spec.Annotations[AnnotationNodeSelector]; v != "" {
		if sel, err := labels.Parse(v); err == nil {
			o.NodeSelector = sel
		}
	}
	return o
}

// recordTransition puts an Event on the leaf Node for a state change.
func (l *leaf) recordTransition(tr hysteresis.Transition) {
	if l.c.opts.Recorder == nil {
		return
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
