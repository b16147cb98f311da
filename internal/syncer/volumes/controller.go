package volumes

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/utils/clock"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/runner"
	"github.com/leafsync/leafsync/internal/syncer/clusters"
	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
	"github.com/leafsync/leafsync/internal/syncer/registration"
)

// fieldManager writes stand-ins and member claims; capacityManager the
// stand-in's capacity alone, so that applying it never drops the fields
// fieldManager owns.
const (
	fieldManager    = "leafsync"
	capacityManager = "leafsync-capacity"
)

// Options configure the Controller.
type Options struct {
	// Host is a client of the host cluster.
	Host kubernetes.Interface
	// Registry gives the members (their leaves, clients, readiness and
	// storage class maps) and the host identity.
	Registry *clusters.Registry
	// Recorder records Events on host claims and pods (may be nil).
	Recorder events.EventRecorder
	Logger   logr.Logger
	// Clock times the queue (the real clock when nil).
	Clock clock.WithTicker
	// Resync: a bound claim's member claim is looked at again this often
	// (status back, cleanup once its last member pod is gone).
	Resync time.Duration
}

// key is a host claim (Namespace, Name) or a stand-in (PV).
type key struct {
	PV              string
	Namespace, Name string
}

// Controller provisions host claims into members. It is a
// manager.Runnable that needs leader election.
type Controller struct {
	opts    Options
	log     logr.Logger
	queue   *runner.Runner[key]
	factory informers.SharedInformerFactory
	claims  corelisters.PersistentVolumeClaimLister
	pvs     corelisters.PersistentVolumeLister
	synced  []cache.InformerSynced
}

// New returns a Controller; Start runs it.
func New(o Options) *Controller {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Resync <= 0 {
		o.Resync = 30 * time.Second
	}
	c := &Controller{opts: o, log: o.Logger.WithName("volumes")}
	c.queue = runner.New[key](runner.Func[key](c.reconcile), runner.Options[key]{
		Name: "volumes", Workers: 2, MinBackoff: 200 * time.Millisecond, MaxBackoff: 30 * time.Second,
		Clock: o.Clock, Logger: c.log,
	})
	c.factory = informers.NewSharedInformerFactory(o.Host, 0)
	claims := c.factory.Core().V1().PersistentVolumeClaims()
	pvs := c.factory.Core().V1().PersistentVolumes()
	c.claims, c.pvs = claims.Lister(), pvs.Lister()
	c.synced = []cache.InformerSynced{claims.Informer().HasSynced, pvs.Informer().HasSynced}
	_, _ = claims.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.onClaim,
		UpdateFunc: func(_, o any) { c.onClaim(o) },
		DeleteFunc: c.onClaim,
	})
	_, _ = pvs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.onPV,
		UpdateFunc: func(_, o any) { c.onPV(o) },
		DeleteFunc: c.onPV,
	})
	return c
}

// NeedLeaderElection: only the leader provisions; sharded, every replica
// provisions for the leaves of the members it acts on.
func (c *Controller) NeedLeaderElection() bool { return !c.opts.Registry.Sharded() }

// Start runs the informers and the queue until ctx ends.
func (c *Controller) Start(ctx context.Context) error {
	c.factory.Start(ctx.Done())
	defer c.factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return nil
	}
	c.queue.Run(ctx)
	return nil
}

func (c *Controller) onClaim(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if cl, ok := obj.(*corev1.PersistentVolumeClaim); ok {
		c.queue.Add(key{Namespace: cl.Namespace, Name: cl.Name})
		if pv, err := c.pvs.Get(standInName(cl.UID)); err == nil {
			c.queue.Add(key{PV: pv.Name})
		}
	}
}

func (c *Controller) onPV(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if pv, ok := obj.(*corev1.PersistentVolume); ok && isStandIn(pv, "", c.host()) {
		c.queue.Add(key{PV: pv.Name})
	}
}

func (c *Controller) host() string { return c.opts.Registry.HostIdentity() }

func (c *Controller) reconcile(ctx context.Context, k key) (runner.Result, error) {
	if k.PV != "" {
		return c.follow(ctx, k.PV)
	}
	return c.provision(ctx, k.Namespace, k.Name)
}

// memberOfLeaf is the member whose leaf is node.
func (c *Controller) memberOfLeaf(node string) (clusters.Member, bool) {
	for _, m := range c.opts.Registry.Members() {
		if m.Spec.LeafName == node && m.Runtime != nil && c.opts.Registry.Acting(m.Cluster()) {
			return m, true
		}
	}
	return clusters.Member{}, false
}

