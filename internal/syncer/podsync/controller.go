package podsync

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/utils/clock"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/leafnode"
	"github.com/leafsync/leafsync/internal/runner"
	"github.com/leafsync/leafsync/internal/syncer/clusters"
	"github.com/leafsync/leafsync/internal/syncer/engage"
	"github.com/leafsync/leafsync/internal/syncer/hostclock"
	"github.com/leafsync/leafsync/internal/syncer/member"
	"github.com/leafsync/leafsync/internal/syncer/metrics"
	"github.com/leafsync/leafsync/internal/syncer/podsync/decide"
	"github.com/leafsync/leafsync/internal/syncer/podsync/deletes"
	"github.com/leafsync/leafsync/internal/syncer/podsync/nswatch"
	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
	"github.com/leafsync/leafsync/internal/syncer/podsync/translate"
	"github.com/leafsync/leafsync/internal/syncer/store"
)

// Options configure the Controller.
type Options struct {
	// Host is a client of the host cluster.
	Host kubernetes.Interface
	// LeafNodes is the informer of the host's leaf Nodes: a pod bound to a
	// Node is touched only while that Node is the member's leaf (label
	// leafsync.io/cluster=<member>), never the pods of a foreign Node.
	LeafNodes coreinformers.NodeInformer
	// Registry gives the members and the host identity; each member's
	// readiness arrives as data with its Decided events.
	Registry *clusters.Registry
	// Keeper holds owed, deferred and retained deletes durably.
	Keeper *store.Keeper
	// Policy is the fleet's stale-eviction policy (per-member annotation
	// AnnotationStaleEvictionPolicy overrides it).
	Policy podmeta.Policy
	// MaxDeferral bounds DeferUntilReplaced.
	MaxDeferral time.Duration
	// ReapAfter: a host pod Terminating this long on a leaf whose member is
	// confirmed down is finished in the host.
	ReapAfter time.Duration
	// Resync: every pod is looked at again, and the copies of ConfigMaps,
	// Secrets and Services refreshed and garbage-collected, at least this
	// often.
	Resync time.Duration
	// PodSecurity is the fleet's Pod Security level (privileged, baseline,
	// restricted; "" is baseline): member pods are evaluated at it, and the
	// namespaces leafsync creates are labelled with it, unless the
	// registration says otherwise (AnnotationPodSecurity).
	PodSecurity string
	// HostAPIServer is the host API server's address members reach
	// ("host:port"; per member, AnnotationHostAPIServer overrides it):
	// pods that mount a ServiceAccount token get their host
	// ServiceAccount's (hosttoken). "": no token.
	HostAPIServer string
	// Workers reconcile one member's pods in parallel. Each member has a
	// queue and workers of its own, so a slow or unreachable member never
	// delays another member's pod sync, deletes or reaping.
	Workers int
	// Recorder records Events on host pods and leaves (may be nil).
	Recorder events.EventRecorder
	Logger   logr.Logger
	// Clock times decisions, status times and the resync (the real clock
	// when nil).
	Clock clock.WithTicker
	// HostClock is the host API server's time on Clock, measured from the
	// host's answers (Clock itself, unmeasured, when nil).
	HostClock *hostclock.Clock
	// Claims provisions host claims into members (internal/syncer/volumes):
	// a pod may use only claims it provisioned for the pod's member, whose
	// member claims it makes before the pod (nil: a pod with a claim is
	// not run).
	Claims Claims
}

// Claims is what pod sync needs of the host claims provisioned into members.
type Claims interface {
	Provisioned(cluster, namespace, name string) bool
	Ensure(ctx context.Context, cluster string, member kubernetes.Interface, hp *corev1.Pod) error
}

// key names one pod in one member.
type key struct {
	Cluster, Namespace, Name string
}

// Controller syncs the pods bound to every leaf. It is a manager.Runnable
// that needs leader election.
type Controller struct {
	opts   Options
	log    logr.Logger
	ledger ledger

	engage  *engage.Runner
	members engage.Members[*memberSync]

	// assignMu serializes reading and writing the bindings of replacements
	// to deferred deletes.
	assignMu sync.Mutex

	nsWatch *nswatch.Watch
	// services are the host's Services, copied into a member namespace
	// before a pod is created there (services.go).
	services *hostServices
	// hostPods are the host's pods bound to nodes, for every leaf
	// (hostpods.go).
	hostPods *hostPods
}

