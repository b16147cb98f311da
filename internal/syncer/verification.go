package syncer

import (
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/leafsync/leafsync/internal/syncer/clusters"
	"github.com/leafsync/leafsync/internal/syncer/config"
	"github.com/leafsync/leafsync/internal/syncer/verify"
)

// setupVerification adds the verifier of members (docs/verification.md),
// when verification.enabled; nil when it is not (no leaf is tainted).
// onChange hears that a member's leaf taint changed.
func setupVerification(mgr manager.Manager, cfg config.Config, reg *clusters.Registry, onChange func(cluster string), clk clock.WithTicker) (*verify.Controller, error) {
	v := cfg.Verification
	if !v.Enabled {
		return nil, nil
	}
	o := verify.Options{
		Registry:   reg,
		Secrets:    mgr.GetClient(),
		Recorder:   mgr.GetEventRecorder("leafsync"),
		KubeletAPI: cfg.KubeletAPI.Enabled,
		Interval:   v.Interval.Duration,
		RetryMin:   v.RetryMin.Duration,
		RetryMax:   v.RetryMax.Duration,
		OnChange:   onChange,
		Clock:      clk,
		Logger:     mgr.GetLogger(),
	}
	c := verify.New(o)
	return c, mgr.Add(c)
}
