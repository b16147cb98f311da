// Package config is leafsync's run-time configuration: the YAML file given
// with --config, its defaults, and its validation. Command-line flags
// override file values; the result is validated once, before anything starts.
package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/leafsync/leafsync/hysteresis"
)

// Config holds every tunable of `leafsync run`.
type Config struct {
	// Namespace holds registration Secrets and leafsync's own objects.
	Namespace string `json:"namespace"`
	// MetricsBindAddress serves /metrics; "0" disables it.
	MetricsBindAddress string `json:"metricsBindAddress"`
	// HealthProbeBindAddress serves /healthz and /readyz; "0" disables it.
	HealthProbeBindAddress string `json:"healthProbeBindAddress"`
	// PprofBindAddress serves Go's /debug/pprof profiles; "0" (the
	// default) disables it. Profiles show memory and goroutines, so bind
	// it to localhost (e.g. "127.0.0.1:6060") and reach it with
	// kubectl port-forward.
	PprofBindAddress string `json:"pprofBindAddress"`
	// LeaderElection makes only one replica act at a time.
	LeaderElection LeaderElection `json:"leaderElection"`
	// LogLevel is one of debug, info, error.
	LogLevel string `json:"logLevel"`
	// Hysteresis holds the readiness thresholds: fleet defaults and per-cluster overrides.
	Hysteresis hysteresis.FleetConfig `json:"hysteresis"`
	// Members configures registration checks and the connection to each member.
	Members Members `json:"members"`
	// Leaves configures the leaf Nodes and their Lease heartbeat.
	Leaves Leaves `json:"leaves"`
	// Store configures where state that must survive restarts is kept.
	Store Store `json:"store"`
	// PodSync configures pod sync and the stale-eviction guard.
	PodSync PodSync `json:"podSync"`
	// EvictionGuard refuses evictions of a healthy member's pods in the
	// host's API server.
	EvictionGuard EvictionGuard `json:"evictionGuard"`
	// KubeletAPI serves kubectl logs/exec/attach/port-forward for pods on leaves.
	KubeletAPI KubeletAPI `json:"kubeletAPI"`
	// Verification keeps new pods off a leaf until its member has shown
	// it can run them.
	Verification Verification `json:"verification"`
	// Sharding spreads members over several active replicas.
	Sharding Sharding `json:"sharding"`
}

// Leaves configures the leaf Node of each member and its heartbeat.
type Leaves struct {
	// LeafTaint puts leafsync.io/leaf=true:NoSchedule on every leaf, so that
	// only pods that tolerate it land there (per-member annotation
	// leafsync.io/leaf-taint overrides it).
	LeafTaint bool `json:"leafTaint"`
	// LeaseRenewInterval is how often a leaf's Lease is renewed (kubelet: 10s).
	LeaseRenewInterval hysteresis.Duration `json:"leaseRenewInterval"`
	// LeaseDuration is written into the Lease (kubelet: 40s).
	LeaseDuration hysteresis.Duration `json:"leaseDuration"`
	// LeaseRenewTimeout bounds one renewal request; failures are retried
	// with jitter until the next renewal is due. Default 10s, the renewal
	// interval, as a kubelet's heartbeat client (the lesser of its status
	// update period and Lease duration): a renewal abandoned before its
	// answer may have landed, and the next one, at the old version, is
	// then refused.
	LeaseRenewTimeout hysteresis.Duration `json:"leaseRenewTimeout"`
	// ConditionHeartbeat refreshes the conditions' lastHeartbeatTime even
	// when nothing changed.
	ConditionHeartbeat hysteresis.Duration `json:"conditionHeartbeat"`
	// Resync recomputes every leaf at least this often.
	Resync hysteresis.Duration `json:"resync"`
	// AllocatableInterval: a leaf's allocatable changing alone (the
	// member's own pods come and go) is written at most this often;
	// capacity, conditions and taints at once. 0 writes every change.
	AllocatableInterval hysteresis.Duration `json:"allocatableInterval"`
}

func (l Leaves) validate() error {
	var errs []error
	for name, d := range map[string]hysteresis.Duration{
		"leaves.leaseRenewInterval": l.LeaseRenewInterval, "leaves.leaseDuration": l.LeaseDuration,
		"leaves.leaseRenewTimeout": l.LeaseRenewTimeout, "leaves.conditionHeartbeat": l.ConditionHeartbeat,
		"leaves.resync": l.Resync,
	} {
		if d.Duration <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %s", name, d))
		}
	}
	if l.LeaseRenewInterval.Duration > 0 && l.LeaseDuration.Duration < 2*l.LeaseRenewInterval.Duration {
		errs = append(errs, fmt.Errorf("leaves.leaseDuration (%s) must be at least twice leaves.leaseRenewInterval (%s), or one late renewal expires the Lease", l.LeaseDuration, l.LeaseRenewInterval))
	}
	if l.AllocatableInterval.Duration < 0 {
		errs = append(errs, fmt.Errorf("leaves.allocatableInterval must not be negative, got %s (0 writes every change)", l.AllocatableInterval))
	}
	return errors.Join(errs...)
}

