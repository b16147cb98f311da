package leafnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	nodeutil "k8s.io/component-helpers/node/util"
	"k8s.io/utils/clock"
)

// Writer applies a Desired state to the leaf Node in the host. It touches
// only what leafsync owns: its labels, its taints (read-modify-write with
// optimistic concurrency, since a patch of the taint list would replace
// KCM's taints), and its status fields (a strategic-merge patch keyed by
// condition type). It writes only when something differs, or when a
// condition heartbeat is due.
//
// While the leaf is not Ready, the Ready condition is written once (False,
// with why); once it is not True — leafsync's False, or KCM's Unknown after
// the Lease lapsed — KCM owns the conditions until the leaf is Ready again:
// writing them back would undo KCM's Unknown every monitor period.
//
// Every write is fenced by version: it carries the resourceVersion of the
// leaf as this writer last wrote it, or read it from the API server (at
// its first write, and after a conflict), never one from a cache. A write
// of a writer that lost the leaf to another (sharded: a replica paused
// after its check and resumed after the member's new writer wrote) is
// refused with a conflict; the writer reads the leaf again, asks Allowed,
// and writes once more only if it still may. In steady state this costs
// nothing; a conflict (KCM's taints, another writer) costs one GET.
type Writer struct {
	Client kubernetes.Interface
	// Cluster is the member the leaf stands for: a Node of the leaf's name
	// without label leafsync.io/cluster=<Cluster> is not written or
	// deleted (errNotOwned).
	Cluster string
	// Nodes reads the leaf from an informer cache (nil: a GET per Sync).
	// A stale read costs at most a conflict and a re-read.
	Nodes corelisters.NodeLister
	Name  string
	// HeartbeatEvery refreshes the conditions' lastHeartbeatTime even when
	// nothing changed (the Lease is the real heartbeat; this is for people).
	HeartbeatEvery time.Duration
	// AllocatableEvery: a change of the leaf's resources that comes only
	// from the member's own pods coming and going is written at most this
	// often; a change of the member's nodes, conditions or node info at
	// once. A kubelet reports its status every 10s; without this, each
	// member pod created or deleted was a write of every leaf of that
	// member. Zero: at once.
	AllocatableEvery time.Duration
	// Clock reads the time (nil: the real clock).
	Clock clock.PassiveClock
	// Allowed, if set, says whether this writer may still write the leaf
	// (sharded: whether its replica acts on the member). The caller checks
	// before Sync; Sync asks again after every fresh read, since a write
	// refused for a stale version may come from a writer that lost the
	// member meanwhile (nil: always).
	Allowed func() bool

	// Deferred is, after a Sync that held back an allocatable-only change,
	// how long until it may be written (0: nothing held back). The caller
	// syncs again by then.
	Deferred time.Duration

	// version is the leaf's resourceVersion as this writer last wrote it
	// or read it afresh ("": read it afresh before the next write).
	version         string
	lastHeartbeat   time.Time
	lastStatusWrite time.Time
	lastNodes       corev1.ResourceList // Desired.nodes at the last status write
	// Writes counts API writes, for metrics and write-storm tests.
	Writes int
}

// Sync creates the leaf if missing and brings it to the desired state.
func (w *Writer) Sync(ctx context.Context, d Desired) error {
	now := w.now()
	node, err := w.get(ctx)
	if apierrors.IsNotFound(err) {
		if d.Capacity == nil {
			// A member never seen yet gets no leaf: an empty, Ready node
			// would only confuse people and schedulers.
			return nil
		}
		node, err = w.create(ctx, d)
	}
	if err == nil && node != nil && w.version == "" {
		node, err = w.reread(ctx) // this writer's first write
	}
	if err != nil || node == nil {
		return err
	}
	err = w.sync(ctx, node, d, now)
	if !apierrors.IsConflict(err) {
		return err
	}
	// Someone wrote the leaf since this writer last did: KCM, or the
	// member's new writer.
	if node, err = w.reread(ctx); err != nil || node == nil {
		return err
	}
	return w.sync(ctx, node, d, now)
}

