package syncer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path"
	"strings"
	"sync/atomic"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/leafsync/leafsync/internal/syncer/clusters"
	"github.com/leafsync/leafsync/internal/syncer/config"
	"github.com/leafsync/leafsync/internal/syncer/enginestate"
	"github.com/leafsync/leafsync/internal/syncer/metrics"
	"github.com/leafsync/leafsync/internal/syncer/shard"
	"github.com/leafsync/leafsync/internal/syncer/store"
	"github.com/leafsync/leafsync/internal/syncer/store/etcdstore"
	"github.com/leafsync/leafsync/internal/syncer/store/kubestore"
)

// StateCheckName is the readiness check that details the state store:
// /readyz/state-store answers "ok" or says what is wrong. It never fails the
// aggregate /readyz: leafsync keeps deciding from memory while the store is
// down, so it must not be taken out of service for it.
const StateCheckName = "state-store"

// state is the wiring of the state store.
type state struct {
	keeper    *store.Keeper
	persister *enginestate.Persister
	log       logr.Logger
	// reg finds a member's registration Secret for the persister's
	// Events; set by registerDeregistration.
	reg atomic.Pointer[clusters.Registry]
}

// setupState opens the configured store backend and adds the Keeper (the
// one writer, on the leader only; sharded, on every replica, each writing
// the members it acts on) and its readiness detail to the manager.
// The Persister's hooks go into the clusters controller (restoreHook,
// persister.Observed) and its registry (registerDeregistration).
func setupState(mgr manager.Manager, cfg config.Config, clk clock.WithTicker, sharder *shard.Sharder) (*state, error) {
	log := mgr.GetLogger().WithName("store")
	s, err := OpenStore(mgr.GetConfig(), cfg)
	if err != nil {
		return nil, fmt.Errorf("state store: %w", err)
	}
	if s.Backend() == config.StoreMemory {
		log.Info("state store backend is memory: readiness clocks, flap penalties and owed deletes do not survive a restart")
	}
	host, _ := os.Hostname()
	writer := fmt.Sprintf("%s (pid %d)", host, os.Getpid())
	backend := s.Backend()
	metrics.InitStore(backend)
	var owners store.Owners
	if sharder != nil {
		owners = shardOwners{sharder}
	}
	keeper := store.NewKeeper(s, log, store.KeeperOptions{
		Owners:      owners,
		Writer:      writer,
		CallTimeout: cfg.Store.CallTimeout.Duration,
		Clock:       clk,
		OnCall: func(ev store.CallEvent) {
			if ev.Op == "put" || ev.Op == "delete" {
				metrics.StoreWriteDurationVec.WithLabelValues(backend).Observe(ev.Duration.Seconds())
			}
			if ev.Err != nil {
				metrics.StoreWriteErrorsVec.WithLabelValues(backend, metricReason(ev.Err)).Inc()
			}
		},
	})
	st := &state{keeper: keeper, log: log}
	st.persister = enginestate.New(keeper, enginestate.Options{
		CheckpointInterval: cfg.Store.CheckpointInterval.Duration,
		RestoreTimeout:     cfg.Store.RestoreTimeout.Duration,
		Clock:              clk,
		Logger:             log,
		Recorder:           mgr.GetEventRecorder("leafsync"),
		Regarding:          st.registration,
	})
	if err := mgr.Add(keeperRunnable{k: keeper, sharded: sharder != nil}); err != nil {
		return nil, err
	}
	// Read at scrape time: zero on a replica that is not the leader.
	if err := ctrlmetrics.Registry.Register(metrics.NewStorePendingWrites(keeper.Pending)); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck(StateCheckName, st.check); err != nil {
		return nil, err
	}
	return st, nil
}

// keeperRunnable runs the Keeper on the leader only: only the leader
// writes. Sharded, it runs on every replica: each writes its members.
type keeperRunnable struct {
	k       *store.Keeper
	sharded bool
}

func (r keeperRunnable) Start(ctx context.Context) error {
	r.k.Run(ctx)
	return nil
}

func (r keeperRunnable) NeedLeaderElection() bool { return !r.sharded }

// shardOwners is the Sharder as the Keeper's per-member writer check.
type shardOwners struct{ s *shard.Sharder }

// Writer is the member's writer term and this replica's incarnation, while
// this incarnation is the member's writer.
func (o shardOwners) Writer(cluster string) (uint64, string, bool) {
	if !o.s.Acting(cluster) {
		return 0, "", false
	}
	h, ok := o.s.Holder(cluster)
	if !ok || h.Incarnation == "" || h.Incarnation != o.s.Identity() {
		return 0, "", false
	}
	return uint64(h.Term), h.Incarnation, true
}

// Confirm reads the member's Lease afresh; another writer is the store's
// ErrNotOwner.
func (o shardOwners) Confirm(ctx context.Context, cluster string) error {
	err := o.s.Confirm(ctx, cluster)
	if errors.Is(err, shard.ErrNotOwner) {
		return fmt.Errorf("%w: %w", store.ErrNotOwner, err)
	}
	return err
}

