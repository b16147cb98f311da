package main

import (
	"fmt"
	"log/slog"
	"os"
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

	"github.com/leafsync/leafsync/syncer"
	"github.com/leafsync/leafsync/syncer/config"
)

// runOptions are the flags of `leafsync run`. Flags that are set override the
// config file; flags that are not set leave the file (or default) value alone.
type runOptions struct {
	kubeconfig             string
	configFile             string
	namespace              string
	metricsBindAddress     string
	healthProbeBindAddress string
	leaderElect            bool
	logLevel               string
}

func newRunCommand() *cobra.Command {
	opts := runOptions{}
	defaults := config.Default()
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
	f := cmd.Flags()
	f.StringVar(&opts.kubeconfig, "kubeconfig", "", "path to the host cluster's kubeconfig; in-cluster config when empty")
	f.StringVar(&opts.configFile, "config", "", "YAML file with every tunable (see docs/configuration.md); flags override it")
	f.StringVar(&opts.namespace, "namespace", defaults.Namespace, "namespace holding registration Secrets and leafsync's own objects")
	f.StringVar(&opts.metricsBindAddress, "metrics-bind-address", defaults.MetricsBindAddress, "address of the /metrics endpoint, \"0\" to disable")
	f.StringVar(&opts.healthProbeBindAddress, "health-probe-bind-address", defaults.HealthProbeBindAddress, "address of /healthz and /readyz, \"0\" to disable")
	f.BoolVar(&opts.leaderElect, "leader-elect", defaults.LeaderElection.Enabled, "elect a leader so that only one replica acts")
	f.StringVar(&opts.logLevel, "log-level", defaults.LogLevel, fmt.Sprintf("log level, one of %v", config.LogLevels))
	f.Bool("allow-exec-auth", defaults.Members.AllowExecAuth, "accept member kubeconfigs whose user runs an exec credential plugin or auth-provider (runs commands inside leafsync's pod)")
	f.Bool("allow-file-references", defaults.Members.AllowFileReferences, "accept member kubeconfigs that reference files (certificate-authority, client-certificate, client-key, tokenFile) inside leafsync's pod")
	f.Duration("member-timeout", defaults.Members.Timeout.Duration, "timeout of each member API request that is not a watch")
	f.Float32("member-qps", defaults.Members.QPS, "request rate limit per member (queries per second)")
	f.Int("member-burst", defaults.Members.Burst, "request burst per member")
	f.String("store-backend", defaults.Store.Backend, fmt.Sprintf("where state that must survive restarts is kept, one of %v: kube (ConfigMaps in --namespace of the host), etcd (see --etcd-endpoints) or memory (lost on restart)", config.StoreBackends))
	f.StringSlice("etcd-endpoints", nil, "etcd client URLs for --store-backend=etcd (comma-separated, e.g. https://etcd-0:2379); TLS and auth in the config file's store.etcd")
	return cmd
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
	if flags.Changed("namespace") {
		cfg.Namespace = o.namespace
	}
	if flags.Changed("metrics-bind-address") {
		cfg.MetricsBindAddress = o.metricsBindAddress
	}
	if flags.Changed("health-probe-bind-address") {
		cfg.HealthProbeBindAddress = o.healthProbeBindAddress
	}
	if flags.Changed("leader-elect") {
		cfg.LeaderElection.Enabled = o.leaderElect
	}
	if flags.Changed("log-level") {
		cfg.LogLevel = o.logLevel
	}
	if flags.Changed("allow-exec-auth") {
		cfg.Members.AllowExecAuth, _ = flags.GetBool("allow-exec-auth")
	}
	if flags.Changed("allow-file-references") {
		cfg.Members.AllowFileReferences, _ = flags.GetBool("allow-file-references")
	}
	if flags.Changed("member-timeout") {
		cfg.Members.Timeout.Duration, _ = flags.GetDuration("member-timeout")
	}
	if flags.Changed("member-qps") {
		cfg.Members.QPS, _ = flags.GetFloat32("member-qps")
	}
	if flags.Changed("member-burst") {
		cfg.Members.Burst, _ = flags.GetInt("member-burst")
	}
	if flags.Changed("store-backend") {
		cfg.Store.Backend, _ = flags.GetString("store-backend")
	}
	if flags.Changed("etcd-endpoints") {
		cfg.Store.Etcd.Endpoints, _ = flags.GetStringSlice("etcd-endpoints")
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
	le := cfg.LeaderElection
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Metrics:                       metricsserver.Options{BindAddress: cfg.MetricsBindAddress},
		HealthProbeBindAddress:        cfg.HealthProbeBindAddress,
		LeaderElection:                le.Enabled,
		LeaderElectionID:              "leafsync-leader",
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
	if err := syncer.Setup(mgr, cfg); err != nil {
		return fmt.Errorf("setting up controllers: %w", err)
	}

	log.Info("starting leafsync", "version", version, "namespace", cfg.Namespace, "leaderElection", le.Enabled)
	ctx := ctrl.SetupSignalHandler()
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("manager stopped: %w", err)
	}
	log.Info("leafsync stopped cleanly")
	return nil
}

func durationPtr(d time.Duration) *time.Duration { return &d }

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
