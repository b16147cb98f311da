package member

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/sony/gobreaker/v2"

	"github.com/leafsync/leafsync/hysteresis"
)

// scripted is a RoundTripper whose outcome the test sets.
type scripted struct {
	calls atomic.Int64
	mu    sync.Mutex
	code  int
	err   error
	block chan struct{} // if set, calls wait on it
}

func (s *scripted) set(code int, err error) {
	s.mu.Lock()
	s.code, s.err = code, err
	s.mu.Unlock()
}

func (s *scripted) RoundTrip(req *http.Request) (*http.Response, error) {
	s.calls.Add(1)
	s.mu.Lock()
	code, err, block := s.code, s.err, s.block
	s.mu.Unlock()
	if block != nil {
		<-block
	}
	if err != nil {
		return nil, err
	}
	return &http.Response{StatusCode: code, Status: http.StatusText(code), Body: io.NopCloser(strings.NewReader("")), Request: req}, nil
}

func get(t *testing.T, rt http.RoundTripper) error {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "https://member.example/api", nil)
	resp, err := rt.RoundTrip(req)
	if resp != nil {
		resp.Body.Close()
	}
	return err
}

type changes struct {
	mu   sync.Mutex
	list []string
}

func (c *changes) record(cluster string, from, to BreakerState) {
	c.mu.Lock()
	c.list = append(c.list, from.String()+">"+to.String())
	c.mu.Unlock()
}

func (c *changes) get() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.list...)
}

var errRefused = &netOpError{syscall.ECONNREFUSED}

// netOpError mimics a dial error without a real socket.
type netOpError struct{ err error }

func (e *netOpError) Error() string   { return "dial tcp 10.0.0.1:6443: " + e.err.Error() }
func (e *netOpError) Unwrap() error   { return e.err }
func (e *netOpError) Timeout() bool   { return false }
func (e *netOpError) Temporary() bool { return false }

func TestBreakerOpensAfterConsecutiveFailures(t *testing.T) {
	next := &scripted{}
	var ch changes
	b := newBreaker("east", BreakerSettings{ConsecutiveFailures: 3, OpenTimeout: time.Hour}, logr.Discard(), ch.record)
	rt := b.Wrap(next)

	// Failures interrupted by a success do not open it.
	next.set(0, errRefused)
	_ = get(t, rt)
	_ = get(t, rt)
	next.set(200, nil)
	if err := get(t, rt); err != nil {
		t.Fatal(err)
	}
	next.set(0, errRefused)
	_ = get(t, rt)
	_ = get(t, rt)
	if b.State() != BreakerClosed {
		t.Fatalf("state %s after non-consecutive failures", b.State())
	}
	// The third consecutive failure opens it.
	_ = get(t, rt)
	if b.State() != BreakerOpen {
		t.Fatalf("state %s after 3 consecutive failures", b.State())
	}
	// Now calls fail fast, without reaching the member.
	calls := next.calls.Load()
	start := time.Now()
	for i := 0; i < 100; i++ {
		err := get(t, rt)
		var open *BreakerOpenError
		if !errors.As(err, &open) || !errors.Is(err, gobreaker.ErrOpenState) {
			t.Fatalf("err = %v, want *BreakerOpenError", err)
		}
		if open.Class != hysteresis.ClassNetwork || !strings.Contains(open.Error(), "connection refused") {
			t.Fatalf("open error %+v lacks the last failure", open)
		}
	}
	if next.calls.Load() != calls {
		t.Error("calls reached the member while the breaker was open")
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("100 rejected calls took %s", d)
	}
	st := b.Stats()
	if st.Opened != 1 || st.Rejected != 100 || st.Failures != 5 || st.State != BreakerOpen {
		t.Errorf("stats = %+v", st)
	}
	if got := ch.get(); len(got) != 1 || got[0] != "closed>open" {
		t.Errorf("changes = %v", got)
	}
}

func TestBreakerCountsOnlyNetworkAndServerFailures(t *testing.T) {
	for _, tc := range []struct {
		name   string
		code   int
		err    error
		counts bool
	}{
		// Only answers that say the member cannot be reached count: a 500
		// is the member's own answer (its admission webhook failing a pod
		// create), a 429 its rate limit; neither is an outage.
		{"500", 500, nil, false},
		{"429", 429, nil, false},
		{"502", 502, nil, true},
		{"503", 503, nil, true},
		{"504", 504, nil, true},
		{"refused", 0, errRefused, true},
		{"timeout", 0, context.DeadlineExceeded, true},
		{"401", 401, nil, false},
		{"403", 403, nil, false},
		{"404", 404, nil, false},
		{"409", 409, nil, false},
		{"200", 200, nil, false},
		{"unknown CA", 0, &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next := &scripted{}
			next.set(tc.code, tc.err)
			b := newBreaker("east", BreakerSettings{ConsecutiveFailures: 2, OpenTimeout: time.Hour}, logr.Discard(), nil)
			rt := b.Wrap(next)
			for i := 0; i < 5; i++ {
				_ = get(t, rt)
			}
			if open := b.State() == BreakerOpen; open != tc.counts {
				t.Errorf("open = %v, want %v", open, tc.counts)
			}
		})
	}
}

