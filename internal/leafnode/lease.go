package leafnode

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/leafsync/leafsync/internal/retry"
)

// Heartbeat renews a leaf's Lease in kube-node-lease, as a kubelet renews
// its node's. It renews whenever the engine's decision (SetRenewing) says
// so and never looks at whether the member answered the last probe.
//
// A slow host is the classic cause of nodes flickering NotReady, so each
// renewal has its own timeout, a failed renewal is retried at once with
// jitter until the next one is due, and the lag between the intended and
// the achieved renewal is reported.
//
// Like a kubelet's, a renewal is an Update at the Lease's resourceVersion
// as this Heartbeat last wrote it (or read it afresh), so that a renewal of
// a writer that lost the leaf (sharded: a replica paused after its check
// and resumed after the member's new writer renewed) is refused; see Renew.
//
// It is not k8s.io/component-helpers/apimachinery/lease, the kubelet's
// lease controller: that one renews on a fixed timer with no way to skip a
// renewal (the engine's decision would have to stop and restart it at every
// transition), and retries with a backoff bounded only by its context, not
// by the next renewal's due time.
type Heartbeat struct {
	Client kubernetes.Interface
	// Cluster the leaf stands for: the Lease of a Node that is not its leaf
	// is never renewed (a renewed Lease would hide a dead node from KCM).
	Cluster string
	// Owned, if set, tells from a cache whether the leaf Node is the
	// cluster's (sharded: and whether this replica writes the member);
	// without it Renew reads the Node. Renew asks it again after every
	// fresh read of the Lease.
	Owned func() bool
	// Name of the leaf Node and its Lease.
	Name string
	// Interval between renewals (kubelet: 10s).
	Interval time.Duration
	// Duration written into the Lease (kubelet: 40s).
	Duration time.Duration
	// Timeout of one renewal request.
	Timeout time.Duration
	// OnRenew reports each achieved renewal's lag behind schedule, or the
	// error that ended a round of retries. May be nil.
	OnRenew func(lag time.Duration, err error)
	Log     logr.Logger
	// Clock schedules the renewals (nil: the real clock).
	Clock clock.Clock

	lease    *coordinationv1.Lease // as last renewed or read afresh; nil: read it before renewing
	renewing atomic.Bool
}

// SetRenewing takes the engine's decision, pushed by the leaf with each
// one: Ready or Suspect (cordoned or not) renews. A new Heartbeat does not
// renew until told to.
func (h *Heartbeat) SetRenewing(renew bool) { h.renewing.Store(renew) }

func (h *Heartbeat) clock() clock.Clock {
	if h.Clock != nil {
		return h.Clock
	}
	return clock.RealClock{}
}

// Run renews until ctx ends.
func (h *Heartbeat) Run(ctx context.Context) {
	clk := h.clock()
	due := clk.Now()
	for {
		if h.renewing.Load() && (h.Owned == nil || h.Owned()) {
			h.renewUntil(ctx, due, due.Add(h.Interval))
		}
		due = due.Add(h.Interval)
		if now := clk.Now(); due.Before(now) {
			due = now // a renewal round overran; do not try to catch up in a burst
		}
		select {
		case <-ctx.Done():
			return
		case <-clk.After(due.Sub(clk.Now())):
		}
	}
}

// renewRetries spaces the retries of one renewal until the next one is due
// (the elapsed-time bound, on the Heartbeat's clock): from 50ms to 500ms,
// doubling, each up to three times as long with jitter (100ms to 1s on
// average), as a random factor of ±50% around twice those.
func (h *Heartbeat) renewRetries(until time.Duration) backoff.BackOff {
	return backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(100*time.Millisecond), backoff.WithMultiplier(2),
		backoff.WithMaxInterval(time.Second), backoff.WithRandomizationFactor(0.5),
		// 0 would mean no bound; a round that starts at its deadline tries once.
		backoff.WithMaxElapsedTime(max(until, time.Nanosecond)),
		backoff.WithClockProvider(h.clock()))
}