// provision acts on a host claim of leafsync's provisioner that the host
// scheduler placed on a leaf: the stand-in, or a refusal.
func (c *Controller) provision(ctx context.Context, ns, name string) (runner.Result, error) {
	cl, err := c.claims.PersistentVolumeClaims(ns).Get(name)
	if apierrors.IsNotFound(err) || (err == nil && (cl.Spec.VolumeName != "" || cl.DeletionTimestamp != nil)) {
		return runner.Result{}, nil
	}
	if err != nil {
		return runner.Result{}, err
	}
	if cl.Annotations[storagehelpers.AnnStorageProvisioner] != Provisioner && cl.Annotations[storagehelpers.AnnBetaStorageProvisioner] != Provisioner {
		return runner.Result{}, nil
	}
	m, ok := c.memberOfLeaf(cl.Annotations[storagehelpers.AnnSelectedNode])
	if !ok {
		return runner.Result{}, nil // not placed, or not on a leaf of a member leafsync serves
	}
	if _, err := c.pvs.Get(standInName(cl.UID)); err == nil {
		return runner.Result{}, nil // provisioned: the host PV controller binds
	}
	mem, err := c.memberClaim(ctx, m, ns, name)
	if err != nil {
		return runner.Result{}, err
	}
	p := decideProvision(cl, m.Cluster(), registration.StorageClasses(m.Spec.Annotations), mem)
	switch p.action {
	case refuse:
		c.eventClaimAndPods(ctx, cl, p)
		return runner.Result{RequeueAfter: time.Minute}, nil // the registration or the member may change
	case createStandIn:
		a := standIn(cl, m.Cluster(), c.host(), m.Spec.LeafName, p.MemberClass)
		if _, err := c.opts.Host.CoreV1().PersistentVolumes().Apply(ctx, a, metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
			return runner.Result{}, err
		}
		c.log.Info("provisioned host claim into member", "claim", ns+"/"+name, "cluster", m.Cluster(), "standIn", *a.Name, "memberClass", p.MemberClass)
	}
	return runner.Result{}, nil
}

// follow keeps a stand-in in step with its member claim: capacity back,
// member claim states reported, cleanup after the host claim is gone.
func (c *Controller) follow(ctx context.Context, name string) (runner.Result, error) {
	pv, err := c.pvs.Get(name)
	if apierrors.IsNotFound(err) {
		return runner.Result{}, nil
	}
	if err != nil || !isStandIn(pv, "", c.host()) || pv.Spec.ClaimRef == nil {
		return runner.Result{}, err
	}
	ref := pv.Spec.ClaimRef
	cl, err := c.claims.PersistentVolumeClaims(ref.Namespace).Get(ref.Name)
	if apierrors.IsNotFound(err) {
		cl, err = nil, nil
	}
	if err != nil {
		return runner.Result{}, err
	}
	cluster := pv.Labels[podmeta.LabelCluster]
	if !c.opts.Registry.Acting(cluster) {
		return runner.Result{RequeueAfter: c.opts.Resync}, nil // sharded: the member's writer follows it
	}
	m, ok := c.opts.Registry.Member(cluster)
	if !ok || m.Runtime == nil || m.Readiness.Status.State == hysteresis.NotReady {
		// The data stays in the member: pods of the claim wait for it.
		if !released(pv, cl) {
			c.heldPods(ctx, cl, pv, cluster)
		}
		return runner.Result{RequeueAfter: c.opts.Resync}, nil
	}
	mem, err := c.memberClaim(ctx, m, ref.Namespace, ref.Name)
	if err != nil {
		return runner.Result{}, err
	}
	if mc := mem.Claim; mc != nil && mem.Ours && (released(pv, cl) || mc.Status.Phase == corev1.ClaimPending) {
		if mem.InUse, err = c.inUse(ctx, m, mc); err != nil {
			return runner.Result{}, err
		}
	}
	p := decideFollow(pv, cl, cluster, mem)
	hosts := c.opts.Host.CoreV1().PersistentVolumes()
	switch p.action {
	case setCapacity:
		opts := metav1.ApplyOptions{FieldManager: capacityManager, Force: true}
		if _, err = hosts.Apply(ctx, standInCapacity(pv.Name, p.Capacity), opts); err == nil {
			_, err = c.opts.Host.CoreV1().PersistentVolumeClaims(cl.Namespace).ApplyStatus(ctx, claimCapacity(cl, p.Capacity), opts)
		}
	case report:
		c.event(cl, p)
	case deleteMemberClaim:
		// Fenced: the claim read, not one made meanwhile of the name.
		mc := mem.Claim
		err = m.Runtime.Client().CoreV1().PersistentVolumeClaims(mc.Namespace).Delete(ctx, mc.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &mc.UID, ResourceVersion: &mc.ResourceVersion}})
		if err == nil || apierrors.IsNotFound(err) {
			c.log.Info("deleted member claim of a deleted host claim", "claim", mc.Namespace+"/"+mc.Name, "cluster", cluster)
			return runner.Result{RequeueAfter: time.Second}, nil
		}
	case deleteStandIn:
		err = hosts.Delete(ctx, pv.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pv.UID}})
		if apierrors.IsNotFound(err) {
			err = nil
		}
		return runner.Result{}, err
	}
	return runner.Result{RequeueAfter: c.opts.Resync}, err
}

