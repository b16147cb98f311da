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
	"k8s.io/apimachinery/pkg/types"
	coordinationv1ac "k8s.io/client-go/applyconfigurations/coordination/v1"
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
// It is not k8s.io/component-helpers/apimachinery/lease, the kubelet's
// lease controller: that one renews on a fixed timer with no way to skip a
// renewal (the engine's decision would have to stop and restart it at every
// transition), renews by a read-modify-write Update that a slow previous
// renewal turns into a conflict and a re-read, and retries with a backoff
// bounded only by its context, not by the next renewal's due time.
type Heartbeat struct {
	Client kubernetes.Interface
	// Cluster the leaf stands for: the Lease of a Node that is not its leaf
	// is never renewed (a renewed Lease would hide a dead node from KCM).
	Cluster string
	// Owned, if set, tells from a cache whether the leaf Node is the
	// cluster's; without it (or when it says yes) Renew reads the Node.
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

	leaseUID types.UID // of the Lease last seen; "" until it is looked up
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
// The renewal is a server-side apply of the Lease's spec, which leafsync
// alone writes. It carries no resourceVersion, so it never fails on a
// conflict with a previous, slow renewal. It does carry the Lease's UID, so
// it never creates a Lease: a Lease that is gone, or was replaced, fails it
// and is looked up again, and a Lease is only ever made by Create, after
// its Node was checked. Renew is not for concurrent use (Run calls it).
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
	if h.leaseUID != "" {
		err := h.apply(ctx, now)
		if !apierrors.IsConflict(err) && !apierrors.IsInvalid(err) {
			return err
		}
		h.leaseUID = "" // the Lease is gone (Conflict) or was replaced (Invalid: a UID is immutable)
	}
	lease, err := h.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, h.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return h.create(ctx, now)
	}
	if err != nil {
		return err
	}
	h.leaseUID = lease.UID
	return h.apply(ctx, now)
}

func (h *Heartbeat) apply(ctx context.Context, now metav1.MicroTime) error {
	// The label too: a Lease made by a leafsync from before the chart's
	// node fence has none, and gets it at its first renewal.
	lease := coordinationv1ac.Lease(h.Name, corev1.NamespaceNodeLease).WithUID(h.leaseUID).
		WithLabels(map[string]string{LabelCluster: h.Cluster}).
		WithSpec(coordinationv1ac.LeaseSpec().
			WithHolderIdentity(h.Name).
			WithLeaseDurationSeconds(int32(h.Duration / time.Second)).
			WithRenewTime(now))
	_, err := h.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Apply(ctx, lease, metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
	return err
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
	h.leaseUID = created.UID
	return nil
}
