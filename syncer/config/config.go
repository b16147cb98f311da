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
	// LeaderElection makes only one replica act at a time.
	LeaderElection LeaderElection `json:"leaderElection"`
	// LogLevel is one of debug, info, error.
	LogLevel string `json:"logLevel"`
	// Hysteresis holds the readiness thresholds: fleet defaults and per-cluster overrides.
	Hysteresis hysteresis.FleetConfig `json:"hysteresis"`
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
		LeaderElection: LeaderElection{
			Enabled:       false,
			LeaseDuration: hysteresis.Duration{Duration: 15 * time.Second},
			RenewDeadline: hysteresis.Duration{Duration: 10 * time.Second},
			RetryPeriod:   hysteresis.Duration{Duration: 2 * time.Second},
		},
		LogLevel:   "info",
		Hysteresis: hysteresis.DefaultFleetConfig(),
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
