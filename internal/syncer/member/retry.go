package member

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/cenkalti/backoff/v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// RetryOptions bound the retries of a member write.
type RetryOptions struct {
	// InitialInterval is the first delay (before jitter).
	InitialInterval time.Duration
	// MaxInterval caps each delay.
	MaxInterval time.Duration
	// MaxElapsedTime caps the total time spent; 0 means no cap (then set
	// MaxRetries, or rely on the context).
	MaxElapsedTime time.Duration
	// MaxRetries caps the number of retries after the first attempt; 0
	// means no cap.
	MaxRetries uint64
	// Notify (may be nil) is called before each retry with the error and
	// the delay.
	Notify func(err error, delay time.Duration)
}

// defaultRetryOptions: 200ms doubling to at most 10s, jittered by ±50%, for
// at most 2 minutes.
func defaultRetryOptions() RetryOptions {
	return RetryOptions{InitialInterval: 200 * time.Millisecond, MaxInterval: 10 * time.Second, MaxElapsedTime: 2 * time.Minute}
}

// Retry calls op until it succeeds, fails permanently, the bounds are
// reached or ctx ends. Delays grow exponentially with jitter. Errors that
// retrying cannot fix (see isRetryable) end it at once; the error returned
// is op's last error (wrapped with the context's error if ctx ended).
//
// Use it for member writes: creating or deleting a pod in a member, etc.
// Reads need no helper: informers retry on their own.
func Retry(ctx context.Context, opts RetryOptions, op func(ctx context.Context) error) error {
	def := defaultRetryOptions()
	if opts.InitialInterval <= 0 {
		opts.InitialInterval = def.InitialInterval
	}
	if opts.MaxInterval <= 0 {
		opts.MaxInterval = def.MaxInterval
	}
	exp := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(opts.InitialInterval),
		backoff.WithMaxInterval(opts.MaxInterval),
		backoff.WithMaxElapsedTime(opts.MaxElapsedTime),
		backoff.WithRandomizationFactor(0.5),
		backoff.WithMultiplier(2),
	)
	var b backoff.BackOff = exp
	if opts.MaxRetries > 0 {
		b = backoff.WithMaxRetries(b, opts.MaxRetries)
	}
	var last error
	err := backoff.RetryNotify(func() error {
		if err := ctx.Err(); err != nil {
			return backoff.Permanent(err)
		}
		err := op(ctx)
		if err == nil {
			return nil
		}
		last = err
		if !isRetryable(err) {
			return backoff.Permanent(err)
		}
		return err
	}, backoff.WithContext(b, ctx), opts.Notify)
	if err != nil && last != nil && !errors.Is(err, last) {
		// The context ended while waiting: report both.
		return fmt.Errorf("%w (last error: %w)", err, last)
	}
	return err
}

// isRetryable reports whether retrying a member call at once may help:
// network errors and timeouts, an open breaker, 502/503/504, 429 (too many
// requests) and 409 (conflict: the caller re-reads and tries again) are
// retryable; a 500 (the member's own answer, e.g. its admission webhook
// failing), every other 4xx (bad request, forbidden, not found, invalid,
// …), TLS and configuration errors, and a cancelled context are not: the
// caller's queue retries those with its backoff. (Retry itself stops when
// its own context ends.)
func isRetryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		switch code := int(status.Status().Code); {
		case code == http.StatusConflict || code == http.StatusTooManyRequests || code >= 500 && code != http.StatusInternalServerError:
			return true
		case code >= 400:
			return false
		}
		// A status without an HTTP code, e.g. a client-side timeout.
		return apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err)
	}
	return countsForBreaker(Classify(err))
}