// renewUntil tries to renew, retrying with jitter until it succeeds or the
// next try would fall after the next renewal's due time.
func (h *Heartbeat) renewUntil(ctx context.Context, due, next time.Time) {
	clk := h.clock()
	err := retry.Notify(ctx, clk, h.renewRetries(next.Sub(clk.Now())), func() error { return h.Renew(ctx) },
		func(err error, in time.Duration) {
			h.Log.V(1).Info("leaf lease renewal failed; retrying", "leaf", h.Name, "error", err.Error(), "in", in)
		})
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		h.Log.Error(err, "leaf lease renewal failed; retrying at the next interval", "leaf", h.Name)
	}
	if h.OnRenew != nil {
		h.OnRenew(clk.Since(due), err)
	}
}

// Renew sets the Lease's renewTime to now, creating the Lease if needed.
//
// The renewal is an Update at the resourceVersion this Heartbeat last
// wrote or read from the API server (never a cache): a Lease renewed by
// another writer since (the member's new writer), renewed by a slow
// previous renewal that timed out, replaced, or gone fails it. Then the
// Lease is read again, Owned asked again, and the renewal tried once more
// only if it still may. In steady state a renewal is one request. An Update
// never creates a Lease: one is only ever made by Create, after its Node
// was checked. Renew is not for concurrent use (Run calls it).
func (h *Heartbeat) Renew(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, h.Timeout)
	defer cancel()
	if h.Owned != nil && !h.Owned() {
		return fmt.Errorf("%w: the Node %s is not in the cache of the cluster's leaves", errNotOwned, h.Name)
	}
	if h.Owned == nil {
		node, err := h.Client.CoreV1().Nodes().Get(ctx, h.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil // no leaf yet: no Lease
		}
		if err != nil {
			return err
		}
		if !Owns(node, h.Cluster) {
			return notOwned(node, h.Cluster)
		}
	}
	now := metav1.NewMicroTime(h.clock().Now())
	if h.lease != nil {
		err := h.update(ctx, now)
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return err
		}
		h.lease = nil
	}
	lease, err := h.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, h.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return h.create(ctx, now)
	}
	if err != nil {
		return err
	}
	if h.Owned != nil && !h.Owned() {
		return fmt.Errorf("%w: the Node %s is not in the cache of the cluster's leaves", errNotOwned, h.Name)
	}
	h.lease = lease
	return h.update(ctx, now)
}

func (h *Heartbeat) update(ctx context.Context, now metav1.MicroTime) error {
	lease := h.lease.DeepCopy()
	// The label too: a Lease made by a leafsync from before the chart's
	// node fence has none, and gets it at its first renewal.
	if lease.Labels == nil {
		lease.Labels = map[string]string{}
	}
	lease.Labels[LabelCluster] = h.Cluster
	lease.Spec.HolderIdentity = ptr.To(h.Name)
	lease.Spec.LeaseDurationSeconds = ptr.To(int32(h.Duration / time.Second))
	lease.Spec.RenewTime = &now
	renewed, err := h.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Update(ctx, lease, metav1.UpdateOptions{FieldManager: fieldManager})
	if err != nil {
		return err
	}
	h.lease = renewed
	return nil
}

// create makes the leaf's Lease, renewed at now. Like a kubelet's, the
// Lease is owned by its Node, so it goes with it; no Node yet (the member
// was never reached), no Lease. It carries the leaf's label
// leafsync.io/cluster, as its Node does: the chart's node fence lets
// leafsync write only Leases so labelled, and a kubelet's carry none.
func (h *Heartbeat) create(ctx context.Context, now metav1.MicroTime) error {
	node, err := h.Client.CoreV1().Nodes().Get(ctx, h.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !Owns(node, h.Cluster) {
		return notOwned(node, h.Cluster)
	}
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name: h.Name, Namespace: corev1.NamespaceNodeLease,
			Labels:          map[string]string{LabelCluster: h.Cluster},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}},
		},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(h.Name),
			LeaseDurationSeconds: ptr.To(int32(h.Duration / time.Second)),
			RenewTime:            &now,
		},
	}
	created, err := h.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(ctx, lease, metav1.CreateOptions{FieldManager: fieldManager})
	if err != nil {
		return err
	}
	h.lease = created
	return nil
}
