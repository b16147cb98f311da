package config

import (
	"errors"
	"fmt"
	"time"

	"github.com/leafsync/leafsync/hysteresis"
)

// Verification configures the check that a member can run new pods
// before its leaf takes any (internal/syncer/verify, docs/verification.md).
type Verification struct {
	// Enabled keeps a leaf tainted leafsync.io/unverified:NoSchedule until
	// its member passed verification. Disabled, no leaf is ever tainted.
	Enabled bool `json:"enabled"`
	// Interval re-verifies every verified member this often; 0 (the
	// default): only at registration and on every change of the
	// registration, its credentials or the member's identity.
	Interval hysteresis.Duration `json:"interval"`
	// RetryMin and RetryMax bound the backoff between tries of a member
	// that has not passed: exponential from RetryMin up to RetryMax.
	RetryMin hysteresis.Duration `json:"retryMin"`
	RetryMax hysteresis.Duration `json:"retryMax"`
	// Canary runs the canary pod in each member (the per-member
	// annotation leafsync.io/verify-canary: "false" skips it).
	Canary bool `json:"canary"`
	// CanaryImage is the canary pod's image ("": leafsync's own image,
	// whose verify subcommand the canary runs).
	CanaryImage string `json:"canaryImage"`
	// CanaryTimeout bounds one canary run, from the pod's creation to its
	// completion (image pull included).
	CanaryTimeout hysteresis.Duration `json:"canaryTimeout"`
}

// defaultVerification: on, with the canary; a failing member is tried
// again after 5s, then at most every 5 minutes; no periodic re-verification.
func defaultVerification() Verification {
	return Verification{
		Enabled:       true,
		RetryMin:      hysteresis.Duration{Duration: 5 * time.Second},
		RetryMax:      hysteresis.Duration{Duration: 5 * time.Minute},
		Canary:        true,
		CanaryTimeout: hysteresis.Duration{Duration: 2 * time.Minute},
	}
}

func (v Verification) validate() error {
	var errs []error
	if v.Interval.Duration < 0 {
		errs = append(errs, fmt.Errorf("verification.interval must not be negative, got %s (0: no periodic re-verification)", v.Interval))
	}
	if v.RetryMin.Duration <= 0 || v.RetryMax.Duration < v.RetryMin.Duration {
		errs = append(errs, fmt.Errorf("verification.retryMin (%s) must be positive and at most verification.retryMax (%s)", v.RetryMin, v.RetryMax))
	}
	if v.Canary && v.CanaryTimeout.Duration <= 0 {
		errs = append(errs, fmt.Errorf("verification.canaryTimeout must be positive, got %s", v.CanaryTimeout))
	}
	return errors.Join(errs...)
}