func TestBreakerIgnoresCallerCancellation(t *testing.T) {
	next := &scripted{}
	next.set(0, context.Canceled)
	b := newBreaker("east", BreakerSettings{ConsecutiveFailures: 1, OpenTimeout: time.Hour}, logr.Discard(), nil)
	rt := b.Wrap(next)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://member.example/api", nil)
	_, _ = rt.RoundTrip(req)
	if b.State() != BreakerClosed {
		t.Errorf("a cancelled call opened the breaker")
	}
}

func TestBreakerHalfOpenTrial(t *testing.T) {
	next := &scripted{}
	var ch changes
	b := newBreaker("east", BreakerSettings{ConsecutiveFailures: 1, OpenTimeout: 50 * time.Millisecond, HalfOpenRequests: 1}, logr.Discard(), ch.record)
	rt := b.Wrap(next)

	next.set(503, nil)
	_ = get(t, rt)
	if b.State() != BreakerOpen {
		t.Fatalf("state %s", b.State())
	}
	time.Sleep(80 * time.Millisecond)
	if b.State() != BreakerHalfOpen {
		t.Fatalf("state %s after the open timeout", b.State())
	}
	// A failed trial reopens it.
	_ = get(t, rt)
	if b.State() != BreakerOpen {
		t.Fatalf("state %s after a failed trial", b.State())
	}
	time.Sleep(80 * time.Millisecond)

	// Half-open: exactly one trial call goes through; concurrent calls
	// fail fast while it is in flight.
	block := make(chan struct{})
	next.mu.Lock()
	next.code, next.block = 200, block
	next.mu.Unlock()
	before := next.calls.Load()
	trial := make(chan error, 1)
	go func() { trial <- get(t, rt) }()
	for next.calls.Load() == before {
		time.Sleep(time.Millisecond)
	}
	for i := 0; i < 5; i++ {
		err := get(t, rt)
		if !errors.Is(err, gobreaker.ErrTooManyRequests) {
			t.Fatalf("concurrent call during the trial: err = %v", err)
		}
	}
	if got := next.calls.Load() - before; got != 1 {
		t.Fatalf("%d calls reached the member during the trial, want 1", got)
	}
	next.mu.Lock()
	next.block = nil
	next.mu.Unlock()
	close(block)
	if err := <-trial; err != nil {
		t.Fatal(err)
	}
	if b.State() != BreakerClosed {
		t.Fatalf("state %s after a successful trial", b.State())
	}
	if err := get(t, rt); err != nil {
		t.Fatal(err)
	}
	want := []string{"closed>open", "open>half-open", "half-open>open", "open>half-open", "half-open>closed"}
	if got := ch.get(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("changes = %v, want %v", got, want)
	}
	st := b.Stats()
	if st.Opened != 2 || st.HalfOpened != 2 || st.Closed != 1 || st.Rejected != 5 {
		t.Errorf("stats = %+v", st)
	}
}

// A successful probe is the breaker's health check: it closes an open
// breaker at once, without waiting for the open timeout.
func TestBreakerClosedByHealthCheck(t *testing.T) {
	next := &scripted{}
	var ch changes
	b := newBreaker("east", BreakerSettings{ConsecutiveFailures: 1, OpenTimeout: time.Hour}, logr.Discard(), ch.record)
	rt := b.Wrap(next)
	next.set(0, errRefused)
	_ = get(t, rt)
	if b.State() != BreakerOpen {
		t.Fatalf("state %s", b.State())
	}
	b.HealthCheckPassed()
	if b.State() != BreakerClosed {
		t.Fatalf("state %s after a passed health check", b.State())
	}
	next.set(200, nil)
	if err := get(t, rt); err != nil {
		t.Fatalf("call after the health check: %v", err)
	}
	b.HealthCheckPassed() // closed already: no change
	if got := strings.Join(ch.get(), ","); got != "closed>open,open>closed" {
		t.Errorf("changes = %s", got)
	}
	if st := b.Stats(); st.Opened != 1 || st.Closed != 1 {
		t.Errorf("stats = %+v", st)
	}
}

// A call that was in flight on the breaker a health check replaced cannot
// reopen the new one, nor report a change.
func TestBreakerStaleCallAfterHealthCheck(t *testing.T) {
	next := &scripted{}
	var ch changes
	b := newBreaker("east", BreakerSettings{ConsecutiveFailures: 1, OpenTimeout: time.Millisecond, HalfOpenRequests: 1}, logr.Discard(), ch.record)
	rt := b.Wrap(next)
	next.set(0, errRefused)
	_ = get(t, rt)
	time.Sleep(5 * time.Millisecond) // half-open: the next call is the trial
	block := make(chan struct{})
	next.mu.Lock()
	next.block = block
	next.mu.Unlock()
	before := next.calls.Load()
	trial := make(chan error, 1)
	go func() { trial <- get(t, rt) }()
	for next.calls.Load() == before {
		time.Sleep(time.Millisecond)
	}
	b.HealthCheckPassed()
	close(block) // the trial fails (refused) on the replaced breaker
	<-trial
	if b.State() != BreakerClosed {
		t.Fatalf("state %s: a stale trial reopened the breaker", b.State())
	}
	if got := strings.Join(ch.get(), ","); got != "closed>open,open>half-open,half-open>closed" {
		t.Errorf("changes = %s", got)
	}
}