// New returns a Controller; Start runs it.
func New(o Options) *Controller {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.HostClock == nil {
		o.HostClock = hostclock.New(o.Clock)
	}
	if o.Workers < 1 {
		o.Workers = 1
	}
	if o.Policy == "" {
		o.Policy = podmeta.DeferUntilReplaced
	}
	if o.Resync <= 0 {
		o.Resync = 30 * time.Second
	}
	c := &Controller{
		opts:   o,
		ledger: ledger{keeper: o.Keeper},
		log:    o.Logger.WithName("podsync"),
	}
	c.nsWatch = nswatch.New(o.Host, o.Clock, c.deferredNamespaceChanged)
	c.services = newHostServices(o.Host)
	c.hostPods = newHostPods(o.Host)
	c.engage = engage.NewRunner(c, c.log)
	return c
}

// NeedLeaderElection: only the leader syncs pods; sharded, every replica
// syncs the pods of the members it acts on.
func (c *Controller) NeedLeaderElection() bool { return !c.opts.Registry.Sharded() }

// Start follows the registry until ctx ends.
func (c *Controller) Start(ctx context.Context) error {
	c.opts.Registry.OnDeregister("pod-sync", c.cleanup)
	c.nsWatch.Start(ctx)
	defer c.nsWatch.Wait()
	c.services.start(ctx)
	c.hostPods.start(ctx)
	defer c.hostPods.stop()
	if !cache.WaitForCacheSync(ctx.Done(), c.opts.LeafNodes.Informer().HasSynced) {
		return nil
	}
	sub := c.opts.Registry.Subscribe()
	defer sub.Close()
	c.engage.Run(ctx, sub.Events())
	return nil
}

// Engage starts pod sync for a member, or points it at a new runtime or
// spec and looks at every pod again.
func (c *Controller) Engage(ctx context.Context, m clusters.Member) []engage.Handler {
	ms := c.memberSync(m.Cluster())
	if ms == nil {
		ms = c.startMember(ctx, m)
		c.members.Set(m.Cluster(), ms)
	} else {
		ms.setMember(m)
		ms.trigger()
	}
	return []engage.Handler{{Informer: m.Runtime.Pods().Informer(), Handler: cache.ResourceEventHandlerFuncs{
		AddFunc:    ms.onMemberPod,
		UpdateFunc: func(_, o any) { ms.onMemberPod(o) },
		DeleteFunc: func(o any) { ms.onMemberPod(o); c.nameFreed(ms.cluster, o) },
	}}}
}

// Decided keeps the engine's latest decision for the member (pod sync
// decides from it, never from the engine), and looks at every pod of the
// member again when its state changed.
func (c *Controller) Decided(m clusters.Member) {
	ms := c.memberSync(m.Cluster())
	if ms == nil {
		return
	}
	ms.setReadiness(m.Readiness)
	if len(m.Readiness.Transitions) > 0 {
		ms.trigger()
	}
}

// Disengage stops pod sync for a member.
func (c *Controller) Disengage(cluster string) {
	if ms, ok := c.members.Take(cluster); ok {
		ms.stop()
	}
}

func (c *Controller) memberSync(cluster string) *memberSync {
	ms, _ := c.members.Get(cluster)
	return ms
}

