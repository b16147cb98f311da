package syncer

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/leafsync/leafsync/internal/syncer/config"
	"github.com/leafsync/leafsync/internal/syncer/registration"
	"github.com/leafsync/leafsync/internal/syncer/shard"
)

// setupSharding adds this replica's Sharder to the manager when members
// are sharded across replicas (sharding.enabled), nil otherwise. The
// members are the cluster names of the registration Secrets in the
// manager's cache; a Secret added, relabelled or deleted recomputes the
// assignment. onChange hears of members whose assignment or writer may
// have changed (nil: all).
func setupSharding(mgr manager.Manager, cfg config.Config, clk clock.WithTicker, onChange func(clusters []string)) (*shard.Sharder, error) {
	sc := cfg.Sharding
	if !sc.Enabled {
		return nil, nil
	}
	// Its own client without a client-side rate limit: the shard Lease's
	// renewals bound themselves, and must never queue behind other writes.
	hostCfg := rest.CopyConfig(mgr.GetConfig())
	hostCfg.QPS = -1
	host, err := kubernetes.NewForConfig(hostCfg)
	if err != nil {
		return nil, fmt.Errorf("host client for the shard Leases: %w", err)
	}
	secrets := mgr.GetClient() // the manager's cache
	s, err := shard.New(shard.Options{
		Client:        host,
		Namespace:     cfg.Namespace,
		Ring:          sc.Ring,
		Replica:       sc.ReplicaName(),
		LeaseDuration: sc.LeaseDuration.Duration,
		RenewInterval: sc.RenewInterval.Duration,
		LoadBound:     sc.LoadBound,
		Members:       func() []string { return registeredClusters(secrets, cfg.Namespace) },
		OnChange:      onChange,
		Clock:         clk,
		Logger:        mgr.GetLogger().WithName("shard"),
	})
	if err != nil {
		return nil, fmt.Errorf("sharding: %w", err)
	}
	informer, err := mgr.GetCache().GetInformer(context.Background(), &corev1.Secret{})
	if err != nil {
		return nil, fmt.Errorf("sharding: the registration Secrets' informer: %w", err)
	}
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { s.Invalidate() },
		UpdateFunc: func(old, obj any) {
			if clusterLabel(old) != clusterLabel(obj) {
				s.Invalidate()
			}
		},
		DeleteFunc: func(any) { s.Invalidate() },
	}); err != nil {
		return nil, err
	}
	if err := ctrlmetrics.Registry.Register(s); err != nil {
		return nil, fmt.Errorf("sharding metrics: %w", err)
	}
	return s, mgr.Add(s)
}

// registeredClusters are the distinct cluster names of the registration
// Secrets in the namespace (nil if the cache cannot tell yet).
func registeredClusters(secrets client.Reader, namespace string) []string {
	var list corev1.SecretList
	if err := secrets.List(context.Background(), &list, client.InNamespace(namespace), client.HasLabels{registration.LabelCluster}); err != nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, s := range list.Items {
		if c := s.Labels[registration.LabelCluster]; c != "" && !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	sort.Strings(out)
	return out
}

func clusterLabel(obj any) string {
	if s, ok := obj.(*corev1.Secret); ok {
		return s.Labels[registration.LabelCluster]
	}
	return ""
}
