package kubeletapi

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/leafsync/leafsync/internal/leafnode"
	"github.com/leafsync/leafsync/internal/runner"
)

// fieldManager owns a leaf's addresses and kubelet endpoint (server-side
// apply), apart from what the leaf writer owns.
const fieldManager = "leafsync-kubeletapi"

// Advertiser writes the kubelet API's address and port on every leaf:
// status.addresses (one InternalIP) and
// status.daemonEndpoints.kubeletEndpoint.port, which the host's API server
// uses to reach a node's kubelet. It runs on the leader, and the address
// is the leader's own (its pod IP): a new leader rewrites every leaf when
// it starts, as the informer replays them.
type Advertiser struct {
	Host     kubernetes.Interface
	Informer cache.SharedIndexInformer // the host's leaf Nodes
	Address  string
	Port     int32
	Logger   logr.Logger
	Clock    clock.WithTicker // the queue's backoff (real when nil)
	// Acting (nil: unsharded, the leader advertises on every leaf) says
	// whether this replica acts on a member: sharded, each replica
	// advertises itself on the leaves of the members it acts on.
	Acting func(cluster string) bool
}

// NeedLeaderElection: only the leader advertises (its own address);
// sharded, every replica advertises on its members' leaves.
func (a *Advertiser) NeedLeaderElection() bool { return a.Acting == nil }

// Start writes every leaf as it is added or changed, until ctx ends.
func (a *Advertiser) Start(ctx context.Context) error {
	r := runner.New(runner.Func[string](a.reconcile), runner.Options[string]{
		Name: "kubeletapi-advertise", Workers: 1, Clock: a.Clock, Logger: a.Logger.WithName("kubeletapi"),
	})
	enqueue := func(obj any) {
		if n, ok := obj.(*corev1.Node); ok && n.Labels[leafnode.LabelCluster] != "" && !a.advertised(n) &&
			(a.Acting == nil || a.Acting(n.Labels[leafnode.LabelCluster])) {
			r.Add(n.Name)
		}
	}
	reg, err := a.Informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	})
	if err != nil {
		return err
	}
	defer func() { _ = a.Informer.RemoveEventHandler(reg) }()
	r.Run(ctx)
	return nil
}

// reconcile applies the address and port on one leaf.
func (a *Advertiser) reconcile(ctx context.Context, name string) (runner.Result, error) {
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := a.Host.CoreV1().Nodes().ApplyStatus(actx, a.apply(name), metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
	// A leaf deleted meanwhile (deregistered) has nothing to advertise:
	// retrying it would go on for ever.
	if apierrors.IsNotFound(err) {
		return runner.Result{}, nil
	}
	if err != nil {
		return runner.Result{}, fmt.Errorf("advertising the kubelet API on leaf %s: %w", name, err)
	}
	return runner.Result{}, nil
}

// advertised reports whether the leaf already shows this address and port.
func (a *Advertiser) advertised(n *corev1.Node) bool {
	if n.Status.DaemonEndpoints.KubeletEndpoint.Port != a.Port {
		return false
	}
	for _, ad := range n.Status.Addresses {
		if ad.Type == corev1.NodeInternalIP && ad.Address == a.Address {
			return true
		}
	}
	return false
}

func (a *Advertiser) apply(name string) *corev1ac.NodeApplyConfiguration {
	return corev1ac.Node(name).WithStatus(corev1ac.NodeStatus().
		WithAddresses(corev1ac.NodeAddress().WithType(corev1.NodeInternalIP).WithAddress(a.Address)).
		WithDaemonEndpoints(corev1ac.NodeDaemonEndpoints().WithKubeletEndpoint(corev1ac.DaemonEndpoint().WithPort(a.Port))))
}
