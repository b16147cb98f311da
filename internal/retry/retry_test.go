package retry

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	clocktesting "k8s.io/utils/clock/testing"
)

// The waits between tries are on the injected clock: nothing is tried
// again until the clock moves, and then at the delay the BackOff gave.
func TestNotifyWaitsOnTheClock(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	start := clk.Now()
	var tries []time.Duration
	done := make(chan error, 1)
	go func() {
		done <- Notify(context.Background(), clk, backoff.NewConstantBackOff(time.Second), func() error {
			tries = append(tries, clk.Since(start))
			if len(tries) < 3 {
				return errors.New("not yet")
			}
			return nil
		}, nil)
	}()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case err := <-done:
			if err != nil || len(tries) != 3 || tries[1] != time.Second || tries[2] != 2*time.Second {
				t.Fatalf("tries at %v, err %v; want at 0s, 1s, 2s and success", tries, err)
			}
			return
		case <-deadline:
			t.Fatal("Notify never returned")
		default:
		}
		if clk.HasWaiters() {
			clk.Step(100 * time.Millisecond)
		}
		runtime.Gosched()
	}
}

// A context that ends stops the waiting at once.
func TestNotifyStopsWithTheContext(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Notify(ctx, clk, backoff.NewConstantBackOff(time.Hour), func() error { return errors.New("down") }, nil)
	}()
	for !clk.HasWaiters() {
		runtime.Gosched()
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Notify did not stop with its context")
	}
}