// memberClaim reads the member's claim of a host claim's name (a live
// read: whether it is there and whose decides what is made).
func (c *Controller) memberClaim(ctx context.Context, m clusters.Member, ns, name string) (memberState, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	mc, err := m.Runtime.Client().CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return memberState{}, nil
	}
	if err != nil {
		return memberState{}, fmt.Errorf("member %s: %w", m.Cluster(), err)
	}
	return memberState{Claim: mc, Ours: podmeta.OwnedBy(mc.Labels, m.Cluster(), c.host())}, nil
}

// inUse: a member pod (any, not only leafsync's) mounts mc. A live list:
// the member's pod cache keeps only the usage of pods leafsync did not
// create, not their volumes.
func (c *Controller) inUse(ctx context.Context, m clusters.Member, mc *corev1.PersistentVolumeClaim) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pods, err := m.Runtime.Client().CoreV1().Pods(mc.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	for i := range pods.Items {
		if p := &pods.Items[i]; usesClaim(&p.Spec, mc.Name) && !podmeta.IsTerminal(p) {
			return true, nil
		}
	}
	return false, nil
}

func usesClaim(spec *corev1.PodSpec, claim string) bool {
	for _, v := range spec.Volumes {
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim {
			return true
		}
	}
	return false
}

// claimPods are the host pods of cl's namespace that use it.
func (c *Controller) claimPods(ctx context.Context, cl *corev1.PersistentVolumeClaim) []*corev1.Pod {
	list, err := c.opts.Host.CoreV1().Pods(cl.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		c.log.Error(err, "listing the pods of a claim", "claim", cl.Namespace+"/"+cl.Name)
		return nil
	}
	var out []*corev1.Pod
	for i := range list.Items {
		if p := &list.Items[i]; usesClaim(&p.Spec, cl.Name) && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// heldPods: the pods of cl not yet placed wait for the leaf of stand-in pv
// (its nodeAffinity), because the data is in member cluster; they get
// an Event saying so.
func (c *Controller) heldPods(ctx context.Context, cl *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume, cluster string) {
	for _, p := range c.claimPods(ctx, cl) {
		if p.Spec.NodeName != "" {
			continue
		}
		c.record(p, plan{Warning: true, Reason: "VolumeInMember", Message: fmt.Sprintf(
			"claim %s's data lives in member %s (stand-in PV %s pins it to that member's leaf), which is not Ready or no longer registered: the pod can run only there, it is not moved to another leaf and never started on an empty volume; it stays Pending until the member is back, or until the claim is deleted (its data with it)",
			cl.Name, cluster, pv.Name)})
	}
}

// eventClaimAndPods records p on cl and on the pods that use it.
func (c *Controller) eventClaimAndPods(ctx context.Context, cl *corev1.PersistentVolumeClaim, p plan) {
	c.event(cl, p)
	for _, pod := range c.claimPods(ctx, cl) {
		c.record(pod, p)
	}
}

func (c *Controller) event(cl *corev1.PersistentVolumeClaim, p plan) {
	if cl != nil {
		c.record(cl, p)
	}
}

func (c *Controller) record(obj runtime.Object, p plan) {
	if c.opts.Recorder == nil {
		return
	}
	typ := corev1.EventTypeNormal
	if p.Warning {
		typ = corev1.EventTypeWarning
	}
	c.opts.Recorder.Eventf(obj, nil, typ, p.Reason, "decideProvision", "%s", p.Message)
}

// errNotSynced: the host claims are not known yet.
var errNotSynced = errors.New("host claims and volumes not synced yet")