// cleanup is the deregistration hook: host pods on the leaf lose
// leafsync's finalizer (Terminating ones are finished), so that nothing
// waits on a member leafsync no longer serves. Member pods are left alone.
func (c *Controller) cleanup(ctx context.Context, d clusters.Deregistration) error {
	if err := c.engage.Disengage(ctx, d.Cluster); err != nil {
		return err
	}
	list, err := c.opts.Host.CoreV1().Pods("").List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", d.LeafName).String(),
	})
	if err != nil {
		return err
	}
	var errs []error
	for i := range list.Items {
		p := &list.Items[i]
		if !podmeta.HasFinalizer(p) && p.Annotations[podmeta.AnnotationMemberUID] == "" {
			continue // never synced by leafsync (a foreign Node's pod, a DaemonSet's)
		}
		if podmeta.HasFinalizer(p) {
			if _, err := c.removeFinalizer(ctx, p); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		if p.DeletionTimestamp != nil {
			if err := c.deleteHost(ctx, p); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// memberSync is pod sync for one member: a queue of its pods, fed by the
// host pods bound to its leaf (hostPods) and the member's pod informer, and
// a resync loop.
type memberSync struct {
	c       *Controller
	cluster string
	log     logr.Logger
	queue   *runner.Runner[key]

	mu     sync.Mutex
	member clusters.Member
	leaf   string
	ctx    context.Context

	kick   chan struct{}
	cancel context.CancelFunc
	done   sync.WaitGroup

	depMu sync.Mutex // serializes the writes of member ConfigMap, Secret and Service copies
}

func (c *Controller) startMember(parent context.Context, m clusters.Member) *memberSync {
	ctx, cancel := context.WithCancel(parent)
	ms := &memberSync{
		c:       c,
		cluster: m.Cluster(),
		log:     c.log.WithValues("cluster", m.Cluster()),
		queue: runner.New[key](runner.Func[key](c.reconcile), runner.Options[key]{
			Name: "podsync", Workers: c.opts.Workers, MinBackoff: 100 * time.Millisecond, MaxBackoff: 10 * time.Second,
			Clock: c.opts.Clock, Logger: c.log.WithValues("cluster", m.Cluster()),
		}),
		kick:   make(chan struct{}, 1),
		cancel: cancel,
		ctx:    ctx,
	}
	ms.setMember(m)
	ms.done.Add(2)
	go func() { defer ms.done.Done(); ms.loop(ctx) }()
	go func() { defer ms.done.Done(); ms.queue.Run(ctx) }()
	return ms
}

// setMember points at a (new) member runtime and leaf: a renamed leaf's
// host pods are followed from then on.
func (ms *memberSync) setMember(m clusters.Member) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	ms.member = m
	if ms.leaf != m.Spec.LeafName {
		ms.c.hostPods.setLeaf(ms, ms.leaf, m.Spec.LeafName)
		ms.leaf = m.Spec.LeafName
	}
}

func (ms *memberSync) onMemberPod(obj any) {
	o := obj
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	p, ok := o.(*corev1.Pod)
	if !ok || !podmeta.Ours(p, ms.cluster, ms.hostIdentity()) {
		return
	}
	ms.queue.Add(key{ms.cluster, p.Namespace, p.Name})
}

func (ms *memberSync) trigger() {
	select {
	case ms.kick <- struct{}{}:
	default:
	}
}

func (ms *memberSync) stop() {
	ms.mu.Lock()
	ms.c.hostPods.setLeaf(ms, ms.leaf, "")
	ms.mu.Unlock()
	ms.cancel()
	ms.done.Wait()
}

// setReadiness takes a decision of the engine; the runtime and leaf
// change only through setMember (Engage).
func (ms *memberSync) setReadiness(d hysteresis.Decision) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	ms.member.Readiness = d
}

func (ms *memberSync) snapshot() (clusters.Member, string, *hostPods) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return ms.member, ms.leaf, ms.c.hostPods
}

func (ms *memberSync) hostSynced() bool {
	_, _, host := ms.snapshot()
	return host.HasSynced()
}

// loop waits for the host cache (not the member's: a member down since
// start-up never syncs, and pods bound to its leaf must still be owed and
// reaped), then looks at every pod on a state change
// and every Resync, when it also refreshes and garbage-collects the
// copies of ConfigMaps, Secrets and Services in the member.
func (ms *memberSync) loop(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), ms.hostSynced) {
		return
	}
	ms.enqueueAll()
	tick := ms.c.opts.Clock.NewTicker(ms.c.opts.Resync)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ms.kick:
			ms.enqueueAll()
		case <-tick.C():
			ms.enqueueAll()
			if err := ms.refreshDeps(ctx); err != nil && ctx.Err() == nil {
				ms.log.V(1).Info("refreshing the copies of ConfigMaps, Secrets and Services", "error", err.Error())
			}
		}
	}
}

// enqueueAll queues every pod name pod sync knows in this member: host
// pods on the leaf, leafsync's member pods, pending deletes.
func (ms *memberSync) enqueueAll() {
	m, leaf, host := ms.snapshot()
	for _, p := range host.on(leaf) {
		ms.queue.Add(key{ms.cluster, p.Namespace, p.Name})
	}
	if m.Runtime.HasSynced() {
		pods, _ := m.Runtime.PodLister().List(labels.SelectorFromSet(labels.Set{podmeta.LabelManaged: "true", podmeta.LabelCluster: ms.cluster}))
		for _, p := range pods {
			if podmeta.Ours(p, ms.cluster, ms.hostIdentity()) {
				ms.queue.Add(key{ms.cluster, p.Namespace, p.Name})
			}
		}
	}
	for _, r := range ms.c.ledger.pendingDeletes(ms.cluster) {
		ms.queue.Add(key{ms.cluster, r.Namespace, r.Name})
	}
}