// restoreHook is clusters.Options.Restore: the member's saved engine
// snapshot goes to the Registry, the engine's owner, before its first
// probe.
func (s *state) restoreHook(ctx context.Context, cluster string, into *clusters.Registry) {
	if _, err := s.persister.Restore(ctx, cluster, into); err != nil {
		s.log.Error(err, "member starts without its saved readiness state", "cluster", cluster)
	}
}

// takenBackHook is clusters.Options.TakenBack: a member this replica kept
// warm through a lapse of its shard Lease is its again, one writer term
// up; the Keeper reads its records in that term (and writes what waited
// in memory), as it would on a take before publishing. Otherwise two
// take backs without a write in between would look to the Keeper like a
// term held by another replica, and it would drop what it had not written.
func (s *state) takenBackHook(ctx context.Context, cluster string) {
	if err := s.keeper.Load(ctx, cluster); err != nil {
		s.log.Error(err, "reading the member's state records after taking it back failed; its next write reads them", "cluster", cluster)
	}
}

// registration is the registration Secret of a member (nil if unknown):
// what the persister's Events are about.
func (s *state) registration(cluster string) runtime.Object {
	reg := s.reg.Load()
	if reg == nil {
		return nil
	}
	m, ok := reg.Member(cluster)
	if !ok {
		return nil
	}
	return &corev1.ObjectReference{Kind: "Secret", APIVersion: "v1",
		Namespace: m.Spec.Secret.Namespace, Name: m.Spec.Secret.Name, UID: m.Spec.SecretUID}
}

// registerDeregistration deletes a deregistered member's record, and lets
// the persister's Events find the member's registration.
func (s *state) registerDeregistration(reg *clusters.Registry) {
	s.reg.Store(reg)
	reg.OnDeregister("state-store", func(ctx context.Context, d clusters.Deregistration) error {
		return s.persister.Forget(ctx, d.Cluster)
	})
}

// check is the readiness detail: only the check's own path
// (/readyz/state-store) reports a problem; the aggregate /readyz does not.
func (s *state) check(req *http.Request) error {
	if req == nil || path.Clean("/"+req.URL.Path) != "/"+StateCheckName {
		return nil
	}
	var problems []string
	if err := s.keeper.Health(); err != nil {
		problems = append(problems, err.Error())
	}
	if ps := s.persister.Stats(); ps.Unrestored > 0 {
		problems = append(problems, fmt.Sprintf("%d member(s) started without their saved readiness state (last: %s)", ps.Unrestored, ps.LastRestoreError))
	}
	if len(problems) == 0 {
		return nil
	}
	return errors.New(strings.Join(problems, "; "))
}

func metricReason(err error) string {
	switch r := store.Reason(err); r {
	case "conflict", "unavailable":
		return r
	case "fenced":
		return "conflict"
	default:
		return "other"
	}
}

// OpenStore builds the configured backend; hostCfg reaches the host (the
// kube backend keeps its records there). `leafsync status` reads through it.
func OpenStore(hostCfg *rest.Config, cfg config.Config) (store.Store, error) {
	sc := cfg.Store
	switch sc.Backend {
	case config.StoreMemory:
		return store.NewMemory(), nil
	case config.StoreEtcd:
		e := sc.Etcd
		password := e.Password
		if e.PasswordFile != "" {
			data, err := os.ReadFile(e.PasswordFile)
			if err != nil {
				return nil, fmt.Errorf("store.etcd.passwordFile: %w", err)
			}
			password = strings.TrimRight(string(data), "\r\n")
		}
		for _, f := range []struct{ field, path string }{{"caFile", e.CAFile}, {"certFile", e.CertFile}, {"keyFile", e.KeyFile}} {
			if f.path == "" {
				continue
			}
			if _, err := os.Stat(f.path); err != nil {
				return nil, fmt.Errorf("store.etcd.%s: %w", f.field, err)
			}
		}
		return etcdstore.New(etcdstore.Options{
			Endpoints: e.Endpoints, Prefix: e.Prefix, DialTimeout: e.DialTimeout.Duration,
			CAFile: e.CAFile, CertFile: e.CertFile, KeyFile: e.KeyFile,
			Username: e.Username, Password: password,
		})
	default:
		// Its own client: store writes never queue behind other
		// controllers' requests, nor delay Lease renewals.
		hostCfg := rest.CopyConfig(hostCfg)
		hostCfg.QPS, hostCfg.Burst = 20, 40
		hostCfg.Timeout = sc.CallTimeout.Duration
		host, err := kubernetes.NewForConfig(hostCfg)
		if err != nil {
			return nil, fmt.Errorf("host client for the state store: %w", err)
		}
		return kubestore.New(host, cfg.Namespace, sc.Kube.Prefix)
	}
}
