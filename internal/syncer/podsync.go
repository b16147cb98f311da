package syncer

import (
	"fmt"

	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/leafsync/leafsync/internal/syncer/clusters"
	"github.com/leafsync/leafsync/internal/syncer/config"
	"github.com/leafsync/leafsync/internal/syncer/hostclock"
	"github.com/leafsync/leafsync/internal/syncer/podsync"
	"github.com/leafsync/leafsync/internal/syncer/podsync/eventmirror"
	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
	"github.com/leafsync/leafsync/internal/syncer/store"
	"github.com/leafsync/leafsync/internal/syncer/volumes"
)

// setupPodSync adds the controller that runs the pods bound to leaves in
// their members and guards their deletion. Owed, deferred and retained
// deletes go through the Keeper. It has its own host client, so that pod
// writes never queue behind leaf heartbeats. The host's answers to it
// also tell the host API server's time (hostclock), which pod sync
// measures host times against.
func setupPodSync(mgr manager.Manager, cfg config.Config, reg *clusters.Registry, keeper *store.Keeper, nodes coreinformers.NodeInformer, clk clock.WithTicker) error {
	p := cfg.PodSync
	policy, err := podmeta.ParsePolicy(p.StaleEvictionPolicy)
	if err != nil {
		return fmt.Errorf("podSync.staleEvictionPolicy: %w", err)
	}
	hostCfg := rest.CopyConfig(mgr.GetConfig())
	hostCfg.QPS, hostCfg.Burst = 50, 100
	hostClock := hostclock.New(clk)
	hostCfg.Wrap(hostClock.Wrap)
	host, err := kubernetes.NewForConfig(hostCfg)
	if err != nil {
		return fmt.Errorf("host client for pod sync: %w", err)
	}
	if err := setupEventMirror(mgr, reg, clk); err != nil {
		return err
	}
	claims := volumes.New(volumes.Options{Host: host, Registry: reg, Recorder: mgr.GetEventRecorder("leafsync"), Logger: mgr.GetLogger(), Clock: clk, Resync: p.Resync.Duration})
	if err := mgr.Add(claims); err != nil {
		return err
	}
	return mgr.Add(podsync.New(podsync.Options{
		Host:          host,
		LeafNodes:     nodes,
		Registry:      reg,
		Keeper:        keeper,
		Policy:        policy,
		MaxDeferral:   p.MaxDeferral.Duration,
		ReapAfter:     p.ReapAfter.Duration,
		Resync:        p.Resync.Duration,
		Workers:       p.Workers,
		PodSecurity:   p.MemberPodSecurity,
		HostAPIServer: p.HostAPIServer,
		Recorder:      mgr.GetEventRecorder("leafsync"),
		Logger:        mgr.GetLogger(),
		Clock:         clk,
		HostClock:     hostClock,
		Claims:        claims,
	}))
}

// setupEventMirror adds the controller that mirrors the member pods'
// Events onto their host pods. Its host client is its own, so that Event
// writes never queue behind pod writes.
func setupEventMirror(mgr manager.Manager, reg *clusters.Registry, clk clock.PassiveClock) error {
	host, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("host client for member pod Events: %w", err)
	}
	return mgr.Add(eventmirror.New(eventmirror.Options{Host: host, Registry: reg, Logger: mgr.GetLogger(), Clock: clk}))
}
