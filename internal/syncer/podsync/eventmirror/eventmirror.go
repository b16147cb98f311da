package eventmirror

import (
	"context"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/leafsync/leafsync/internal/syncer/clusters"
	"github.com/leafsync/leafsync/internal/syncer/engage"
	"github.com/leafsync/leafsync/internal/syncer/member"
)

// ReportingController is the source (reportingController) of the Events
// leafsync mirrors onto host pods; their reportingInstance (source host)
// is the leaf's name.
const ReportingController = "leafsync.io/member-events"

// podEvents selects the member's Events about pods outside kube-system
// (leafsync never runs pods there).
const podEvents = "involvedObject.kind=Pod,involvedObject.namespace!=kube-system"

// Options configure the Controller.
type Options struct {
	// Host is a client of the host cluster, for the Events it writes.
	Host kubernetes.Interface
	// Registry gives the members and the host identity.
	Registry *clusters.Registry
	Logger   logr.Logger
	// Clock times the correlator's spam filter and aggregation (the real
	// clock when nil).
	Clock clock.PassiveClock
}

// Controller mirrors member pod Events onto host pods. It is a
// manager.Runnable that needs leader election.
type Controller struct {
	opts        Options
	log         logr.Logger
	broadcaster record.EventBroadcaster
	engage      *engage.Runner
	members     engage.Members[*memberWatch]
}

// New returns a Controller; Start runs it.
func New(o Options) *Controller {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	c := &Controller{opts: o, log: o.Logger.WithName("eventmirror")}
	c.engage = engage.NewRunner(c, c.log)
	return c
}

// NeedLeaderElection: only the leader mirrors, or each Event would be
// mirrored once per replica; sharded, each replica mirrors the members it
// has taken (the Registry publishes only those).
func (c *Controller) NeedLeaderElection() bool { return !c.opts.Registry.Sharded() }

// Start mirrors until ctx ends.
func (c *Controller) Start(ctx context.Context) error {
	c.broadcaster = record.NewBroadcaster(record.WithContext(ctx),
		record.WithCorrelatorOptions(record.CorrelatorOptions{Clock: c.opts.Clock}))
	c.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.opts.Host.CoreV1().Events("")})
	defer c.broadcaster.Shutdown()
	sub := c.opts.Registry.Subscribe()
	defer sub.Close()
	c.engage.Run(ctx, sub.Events())
	return nil
}

// Engage watches a member's pod Events, or points the watch at a new
// runtime or leaf name.
func (c *Controller) Engage(ctx context.Context, m clusters.Member) []engage.Handler {
	recorder := c.broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: ReportingController, Host: m.Spec.LeafName})
	old, _ := c.members.Get(m.Cluster())
	if old != nil && old.runtime == m.Runtime {
		old.mirror.setRecorder(recorder)
		return nil
	}
	var baseline cache.Store
	if old != nil {
		old.stop()
		baseline = old.seen()
	}
	w, err := c.watch(ctx, m, newMirror(m.Cluster(), c.opts.Registry.HostIdentity, m.Runtime.PodLister(), recorder, baseline))
	if err != nil {
		c.log.Error(err, "watching the member's pod Events", "cluster", m.Cluster())
		c.members.Take(m.Cluster())
		return nil
	}
	c.members.Set(m.Cluster(), w)
	return nil
}

// Decided: readiness does not matter here; a member that does not answer
// only delays its Events.
func (c *Controller) Decided(clusters.Member) {}

// Disengage stops the member's watch.
func (c *Controller) Disengage(cluster string) {
	if w, ok := c.members.Take(cluster); ok {
		w.stop()
	}
}

// memberWatch is an informer of one member runtime's pod Events.
type memberWatch struct {
	runtime  *member.Runtime
	mirror   *mirror
	informer cache.SharedIndexInformer
	reg      cache.ResourceEventHandlerRegistration
	cancel   context.CancelFunc
	done     sync.WaitGroup
}

// watch starts an informer of m's pod Events through the runtime's watch
// client (its breaker, user agent and connection; no overall timeout,
// which would cut the watch). It starts once the member's pod cache has
// synced, so that every Event finds its pod.
func (c *Controller) watch(parent context.Context, m clusters.Member, mr *mirror) (*memberWatch, error) {
	factory := informers.NewSharedInformerFactoryWithOptions(m.Runtime.WatchClient(), 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = podEvents }),
		informers.WithTransform(func(obj any) (any, error) {
			if e, ok := obj.(*corev1.Event); ok {
				e.ManagedFields = nil
			}
			return obj, nil
		}))
	inf := factory.Core().V1().Events().Informer()
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if e, ok := obj.(*corev1.Event); ok {
				mr.added(e, initial)
			}
		},
		UpdateFunc: func(old, obj any) {
			o, ok1 := old.(*corev1.Event)
			e, ok2 := obj.(*corev1.Event)
			if ok1 && ok2 {
				mr.updated(o, e)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(parent)
	w := &memberWatch{runtime: m.Runtime, mirror: mr, informer: inf, reg: reg, cancel: cancel}
	pods := m.Runtime.Pods().Informer()
	w.done.Add(1)
	go func() {
		defer w.done.Done()
		if !cache.WaitForCacheSync(ctx.Done(), pods.HasSynced) {
			return
		}
		// With the context itself: a context made from ctx.Done() costs a
		// goroutine per informer (see member.Runtime.Start).
		factory.StartWithContext(ctx)
		if cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
			mr.synced()
		}
		<-ctx.Done()
		factory.Shutdown()
	}()
	return w, nil
}

// seen is the baseline for the next watch of the member: this watch's
// Events once it has listed them, else its own baseline.
func (w *memberWatch) seen() cache.Store {
	if w.reg.HasSynced() {
		return w.informer.GetStore()
	}
	return w.mirror.pendingBaseline()
}

func (w *memberWatch) stop() {
	w.cancel()
	w.done.Wait()
}
