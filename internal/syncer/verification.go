package syncer

import (
	"context"

	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/leafsync/leafsync/internal/syncer/clusters"
	"github.com/leafsync/leafsync/internal/syncer/config"
	"github.com/leafsync/leafsync/internal/syncer/registration"
	"github.com/leafsync/leafsync/internal/syncer/verify"
	"github.com/leafsync/leafsync/internal/syncer/verify/canary"
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
	if v.Canary {
		o.Canary = func(ctx context.Context, member kubernetes.Interface, annotations map[string]string) (string, error) {
			image := annotations[registration.AnnotationVerifyCanaryImage]
			if image == "" {
				image = v.CanaryImage
			}
			res, err := canary.Run(ctx, member, canary.Options{Image: image, Timeout: v.CanaryTimeout.Duration, Clock: clk})
			switch {
			case err != nil:
				return "", err
			case res.Passed:
				return "", nil
			case res.Message != "":
				return res.Message, nil
			}
			return res.Reason, nil
		}
	}
	c := verify.New(o)
	return c, mgr.Add(c)
}