// Members configures how leafsync accepts registrations and talks to members.
type Members struct {
	// AllowExecAuth accepts kubeconfigs whose user runs an exec credential
	// plugin or an auth-provider (a command inside leafsync's pod). Off by default.
	AllowExecAuth bool `json:"allowExecAuth"`
	// AllowFileReferences accepts kubeconfigs that name files
	// (certificate-authority, client-certificate, client-key, tokenFile)
	// inside leafsync's pod. Off by default.
	AllowFileReferences bool `json:"allowFileReferences"`
	// Timeout bounds every member request that is not a watch.
	Timeout hysteresis.Duration `json:"timeout"`
	// QPS and Burst limit the request rate to each member.
	QPS   float32 `json:"qps"`
	Burst int     `json:"burst"`
	// ProbeTimeout bounds one GET /readyz of a member.
	ProbeTimeout hysteresis.Duration `json:"probeTimeout"`
	// ReconnectTimeout bounds how long, after a kubeconfig change, the
	// previous connection keeps serving while the new one's caches sync.
	ReconnectTimeout hysteresis.Duration `json:"reconnectTimeout"`
	// Breaker configures each member's circuit breaker.
	Breaker Breaker `json:"breaker"`
}

// Breaker configures a member's circuit breaker.
type Breaker struct {
	// ConsecutiveFailures (transport errors, 502/503/504) open the
	// breaker. The member's own answers (a 500 from its admission, 429,
	// 4xx) never count, and readiness probes bypass the breaker.
	ConsecutiveFailures uint32 `json:"consecutiveFailures"`
	// OpenTimeout is how long an open breaker fails calls fast before it
	// lets a trial call through; a successful readiness probe closes it
	// sooner.
	OpenTimeout hysteresis.Duration `json:"openTimeout"`
	// HalfOpenRequests trial calls are let through when half-open; as many
	// consecutive successes close the breaker.
	HalfOpenRequests uint32 `json:"halfOpenRequests"`
}

// LeaderElection configures the Lease-based leader election between replicas.
type LeaderElection struct {
	Enabled       bool                `json:"enabled"`
	LeaseDuration hysteresis.Duration `json:"leaseDuration"`
	RenewDeadline hysteresis.Duration `json:"renewDeadline"`
	RetryPeriod   hysteresis.Duration `json:"retryPeriod"`
}

// Default returns the configuration leafsync runs with when nothing is set.
func Default() Config {
	return Config{
		Namespace:              "leafsync-system",
		MetricsBindAddress:     ":8080",
		HealthProbeBindAddress: ":8081",
		PprofBindAddress:       "0",
		LeaderElection: LeaderElection{
			Enabled:       false,
			LeaseDuration: hysteresis.Duration{Duration: 15 * time.Second},
			RenewDeadline: hysteresis.Duration{Duration: 10 * time.Second},
			RetryPeriod:   hysteresis.Duration{Duration: 2 * time.Second},
		},
		LogLevel:   "info",
		Hysteresis: hysteresis.DefaultFleetConfig(),
		Leaves: Leaves{
			LeafTaint:          true,
			LeaseRenewInterval: hysteresis.Duration{Duration: 10 * time.Second},
			LeaseDuration:      hysteresis.Duration{Duration: 40 * time.Second},
			LeaseRenewTimeout:  hysteresis.Duration{Duration: 10 * time.Second},
			ConditionHeartbeat: hysteresis.Duration{Duration: time.Minute},
			Resync:             hysteresis.Duration{Duration: 30 * time.Second},
			// A kubelet's status update period.
			AllocatableInterval: hysteresis.Duration{Duration: 10 * time.Second},
		},
		Members: Members{
			Timeout:          hysteresis.Duration{Duration: 30 * time.Second},
			QPS:              20,
			Burst:            40,
			ProbeTimeout:     hysteresis.Duration{Duration: 3 * time.Second},
			ReconnectTimeout: hysteresis.Duration{Duration: 30 * time.Second},
			Breaker: Breaker{
				ConsecutiveFailures: 5,
				OpenTimeout:         hysteresis.Duration{Duration: 5 * time.Second},
				HalfOpenRequests:    1,
			},
		},
		Store:         defaultStore(),
		PodSync:       DefaultPodSync(),
		EvictionGuard: defaultEvictionGuard(),
		KubeletAPI:    defaultKubeletAPI(),
		Verification:  defaultVerification(),
		Sharding:      defaultSharding(),
	}
}