// reread reads the leaf from the API server, the version the next write
// carries, and asks Allowed; nil (no error) when this writer may no longer
// write.
func (w *Writer) reread(ctx context.Context) (*corev1.Node, error) {
	w.version = ""
	node, err := w.Client.CoreV1().Nodes().Get(ctx, w.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if w.Allowed != nil && !w.Allowed() {
		return nil, nil
	}
	w.version = node.ResourceVersion
	return node, nil
}

// sync writes what differs between node and d, each write at w.version.
func (w *Writer) sync(ctx context.Context, node *corev1.Node, d Desired, now time.Time) error {
	if !Owns(node, w.Cluster) {
		return notOwned(node, w.Cluster)
	}
	node, err := w.syncMeta(ctx, node, d)
	if err != nil {
		return err
	}
	if !d.Ready && readySettled(node) {
		d.Conditions = nil // KCM owns them while the leaf is not Ready
	}
	w.Deferred = 0
	heartbeatDue := d.Ready && now.Sub(w.lastHeartbeat) >= w.HeartbeatEvery
	if !heartbeatDue && statusMatches(node, d) {
		return nil
	}
	if !heartbeatDue && w.AllocatableEvery > 0 && w.lastNodes != nil && apiequality.Semantic.DeepEqual(d.nodes, w.lastNodes) && resourcesOnly(node, d) {
		if wait := w.AllocatableEvery - now.Sub(w.lastStatusWrite); wait > 0 {
			w.Deferred = wait
			return nil
		}
	}
	// A Ready leaf's status write always carries a fresh heartbeat: KCM
	// takes a Ready condition with an old lastHeartbeatTime (say, the one
	// from before an outage) as a silent node and marks it Unknown again.
	if err := w.patchStatus(ctx, node, d, now, d.Ready); err != nil {
		return err
	}
	w.lastStatusWrite, w.lastNodes = now, d.nodes
	if d.Ready {
		w.lastHeartbeat = now
	}
	return nil
}

func (w *Writer) get(ctx context.Context) (*corev1.Node, error) {
	if w.Nodes != nil {
		n, err := w.Nodes.Get(w.Name)
		if err != nil {
			return nil, err
		}
		return n.DeepCopy(), nil
	}
	return w.Client.CoreV1().Nodes().Get(ctx, w.Name, metav1.GetOptions{})
}

// readySettled: the leaf's Ready condition exists and is not True.
func readySettled(node *corev1.Node) bool {
	_, c := nodeutil.GetNodeCondition(&node.Status, corev1.NodeReady)
	return c != nil && c.Status != corev1.ConditionTrue
}

func (w *Writer) now() time.Time {
	if w.Clock != nil {
		return w.Clock.Now()
	}
	return clock.RealClock{}.Now()
}

func (w *Writer) create(ctx context.Context, d Desired) (*corev1.Node, error) {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: w.Name, Labels: d.Labels},
		Spec:       corev1.NodeSpec{Taints: d.Taints},
	}
	w.Writes++
	created, err := w.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{FieldManager: fieldManager})
	if apierrors.IsAlreadyExists(err) {
		return w.reread(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("creating leaf node %s: %w", w.Name, err)
	}
	w.version = created.ResourceVersion
	return created, nil
}

// syncMeta makes leafsync's labels and taints present and removes leafsync
// taints that are no longer wanted; other labels and taints are kept. It
// returns the leaf as written (or node, if nothing was).
func (w *Writer) syncMeta(ctx context.Context, node *corev1.Node, d Desired) (*corev1.Node, error) {
	if metaMatches(node, d) {
		return node, nil
	}
	upd := node.DeepCopy()
	if upd.Labels == nil {
		upd.Labels = map[string]string{}
	}
	for k, v := range d.Labels {
		upd.Labels[k] = v
	}
	upd.Spec.Taints = mergeTaints(node.Spec.Taints, d.Taints)
	upd.ResourceVersion = w.version
	w.Writes++
	written, err := w.Client.CoreV1().Nodes().Update(ctx, upd, metav1.UpdateOptions{FieldManager: fieldManager})
	if err != nil {
		return nil, fmt.Errorf("updating leaf node %s: %w", w.Name, err)
	}
	w.version = written.ResourceVersion
	return written, nil
}

