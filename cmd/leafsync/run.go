package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"runtime/debug"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/leafsync/leafsync/internal/syncer"
	"github.com/leafsync/leafsync/internal/syncer/config"
	"github.com/leafsync/leafsync/internal/syncer/shard"
)

// runOptions are the flags of `leafsync run`.
type runOptions struct {
	kubeconfig string
	configFile string
	// flags holds the values of configFlags (config.Default() until set).
	flags config.Config
}

// configFlag is a flag that sets one field of the config. A flag that is
// set overrides the config file; one that is not leaves the file's (or the
// default) value alone.
type configFlag struct {
	name, usage string
	// field returns a pointer to the field in c.
	field func(c *config.Config) any
}

// configFlags is the one table of the flags that set config fields.
var configFlags = []configFlag{
	{"namespace", "namespace holding registration Secrets and leafsync's own objects",
		func(c *config.Config) any { return &c.Namespace }},
	{"metrics-bind-address", "address of the /metrics endpoint, \"0\" to disable",
		func(c *config.Config) any { return &c.MetricsBindAddress }},
	{"health-probe-bind-address", "address of /healthz and /readyz, \"0\" to disable",
		func(c *config.Config) any { return &c.HealthProbeBindAddress }},
	{"pprof-bind-address", "address of Go's /debug/pprof profiles, \"0\" to disable (bind to localhost: profiles show memory)",
		func(c *config.Config) any { return &c.PprofBindAddress }},
	{"leader-elect", "elect a leader so that only one replica acts",
		func(c *config.Config) any { return &c.LeaderElection.Enabled }},
	{"sharding", "spread members over every active replica, each holding a shard Lease (sharding.* in the config file)",
		func(c *config.Config) any { return &c.Sharding.Enabled }},
	{"log-level", fmt.Sprintf("log level, one of %v", config.LogLevels),
		func(c *config.Config) any { return &c.LogLevel }},
	{"allow-exec-auth", "accept member kubeconfigs whose user runs an exec credential plugin or auth-provider (runs commands inside leafsync's pod)",
		func(c *config.Config) any { return &c.Members.AllowExecAuth }},
	{"allow-file-references", "accept member kubeconfigs that reference files (certificate-authority, client-certificate, client-key, tokenFile) inside leafsync's pod",
		func(c *config.Config) any { return &c.Members.AllowFileReferences }},
	{"member-timeout", "timeout of each member API request that is not a watch",
		func(c *config.Config) any { return &c.Members.Timeout.Duration }},
	{"member-qps", "request rate limit per member (queries per second)",
		func(c *config.Config) any { return &c.Members.QPS }},
	{"member-burst", "request burst per member",
		func(c *config.Config) any { return &c.Members.Burst }},
	{"store-backend", fmt.Sprintf("where state that must survive restarts is kept, one of %v: kube (ConfigMaps in --namespace of the host), etcd (see --etcd-endpoints) or memory (lost on restart)", config.StoreBackends),
		func(c *config.Config) any { return &c.Store.Backend }},
	{"host-api-server", "the host API server's address as members reach it (host:port or https://host:port): pods on leaves that mount a ServiceAccount token get their host ServiceAccount's token, the host CA and this address; empty: no token (per member: annotation leafsync.io/host-api-server)",
		func(c *config.Config) any { return &c.PodSync.HostAPIServer }},
	{"etcd-endpoints", "etcd client URLs for --store-backend=etcd (comma-separated, e.g. https://etcd-0:2379); TLS and auth in the config file's store.etcd",
		func(c *config.Config) any { return &c.Store.Etcd.Endpoints }},
}

func newRunCommand() *cobra.Command {
	opts := runOptions{flags: config.Default()}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the leafsync cluster-manager against a host cluster",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := opts.resolve(cmd.Flags())
			if err != nil {
				return err
			}
			return run(cmd, opts.kubeconfig, cfg)
		},
	}
	opts.bind(cmd.Flags())
	return cmd
}

// bind defines the flags of `leafsync run` on f, with their values in o.
func (o *runOptions) bind(f *pflag.FlagSet) {
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "path to the host cluster's kubeconfig; in-cluster config when empty")
	f.StringVar(&o.configFile, "config", "", "YAML file with every tunable (see docs/configuration.md); flags override it")
	for _, cf := range configFlags {
		switch p := cf.field(&o.flags).(type) {
		case *string:
			f.StringVar(p, cf.name, *p, cf.usage)
		case *bool:
			f.BoolVar(p, cf.name, *p, cf.usage)
		case *int:
			f.IntVar(p, cf.name, *p, cf.usage)
		case *float32:
			f.Float32Var(p, cf.name, *p, cf.usage)
		case *time.Duration:
			f.DurationVar(p, cf.name, *p, cf.usage)
		case *[]string:
			f.StringSliceVar(p, cf.name, *p, cf.usage)
		default:
			panic(fmt.Sprintf("flag --%s: no flag type for %T", cf.name, p))
		}
	}
}

