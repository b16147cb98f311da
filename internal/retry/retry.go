// Package retry runs cenkalti/backoff's retry loop on an injected clock
// (k8s.io/utils/clock), so that a test moves time instead of waiting.
//
// backoff/v4 is the house library for sleep-and-retry (member.Retry uses
// it), and it is the only maintained loop whose waits and bounds can both
// follow an injected clock: its Timer is pluggable and ExponentialBackOff
// reads elapsed time from a Clock. apimachinery's wait loops
// (ExponentialBackoffWithContext, DelayFunc.Until) wait on the real clock,
// and its clock-driven BackoffUntil has no way to stop on success.
package retry

import (
	"context"
	"time"

	"github.com/cenkalti/backoff/v4"
	"k8s.io/utils/clock"
)

// Notify calls op until it succeeds, b says stop or ctx ends, waiting on clk
// between tries for as long as b says; notify (may be nil) hears each
// failure and the wait that follows it. It returns op's last error, or
// ctx's error if ctx ended. b's own elapsed-time bound, if it has one, must
// read clk too (backoff.WithClockProvider).
func Notify(ctx context.Context, clk clock.Clock, b backoff.BackOff, op backoff.Operation, notify backoff.Notify) error {
	return backoff.RetryNotifyWithTimer(op, backoff.WithContext(b, ctx), notify, &timer{clk: clk})
}

// timer is backoff.Timer on clk.
type timer struct {
	clk clock.Clock
	t   clock.Timer
}

func (t *timer) Start(d time.Duration) {
	if t.t == nil {
		t.t = t.clk.NewTimer(d)
		return
	}
	t.t.Reset(d)
}

func (t *timer) Stop() {
	if t.t != nil {
		t.t.Stop()
	}
}

func (t *timer) C() <-chan time.Time { return t.t.C() }