func metaMatches(node *corev1.Node, d Desired) bool {
	for k, v := range d.Labels {
		if node.Labels[k] != v {
			return false
		}
	}
	return apiequality.Semantic.DeepEqual(ownedTaints(node.Spec.Taints), ownedTaints(d.Taints))
}

func isOwnedTaint(key string) bool {
	for _, k := range ownedTaintKeys {
		if k == key {
			return true
		}
	}
	return false
}

func ownedTaints(ts []corev1.Taint) []corev1.Taint {
	out := []corev1.Taint{}
	for _, t := range ts {
		if isOwnedTaint(t.Key) {
			t.TimeAdded = nil
			out = append(out, t)
		}
	}
	return out
}

// mergeTaints keeps every taint leafsync does not own, in order, then
// leafsync's wanted taints.
func mergeTaints(cur, want []corev1.Taint) []corev1.Taint {
	out := make([]corev1.Taint, 0, len(cur)+len(want))
	for _, t := range cur {
		if !isOwnedTaint(t.Key) {
			out = append(out, t)
		}
	}
	return append(out, want...)
}

// statusMatches compares what leafsync owns in the status, ignoring
// timestamps.
func statusMatches(node *corev1.Node, d Desired) bool {
	if d.Capacity != nil && (!apiequality.Semantic.DeepEqual(node.Status.Capacity, d.Capacity) ||
		!apiequality.Semantic.DeepEqual(node.Status.Allocatable, d.Allocatable)) {
		return false
	}
	if d.Capacity != nil && (node.Status.NodeInfo.KubeletVersion != d.NodeInfo.KubeletVersion ||
		node.Status.NodeInfo.OperatingSystem != d.NodeInfo.OperatingSystem ||
		node.Status.NodeInfo.Architecture != d.NodeInfo.Architecture ||
		node.Status.NodeInfo.ContainerRuntimeVersion != d.NodeInfo.ContainerRuntimeVersion ||
		!slices.Equal(node.Status.DeclaredFeatures, d.DeclaredFeatures)) {
		return false
	}
	for _, want := range d.Conditions {
		_, got := nodeutil.GetNodeCondition(&node.Status, want.Type)
		if got == nil || got.Status != want.Status || got.Reason != want.Reason || got.Message != want.Message {
			return false
		}
	}
	return true
}

// resourcesOnly: the status differs from d in capacity or allocatable and
// nothing else leafsync writes.
func resourcesOnly(node *corev1.Node, d Desired) bool {
	if d.Capacity == nil {
		return false
	}
	d.Capacity, d.Allocatable = node.Status.Capacity, node.Status.Allocatable
	return statusMatches(node, d)
}

