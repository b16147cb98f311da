package member

import (
	"context"
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var podsGR = schema.GroupResource{Resource: "pods"}

func fastRetry() RetryOptions {
	return RetryOptions{InitialInterval: time.Millisecond, MaxInterval: 5 * time.Millisecond, MaxElapsedTime: 5 * time.Second}
}

func TestIsRetryable(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		// A 500 is the member's answer (its admission failing the
		// request): the caller's queue retries it with backoff; retrying
		// at once would hold a worker for nothing.
		{"500", apierrors.NewInternalError(errors.New("boom")), false},
		{"503", apierrors.NewServiceUnavailable("down"), true},
		{"429", apierrors.NewTooManyRequests("slow down", 1), true},
		{"409", apierrors.NewConflict(podsGR, "p", errors.New("changed")), true},
		{"504", apierrors.NewTimeoutError("slow", 1), true},
		{"400", apierrors.NewBadRequest("bad"), false},
		{"401", apierrors.NewUnauthorized("who"), false},
		{"403", apierrors.NewForbidden(podsGR, "p", errors.New("no")), false},
		{"404", apierrors.NewNotFound(podsGR, "p"), false},
		{"410", apierrors.NewResourceExpired("gone"), false},
		{"422", apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "p", nil), false},
		{"refused", errRefused, true},
		{"breaker open", &BreakerOpenError{Cluster: "east"}, true},
		{"cancelled", context.Canceled, false},
		{"deadline", context.DeadlineExceeded, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := isRetryable(tc.err); got != tc.want {
				t.Errorf("isRetryable(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

func TestRetrySucceedsAfterTransientErrors(t *testing.T) {
	calls := 0
	var notified []time.Duration
	opts := fastRetry()
	opts.Notify = func(err error, d time.Duration) { notified = append(notified, d) }
	err := Retry(context.Background(), opts, func(ctx context.Context) error {
		calls++
		if calls < 4 {
			return apierrors.NewServiceUnavailable("down")
		}
		return nil
	})
	if err != nil || calls != 4 || len(notified) != 3 {
		t.Fatalf("err=%v calls=%d notified=%v", err, calls, notified)
	}
}

func TestRetryStopsOnPermanentError(t *testing.T) {
	calls := 0
	notFound := apierrors.NewNotFound(podsGR, "p")
	err := Retry(context.Background(), fastRetry(), func(ctx context.Context) error {
		calls++
		return notFound
	})
	if calls != 1 || !apierrors.IsNotFound(err) {
		t.Fatalf("calls=%d err=%v", calls, err)
	}
}

func TestRetryBoundedByMaxRetries(t *testing.T) {
	calls := 0
	opts := fastRetry()
	opts.MaxRetries = 3
	err := Retry(context.Background(), opts, func(ctx context.Context) error {
		calls++
		return apierrors.NewTooManyRequests("slow down", 0)
	})
	if calls != 4 || !apierrors.IsTooManyRequests(err) {
		t.Fatalf("calls=%d err=%v", calls, err)
	}
}

func TestRetryBoundedByElapsedTime(t *testing.T) {
	opts := RetryOptions{InitialInterval: 5 * time.Millisecond, MaxInterval: 10 * time.Millisecond, MaxElapsedTime: 100 * time.Millisecond}
	start := time.Now()
	err := Retry(context.Background(), opts, func(ctx context.Context) error { return errRefused })
	if !errors.Is(err, errRefused) {
		t.Fatalf("err = %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %s with a 100ms bound", d)
	}
}

func TestRetryHonoursContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	opts := RetryOptions{InitialInterval: 20 * time.Millisecond, MaxInterval: 20 * time.Millisecond}
	start := time.Now()
	err := Retry(ctx, opts, func(ctx context.Context) error { return errRefused })
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, errRefused) {
		t.Fatalf("err = %v, want both the context error and the last error", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("took %s past a 50ms context", d)
	}
}

func TestRetryJitter(t *testing.T) {
	// Delays grow and are jittered: two runs do not produce the same sequence.
	seq := func() []time.Duration {
		var ds []time.Duration
		opts := RetryOptions{InitialInterval: time.Millisecond, MaxInterval: 50 * time.Millisecond, MaxRetries: 5,
			Notify: func(_ error, d time.Duration) { ds = append(ds, d) }}
		_ = Retry(context.Background(), opts, func(ctx context.Context) error { return errRefused })
		return ds
	}
	a, b := seq(), seq()
	if len(a) != 5 || len(b) != 5 {
		t.Fatalf("retries: %v %v", a, b)
	}
	same := true
	for i := range a {
		if a[i] != b[i] {
			same = false
		}
	}
	if same {
		t.Errorf("no jitter: %v", a)
	}
	if a[4] < 4*time.Millisecond {
		t.Errorf("delays do not grow: %v", a)
	}
}