// resolve builds the effective configuration: defaults, then the file, then
// the flags that were set explicitly; then validates it.
func (o runOptions) resolve(flags *pflag.FlagSet) (config.Config, error) {
	cfg := config.Default()
	if o.configFile != "" {
		var err error
		if cfg, err = config.Load(o.configFile); err != nil {
			return cfg, err
		}
	}
	for _, cf := range configFlags {
		if flags.Changed(cf.name) {
			// Both pointers come from the same field function.
			reflect.ValueOf(cf.field(&cfg)).Elem().Set(reflect.ValueOf(cf.field(&o.flags)).Elem())
		}
	}
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("invalid configuration:\n%w", err)
	}
	return cfg, nil
}

func newLogger(level string) zapcore.Level {
	switch level {
	case "debug":
		return zapcore.DebugLevel
	case "error":
		return zapcore.ErrorLevel
	default:
		return zapcore.InfoLevel
	}
}

func hostRESTConfig(kubeconfig string) (*rest.Config, error) {
	var (
		cfg *rest.Config
		err error
	)
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("host cluster config: %w (pass --kubeconfig when running outside a cluster)", err)
	}
	cfg.UserAgent = "leafsync/" + version
	// client-go's default (5/s, burst 10) serialised registrations: each
	// writes its Secret's finalizer and status, so 50 Secrets at once took
	// 18s to register (make bench-scale). The host's API Priority and
	// Fairness, not this limiter, protects the API server.
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, nil
}

func run(cmd *cobra.Command, kubeconfig string, cfg config.Config) error {
	logger := zap.New(zap.Level(newLogger(cfg.LogLevel)), zap.UseDevMode(false))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger.WithName("client-go"))
	log := logger.WithName("setup")
	tuneMemory(log)

	restCfg, err := hostRESTConfig(kubeconfig)
	if err != nil {
		return err
	}
	if cfg.Sharding.Enabled {
		// The audit log tells the replicas' writes apart.
		restCfg.UserAgent += " (replica " + cfg.Sharding.ReplicaName() + ")"
	}
	le := cfg.LeaderElection
	if le.Enabled && cfg.Sharding.Enabled {
		log.Info("sharding is on: leader election is not used (every replica acts, each on its members, and each ensures the eviction guard's policy, which is idempotent); a lost leader Lease would otherwise stop the whole replica")
	}
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Metrics:                       metricsserver.Options{BindAddress: cfg.MetricsBindAddress},
		HealthProbeBindAddress:        cfg.HealthProbeBindAddress,
		PprofBindAddress:              cfg.PprofBindAddress,
		LeaderElection:                elected(cfg),
		LeaderElectionID:              leaderElectionID,
		LeaderElectionNamespace:       cfg.Namespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &le.LeaseDuration.Duration,
		RenewDeadline:                 &le.RenewDeadline.Duration,
		RetryPeriod:                   &le.RetryPeriod.Duration,
		GracefulShutdownTimeout:       durationPtr(10 * time.Second),
		Cache:                         syncer.CacheOptions(cfg),
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	clk, skew, err := testClock()
	if err != nil {
		return err
	}
	if skew != 0 {
		log.Info("TEST ONLY: leafsync's clock is skewed off the real one", "env", testClockSkewEnv, "skew", skew.String())
	}
	var drain func(context.Context) error
	if err := syncer.Setup(mgr, cfg, syncer.WithClock(clk), syncer.WithSharder(func(s *shard.Sharder) { drain = s.Drain })); err != nil {
		return fmt.Errorf("setting up controllers: %w", err)
	}

	log.Info("starting leafsync", "version", version, "namespace", cfg.Namespace, "leaderElection", elected(cfg),
		"sharding", cfg.Sharding.Enabled, "replica", cfg.Sharding.ReplicaName())
	ctx := signalContext(log, drain, cfg.Sharding.DrainTimeout.Duration, ctrl.SetupSignalHandler)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("manager stopped: %w", err)
	}
	log.Info("leafsync stopped cleanly")
	return nil
}

func durationPtr(d time.Duration) *time.Duration { return &d }

// elected: whether one replica is elected to act. Sharded replicas all act
// and need no leader; controller-runtime stops the whole process when its
// leader Lease is lost, which under a loaded host API server stopped one
// sharded replica after another (bench-scale, 3 replicas, 600 members).
func elected(cfg config.Config) bool { return cfg.LeaderElection.Enabled && !cfg.Sharding.Enabled }

// tuneMemory trades some CPU for memory, which is what runs out first
// (docs/scaling.md: about 0.04 cores and 7 MiB of heap per member of 200
// nodes and 2,000 pods): the heap grows by half its live size between
// collections instead of doubling, and GOMEMLIMIT follows the container's
// memory limit (90% of it), so that the collector works harder before the
// kernel kills the pod. GOGC and GOMEMLIMIT, when set, win.
func tuneMemory(log logr.Logger) {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(50)
	}
	limit, err := memlimit.SetGoMemLimitWithOpts(memlimit.WithRatio(0.9), memlimit.WithProvider(memlimit.FromCgroup),
		memlimit.WithLogger(slog.New(slog.DiscardHandler)))
	if err == nil && limit > 0 {
		log.Info("memory limit from the container", "GOMEMLIMIT", limit)
	}
}
