package main

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
)

// TestDrainBeforeStop: the first signal drains, and the manager's context
// ends only once the drain is over.
func TestDrainBeforeStop(t *testing.T) {
	signals := make(chan os.Signal, 2)
	started, release := make(chan time.Time, 1), make(chan struct{})
	drain := func(ctx context.Context) error {
		d, _ := ctx.Deadline()
		started <- d
		<-release
		return nil
	}
	exited := make(chan int, 1)
	ctx := drainingContext(testr.New(t), signals, drain, time.Minute, func(code int) { exited <- code })
	signals <- syscall.SIGTERM
	select {
	case d := <-started:
		if time.Until(d) > time.Minute || time.Until(d) < 50*time.Second {
			t.Errorf("drain deadline in %s, want the drain timeout (1m)", time.Until(d))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("SIGTERM did not start the drain")
	}
	select {
	case <-ctx.Done():
		t.Fatal("the manager stopped before the drain was over")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the manager did not stop after the drain")
	}
	if len(exited) != 0 {
		t.Fatal("exited although one signal came")
	}
}

// TestDrainBoundedByTimeout: a drain that does not finish is cut at the
// drain timeout, and the manager stops all the same.
func TestDrainBoundedByTimeout(t *testing.T) {
	signals := make(chan os.Signal, 2)
	drain := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
	ctx := drainingContext(testr.New(t), signals, drain, 50*time.Millisecond, func(int) { t.Error("exited on one signal") })
	signals <- os.Interrupt
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the manager did not stop at the drain timeout")
	}
}

// TestSecondSignalExits: a second signal during the drain exits at once.
func TestSecondSignalExits(t *testing.T) {
	signals := make(chan os.Signal, 2)
	drain := func(ctx context.Context) error { <-ctx.Done(); return errors.New("cut") }
	exited := make(chan int, 1)
	drainingContext(testr.New(t), signals, drain, time.Minute, func(code int) { exited <- code })
	signals <- syscall.SIGTERM
	signals <- syscall.SIGTERM
	select {
	case code := <-exited:
		if code == 0 {
			t.Errorf("exit code %d, want non-zero", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a second signal did not exit")
	}
}