// patchStatus writes leafsync's status fields with a strategic-merge patch:
// conditions merge by type, so conditions of other actors are kept.
//
// It is not a server-side apply, because an apply removes every field its
// manager applied before and leaves out now. While KCM owns the conditions
// (see Writer) leafsync leaves them out: an apply would then remove its last
// Ready=False before KCM marks it Unknown, or the lastHeartbeatTime KCM
// keeps after. And a resource no member node offers any more is removed
// here (null) whoever set it; an apply removes only its own, so a resource
// another actor set would differ from the wanted status on every Sync.
func (w *Writer) patchStatus(ctx context.Context, node *corev1.Node, d Desired, now time.Time, heartbeat bool) error {
	conds := make([]corev1.NodeCondition, 0, len(d.Conditions))
	for _, c := range d.Conditions {
		c.LastHeartbeatTime = metav1.NewTime(now)
		c.LastTransitionTime = metav1.NewTime(now)
		if _, got := nodeutil.GetNodeCondition(&node.Status, c.Type); got != nil {
			if got.Status == c.Status {
				c.LastTransitionTime = got.LastTransitionTime
			}
			if !heartbeat && !got.LastHeartbeatTime.IsZero() {
				c.LastHeartbeatTime = got.LastHeartbeatTime
			}
		}
		conds = append(conds, c)
	}
	status := map[string]any{}
	if len(conds) > 0 {
		status["conditions"] = conds
	}
	if d.Capacity != nil {
		status["nodeInfo"] = map[string]string{
			"kubeletVersion":          d.NodeInfo.KubeletVersion,
			"operatingSystem":         d.NodeInfo.OperatingSystem,
			"architecture":            d.NodeInfo.Architecture,
			"containerRuntimeVersion": d.NodeInfo.ContainerRuntimeVersion,
		}
		status["capacity"] = resourcePatch(d.Capacity, node.Status.Capacity)
		status["allocatable"] = resourcePatch(d.Allocatable, node.Status.Allocatable)
		switch {
		case len(d.DeclaredFeatures) > 0:
			status["declaredFeatures"] = d.DeclaredFeatures
		case len(node.Status.DeclaredFeatures) > 0:
			status["declaredFeatures"] = nil
		}
	}
	// A resourceVersion in a patch is a precondition: a leaf written since
	// (by KCM, or by the member's new writer) fails it with a conflict.
	patch := map[string]any{"metadata": map[string]any{"resourceVersion": w.version}, "status": status}
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	w.Writes++
	written, err := w.Client.CoreV1().Nodes().Patch(ctx, w.Name, types.StrategicMergePatchType, data,
		metav1.PatchOptions{FieldManager: fieldManager}, "status")
	if err != nil {
		return fmt.Errorf("patching status of leaf node %s: %w", w.Name, err)
	}
	w.version = written.ResourceVersion
	return nil
}

// resourcePatch sets every wanted resource and removes (null) those that no
// member node offers any more.
func resourcePatch(want, have corev1.ResourceList) map[string]any {
	m := make(map[string]any, len(want))
	for name, q := range want {
		m[string(name)] = q.String()
	}
	for name := range have {
		if _, ok := want[name]; !ok {
			m[string(name)] = nil
		}
	}
	return m
}

// Delete removes the leaf Node and its Lease (deregistration), only if the
// Node is this cluster's leaf (UID precondition, so a Node recreated in
// between is not deleted). The Lease goes with its Node: it is owned by it
// (garbage collection removes it when the Node goes some other way).
func (w *Writer) Delete(ctx context.Context) error {
	node, err := w.Client.CoreV1().Nodes().Get(ctx, w.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading leaf node %s: %w", w.Name, err)
	}
	if !Owns(node, w.Cluster) {
		return nil // not ours: never deleted, nor its Lease
	}
	err = w.Client.CoreV1().Nodes().Delete(ctx, w.Name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(node.UID))})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting leaf node %s: %w", w.Name, err)
	}
	err = w.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(ctx, w.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting lease of leaf node %s: %w", w.Name, err)
	}
	return nil
}

// errNotOwned: the Node of a leaf's name is not leafsync's leaf of that
// cluster; leafsync does not write, renew or delete it.
var errNotOwned = errors.New("not leafsync's leaf")

// Owns reports whether node is leafsync's leaf of cluster: it carries the
// label leafsync.io/cluster=<cluster> (set when leafsync creates a leaf).
func Owns(node *corev1.Node, cluster string) bool {
	return node != nil && cluster != "" && node.Labels[LabelCluster] == cluster
}

func notOwned(node *corev1.Node, cluster string) error {
	return fmt.Errorf("%w: Node %s exists without label %s=%s; leafsync leaves it alone", errNotOwned, node.Name, LabelCluster, cluster)
}
