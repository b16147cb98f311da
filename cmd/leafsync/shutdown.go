package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"
)

// shutdownSignals are the signals that stop `leafsync run`.
var shutdownSignals = []os.Signal{os.Interrupt, syscall.SIGTERM}

// drainingContext is the manager's context in sharded mode: at the first
// signal the replica drains — drain marks its shard Lease draining, so the
// other replicas take its members (make before break), and waits until
// it holds none — for at most timeout; then the context ends and the
// manager stops (which releases the shard Lease). A second signal exits
// at once, as controller-runtime's handler does.
func drainingContext(log logr.Logger, signals <-chan os.Signal, drain func(context.Context) error, timeout time.Duration, exit func(code int)) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		sig := <-signals
		log.Info("stopping: handing this replica's members over first", "signal", sig.String(), "drainTimeout", timeout.String())
		dctx, dcancel := context.WithTimeout(ctx, timeout)
		defer dcancel()
		done := make(chan error, 1)
		go func() { done <- drain(dctx) }()
		select {
		case err := <-done:
			if err != nil {
				log.Info("the drain ended before every member was handed over; stopping all the same", "error", err.Error())
			}
		case sig := <-signals:
			log.Info("second signal: exiting at once", "signal", sig.String())
			exit(1)
			return
		}
		cancel()
		<-signals
		exit(1)
	}()
	return ctx
}

// signalContext is the manager's context: drainingContext when drain is
// set (sharded), controller-runtime's handler otherwise.
func signalContext(log logr.Logger, drain func(context.Context) error, timeout time.Duration, plain func() context.Context) context.Context {
	if drain == nil {
		return plain()
	}
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, shutdownSignals...)
	return drainingContext(log, signals, drain, timeout, os.Exit)
}