// Load reads a YAML config file over the defaults. Unknown fields are errors,
// so a misspelt key is reported instead of silently ignored.
func Load(path string) (Config, error) {
	cfg := Default()
	data, err := os.ReadFile(path)
	if err != nil {
		return cfg, fmt.Errorf("reading config file: %w", err)
	}
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		return cfg, fmt.Errorf("config file %s: %w", path, err)
	}
	return cfg, nil
}

// LogLevels are the accepted values of logLevel.
var LogLevels = []string{"debug", "info", "error"}

// Validate checks every field and names each bad one.
func (c Config) Validate() error {
	var errs []error
	if msgs := validation.IsDNS1123Label(c.Namespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("namespace %q is not a valid namespace name: %v", c.Namespace, msgs))
	}
	errs = append(errs, validateBindAddress("metricsBindAddress", c.MetricsBindAddress))
	errs = append(errs, validateBindAddress("healthProbeBindAddress", c.HealthProbeBindAddress))
	errs = append(errs, validateBindAddress("pprofBindAddress", c.PprofBindAddress))
	if !contains(LogLevels, c.LogLevel) {
		errs = append(errs, fmt.Errorf("logLevel %q must be one of %v", c.LogLevel, LogLevels))
	}
	le := c.LeaderElection
	if le.LeaseDuration.Duration <= 0 || le.RenewDeadline.Duration <= 0 || le.RetryPeriod.Duration <= 0 {
		errs = append(errs, errors.New("leaderElection.leaseDuration, renewDeadline and retryPeriod must all be positive"))
	} else {
		if le.RenewDeadline.Duration >= le.LeaseDuration.Duration {
			errs = append(errs, fmt.Errorf("leaderElection.renewDeadline (%s) must be below leaderElection.leaseDuration (%s)", le.RenewDeadline, le.LeaseDuration))
		}
		if le.RetryPeriod.Duration >= le.RenewDeadline.Duration {
			errs = append(errs, fmt.Errorf("leaderElection.retryPeriod (%s) must be below leaderElection.renewDeadline (%s)", le.RetryPeriod, le.RenewDeadline))
		}
	}
	errs = append(errs, c.Hysteresis.Validate())
	errs = append(errs, c.Members.validate())
	errs = append(errs, c.Leaves.validate())
	errs = append(errs, c.Store.validate())
	errs = append(errs, c.PodSync.validate())
	errs = append(errs, c.EvictionGuard.validate())
	errs = append(errs, c.KubeletAPI.validate())
	errs = append(errs, c.Verification.validate())
	errs = append(errs, c.Sharding.validate(c.Store.Backend))
	return errors.Join(errs...)
}

func (m Members) validate() error {
	var errs []error
	if m.Timeout.Duration <= 0 {
		errs = append(errs, fmt.Errorf("members.timeout (%s) must be positive", m.Timeout))
	}
	if m.QPS <= 0 {
		errs = append(errs, fmt.Errorf("members.qps (%g) must be positive", m.QPS))
	}
	if m.Burst < 1 {
		errs = append(errs, fmt.Errorf("members.burst (%d) must be at least 1", m.Burst))
	}
	if m.ProbeTimeout.Duration <= 0 {
		errs = append(errs, fmt.Errorf("members.probeTimeout (%s) must be positive", m.ProbeTimeout))
	} else if m.Timeout.Duration > 0 && m.ProbeTimeout.Duration > m.Timeout.Duration {
		errs = append(errs, fmt.Errorf("members.probeTimeout (%s) must not exceed members.timeout (%s)", m.ProbeTimeout, m.Timeout))
	}
	if m.ReconnectTimeout.Duration <= 0 {
		errs = append(errs, fmt.Errorf("members.reconnectTimeout (%s) must be positive", m.ReconnectTimeout))
	}
	if m.Breaker.ConsecutiveFailures < 1 {
		errs = append(errs, fmt.Errorf("members.breaker.consecutiveFailures (%d) must be at least 1", m.Breaker.ConsecutiveFailures))
	}
	if m.Breaker.OpenTimeout.Duration <= 0 {
		errs = append(errs, fmt.Errorf("members.breaker.openTimeout (%s) must be positive", m.Breaker.OpenTimeout))
	}
	if m.Breaker.HalfOpenRequests < 1 {
		errs = append(errs, fmt.Errorf("members.breaker.halfOpenRequests (%d) must be at least 1", m.Breaker.HalfOpenRequests))
	}
	return errors.Join(errs...)
}

func validateBindAddress(field, addr string) error {
	if addr == "0" {
		return nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("%s %q must be host:port (or \"0\" to disable): %v", field, addr, err)
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
