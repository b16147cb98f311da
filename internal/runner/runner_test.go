package runner

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	clocktesting "k8s.io/utils/clock/testing"
)

// recorder records the fake time of each reconcile and answers with the
// scripted result for the n-th call.
type recorder struct {
	clk    *clocktesting.FakeClock
	answer func(n int) (Result, error)
	mu     sync.Mutex
	at     []time.Time
}

func (r *recorder) Reconcile(_ context.Context, _ string) (Result, error) {
	r.mu.Lock()
	r.at = append(r.at, r.clk.Now())
	n := len(r.at)
	r.mu.Unlock()
	return r.answer(n)
}

func (r *recorder) calls() []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Time(nil), r.at...)
}

func start(t *testing.T, rec *recorder) *Runner[string] {
	t.Helper()
	r := New[string](rec, Options[string]{Name: "test", Workers: 2, MinBackoff: time.Second, MaxBackoff: 4 * time.Second, Clock: rec.clk, Logger: logr.Discard()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

// stepUntil advances the fake clock in small steps until rec has seen n
// calls. The real-time wait per step only lets the workers run; the
// assertions are on the fake times the calls recorded.
func stepUntil(t *testing.T, rec *recorder, n int) []time.Time {
	t.Helper()
	for range 400 {
		if c := rec.calls(); len(c) >= n {
			return c
		}
		time.Sleep(5 * time.Millisecond)
		rec.clk.Step(100 * time.Millisecond)
	}
	t.Fatalf("only %d of %d reconciles after 40s of fake time", len(rec.calls()), n)
	return nil
}

func TestRequeueAfterWaitsAtLeastItsDelay(t *testing.T) {
	rec := &recorder{clk: clocktesting.NewFakeClock(time.Unix(0, 0)), answer: func(int) (Result, error) {
		return Result{RequeueAfter: 5 * time.Second}, nil
	}}
	r := start(t, rec)
	r.Add("a")
	c := stepUntil(t, rec, 3)
	for i := 1; i < len(c); i++ {
		if gap := c[i].Sub(c[i-1]); gap < 5*time.Second {
			t.Fatalf("reconcile %d came %s after the previous one, before its RequeueAfter of 5s", i+1, gap)
		}
	}
	if f := r.Failures("a"); f != 0 {
		t.Fatalf("a requeue after success counted as %d failures", f)
	}
}

func TestErrorsBackOffAndSuccessForgets(t *testing.T) {
	rec := &recorder{clk: clocktesting.NewFakeClock(time.Unix(0, 0)), answer: func(n int) (Result, error) {
		if n <= 3 {
			return Result{}, errors.New("member down")
		}
		return Result{}, nil
	}}
	r := start(t, rec)
	r.Add("a")
	c := stepUntil(t, rec, 4)
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		if gap := c[i+1].Sub(c[i]); gap < want {
			t.Fatalf("retry %d came %s after failure %d, before its backoff of %s", i+1, gap, i+1, want)
		}
	}
	for range 2000 {
		if r.Failures("a") == 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("failures not forgotten after a success: %d", r.Failures("a"))
}

func TestAddWhileQueuedIsOneReconcile(t *testing.T) {
	block := make(chan struct{})
	var mu sync.Mutex
	n := 0
	r := New[string](Func[string](func(context.Context, string) (Result, error) {
		mu.Lock()
		n++
		mu.Unlock()
		<-block
		return Result{}, nil
	}), Options[string]{Name: "test", Workers: 1, Logger: logr.Discard()})
	r.Add("busy") // the one worker holds it
	r.Add("a")
	r.Add("a")
	if r.Len() != 2 {
		t.Fatalf("queue length %d, want 2 (busy and one a)", r.Len())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	close(block)
	for range 2000 {
		mu.Lock()
		got := n
		mu.Unlock()
		if got == 2 && r.Len() == 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	if n != 2 {
		t.Fatalf("%d reconciles, want 2 (a added twice while queued is one)", n)
	}
}