// admissionFor is what the member's owner agreed to run (validated when
// the registration was accepted), with the fleet's Pod Security level when
// the registration sets none.
func (c *Controller) admissionFor(m clusters.Member) podmeta.Admission {
	a, _ := podmeta.ParseAdmission(m.Spec.Annotations)
	if a.PodSecurity == "" {
		a.PodSecurity = psapi.Level(c.opts.PodSecurity)
	}
	if claims, cluster := c.opts.Claims, m.Cluster(); claims != nil {
		a.ClaimProvisioned = func(ns, name string) bool { return claims.Provisioned(cluster, ns, name) }
	}
	return a
}

// policyFor is the member's stale-eviction policy.
func (c *Controller) policyFor(m clusters.Member) podmeta.Policy {
	if v, ok := m.Spec.Annotations[podmeta.AnnotationStaleEvictionPolicy]; ok {
		if p, err := podmeta.ParsePolicy(v); err == nil {
			return p
		}
	}
	return c.opts.Policy
}

// reconcile gathers decide's input for one pod name from the caches (and,
// for the few facts a cache cannot vouch for, live reads), decides, and
// carries out the plan. Gathering writes nothing.
func (c *Controller) reconcile(ctx context.Context, k key) (runner.Result, error) {
	ms := c.memberSync(k.Cluster)
	if ms == nil || !c.opts.Registry.Acting(k.Cluster) {
		return runner.Result{}, nil // sharded: another replica writes the member's pods now
	}
	m, leaf, host := ms.snapshot()
	if !host.HasSynced() {
		return runner.Result{RequeueAfter: time.Second}, nil
	}
	st := m.Readiness.Status
	// A member confirmed down is decided from the host pod and the record
	// alone (decide trusts no member cache then): after a restart mid-outage
	// the member's caches never sync, and owing and reaping must not wait
	// for them. Otherwise the member cache must have synced.
	down := st.State == hysteresis.NotReady || st.State == hysteresis.Recovering
	memberSynced := m.Runtime.HasSynced()
	if !memberSynced && !down {
		return runner.Result{RequeueAfter: time.Second}, nil
	}
	node, err := c.opts.LeafNodes.Lister().Get(leaf)
	if err != nil || !leafnode.Owns(node, k.Cluster) {
		return runner.Result{RequeueAfter: notOwnedRetry}, nil // not (yet, or no longer) this member's leaf: hands off its pods
	}
	start := c.opts.Clock.Now()
	defer func() {
		metrics.PodSyncDurationVec.WithLabelValues(k.Cluster).Observe(c.opts.Clock.Since(start).Seconds())
		c.updateGauges(k.Cluster, len(host.on(leaf)))
	}()
	// Pending deletes must be read from the store before anything is
	// decided: without them an owed delete would look like an orphan.
	if err := c.ledger.load(ctx, k.Cluster); err != nil {
		c.log.V(1).Info("loading the member's pending deletes", "cluster", k.Cluster, "error", err.Error())
		return runner.Result{RequeueAfter: time.Second}, nil
	}
	var hp *corev1.Pod
	if p := host.get(k.Namespace, k.Name, leaf); p != nil {
		hp = p.DeepCopy()
	}
	var mp *corev1.Pod
	if memberSynced {
		switch p, err := m.Runtime.PodLister().Pods(k.Namespace).Get(k.Name); {
		case err == nil:
			mp = p.DeepCopy()
		case !apierrors.IsNotFound(err):
			return runner.Result{}, err
		}
	}
	records := c.ledger.pendingDeletesOf(k.Cluster, k.Namespace, k.Name)
	in := decide.Input{
		Now: c.opts.Clock.Now(), HostNow: c.opts.HostClock.Now(), Cluster: k.Cluster, State: st, Policy: c.policyFor(m),
		MaxDeferral: c.opts.MaxDeferral, ReapAfter: c.opts.ReapAfter,
		Host: hp, Member: mp, Records: records, HostIdentity: c.opts.Registry.HostIdentity(),
		LeafTaints: node.Spec.Taints,
		Admission:  c.admissionFor(m),
	}
	if hp != nil {
		in.DesiredHash = translate.HostSpecHash(hp)
	}
	in.OtherCopies = c.otherCopies(ctx, k.Cluster, hp, mp, st.State)
	if pods, ok := c.namespacePods(st.State, k.Namespace, hp, mp, records); ok {
		in.Replacements = c.replacements(pods)
		in.IdentityMoved = identityMoved(leaf, records, pods)
	}
	plan := decide.Decide(in)
	x := &execution{c: c, ms: ms, m: m, leaf: leaf, node: node, key: k, hp: hp, mp: mp}
	return x.run(ctx, plan)
}

