package syncer

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/leafsync/leafsync/internal/leafnode"
	"github.com/leafsync/leafsync/internal/syncer/clusters"
	"github.com/leafsync/leafsync/internal/syncer/config"
	"github.com/leafsync/leafsync/internal/syncer/guard"
	"github.com/leafsync/leafsync/internal/syncer/metrics"
)

// setupEvictionGuard returns the readiness records the leaves controller
// keeps for the eviction guard (nil when disabled), keeps the user's
// NoExecute taints of each leaf in its record, deletes a member's record
// on deregistration, and ensures the policy and its binding when this
// replica becomes leader (sharded: on every replica, which elects no
// leader; the policy is fleet-wide, and ensuring it is idempotent).
func setupEvictionGuard(mgr manager.Manager, cfg config.Config, reg *clusters.Registry, nodes coreinformers.NodeInformer, clk clock.PassiveClock) (*guard.Records, error) {
	log := mgr.GetLogger().WithName("eviction-guard")
	g := cfg.EvictionGuard
	if !g.Enabled {
		log.Info("eviction guard disabled (evictionGuard.enabled: false): KCM's evictions of a leaf's pods go through whenever its Lease lapses")
		return nil, nil
	}
	host, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return nil, fmt.Errorf("host client for the eviction guard: %w", err)
	}
	records := &guard.Records{Client: host, Namespace: cfg.Namespace, Clock: clk}
	// A leaf's taints change by a user's hand; a failed write is retried
	// on the leaf's next update (its status is written every few seconds).
	userTaints := func(obj any) {
		n, ok := obj.(*corev1.Node)
		// Sharded: the member's writer keeps its record.
		if !ok || n.Labels[leafnode.LabelCluster] == "" || !reg.Acting(n.Labels[leafnode.LabelCluster]) {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := records.SetUserTaints(ctx, n.Labels[leafnode.LabelCluster], n.Name, n.Spec.Taints); err != nil {
			log.Error(err, "recording the leaf's NoExecute taints for the eviction guard", "leaf", n.Name)
		}
	}
	if _, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    userTaints,
		UpdateFunc: func(_, obj any) { userTaints(obj) },
	}); err != nil {
		return nil, err
	}
	reg.OnDeregister("eviction-guard", func(ctx context.Context, d clusters.Deregistration) error {
		return records.Forget(ctx, d.Cluster)
	})
	return records, mgr.Add(leaderRunnable(func(ctx context.Context) error {
		_ = wait.PollUntilContextCancel(ctx, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			done, err := guard.Ensure(cctx, host, g.Identities, cfg.Namespace)
			switch {
			case apierrors.IsForbidden(err):
				metrics.EvictionGuardGauge.Set(0)
				log.Error(err, "eviction guard NOT active: leafsync may not install or update its ValidatingAdmissionPolicy; install it with the Helm chart, or grant leafsync get, create and update on validatingadmissionpolicies and validatingadmissionpolicybindings named "+guard.Name+". Until then KCM evicts a healthy member's pods whenever leafsync cannot renew the leaf's Lease.")
				return true, nil
			case err != nil:
				metrics.EvictionGuardGauge.Set(0)
				log.Error(err, "eviction guard not active yet: ensuring its policy failed; retrying in 30s")
				return false, nil
			}
			metrics.EvictionGuardGauge.Set(1)
			log.Info("eviction guard active", "policy", guard.Name, "identities", g.Identities, "done", done)
			return true, nil
		})
		return nil
	}))
}

// leaderRunnable runs f once on the leader.
type leaderRunnable func(context.Context) error

func (f leaderRunnable) Start(ctx context.Context) error { return f(ctx) }
func (leaderRunnable) NeedLeaderElection() bool          { return true }