// updateGauges sets the synced-pod and pending-delete gauges of a member.
func (c *Controller) updateGauges(cluster string, hostPods int) {
	metrics.SyncedPodsVec.WithLabelValues(cluster).Set(float64(hostPods))
	counts := map[deletes.DeleteKind]int{}
	for _, d := range c.ledger.pendingDeletes(cluster) {
		counts[d.Kind]++
	}
	for kind, label := range map[deletes.DeleteKind]string{deletes.Owed: "owed", deletes.Deferred: "deferred", deletes.Retained: "retained"} {
		metrics.PendingDeletesVec.WithLabelValues(cluster, label).Set(float64(counts[kind]))
	}
}

// namespacePods returns the host pods of the namespace (on any node) when
// a deferred delete may need them: a Ready member's pending deletes of this
// name, or a deletion decide may defer (a host pod evicted, an orphan
// member pod). false: not needed, or the namespace's informer has not
// synced yet (the deferral looks again at its next poll).
func (c *Controller) namespacePods(st hysteresis.State, namespace string, hp, mp *corev1.Pod, records []deletes.PendingDelete) ([]*corev1.Pod, bool) {
	evicted := hp != nil && hp.DeletionTimestamp != nil && podmeta.IsEvictionCause(podmeta.CauseOf(hp))
	orphan := hp == nil && mp != nil
	if st != hysteresis.Ready || (len(records) == 0 && !evicted && !orphan) {
		return nil, false
	}
	return c.nsWatch.Pods(namespace)
}

// replacements is decide's view of a namespace's possible replacements.
func (c *Controller) replacements(pods []*corev1.Pod) *decide.Replacements {
	c.assignMu.Lock()
	defer c.assignMu.Unlock()
	rs := &decide.Replacements{Pods: pods, Assigned: c.assignedReplacements(), Pending: map[string]bool{}}
	for _, m := range c.opts.Registry.Members() {
		for _, d := range c.ledger.pendingDeletes(m.Cluster()) {
			rs.Pending[d.HostUID] = true
		}
	}
	return rs
}

// deferredNamespaceChanged: a host pod changed in a namespace with
// deferred deletes; they look at their replacements again now.
func (c *Controller) deferredNamespaceChanged(namespace string) {
	c.members.Each(func(cluster string, ms *memberSync) {
		for _, r := range c.ledger.pendingDeletes(cluster) {
			if r.Kind == deletes.Deferred && r.Namespace == namespace {
				ms.queue.Add(key{cluster, r.Namespace, r.Name})
			}
		}
	})
}

// assignedReplacements maps the replacements bound to pending deletes (in
// every member: one host pod replaces one deleted pod) to the host UID of
// their delete. assignMu must be held.
func (c *Controller) assignedReplacements() map[string]string {
	out := map[string]string{}
	for _, m := range c.opts.Registry.Members() {
		for _, d := range c.ledger.pendingDeletes(m.Cluster()) {
			if d.Replacement != "" {
				out[d.Replacement] = d.HostUID
			}
		}
	}
	return out
}

// notOwnedRetry: how soon pods bound to a Node that is not (yet) the
// member's leaf are looked at again.
const notOwnedRetry = 5 * time.Second

// Look-again periods of execution, as decide's for the same waits.
const (
	// memberChangedRetry: the member pod changed since the decision.
	memberChangedRetry = time.Second
	// namespaceConflictRetry: a member namespace of that name is not
	// leafsync's.
	namespaceConflictRetry = 30 * time.Second
)

// member write retries: short, so that a worker is not held while a
// member is unreachable (the queue retries with backoff).
var memberRetry = member.RetryOptions{InitialInterval: 200 * time.Millisecond, MaxInterval: 2 * time.Second, MaxElapsedTime: 5 * time.Second}
