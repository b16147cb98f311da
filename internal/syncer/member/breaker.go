package member

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/sony/gobreaker/v2"

	"github.com/leafsync/leafsync/hysteresis"
)

// BreakerState is the state of a member's circuit breaker.
type BreakerState = gobreaker.State

// Breaker states.
const (
	BreakerClosed   = gobreaker.StateClosed
	BreakerHalfOpen = gobreaker.StateHalfOpen
	BreakerOpen     = gobreaker.StateOpen
)

// BreakerSettings configure a member's circuit breaker.
type BreakerSettings struct {
	// ConsecutiveFailures (transport errors, 502/503/504) open the breaker.
	ConsecutiveFailures uint32
	// OpenTimeout is how long the breaker stays open (failing every call
	// at once) before it lets trial calls through (half-open).
	OpenTimeout time.Duration
	// HalfOpenRequests is how many trial calls may be in flight while
	// half-open; that many consecutive successes close the breaker again.
	HalfOpenRequests uint32
}

// defaultBreakerSettings open after 5 consecutive failures, for 5s, with one
// trial call.
func defaultBreakerSettings() BreakerSettings {
	return BreakerSettings{ConsecutiveFailures: 5, OpenTimeout: 5 * time.Second, HalfOpenRequests: 1}
}

// BreakerStats are cumulative counters of one breaker.
type BreakerStats struct {
	// State is the current state.
	State BreakerState
	// Opened, HalfOpened and Closed count transitions into each state.
	Opened, HalfOpened, Closed uint64
	// Rejected counts calls failed fast by the open (or full half-open) breaker.
	Rejected uint64
	// Failures counts calls that counted as breaker failures.
	Failures uint64
}

// BreakerOpenError is returned, without any network traffic, for a call the
// breaker refuses.
type BreakerOpenError struct {
	Cluster string
	// State is the breaker's state (open, or half-open with its trial calls
	// in flight).
	State BreakerState
	// Class is the class of the failure that last counted against the
	// breaker (network or server), 0 if none.
	Class hysteresis.Class
	// Last is that failure's text.
	Last string
}

func (e *BreakerOpenError) Error() string {
	msg := fmt.Sprintf("circuit breaker for member %q is %s, failing fast", e.Cluster, e.State)
	if e.Last != "" {
		msg += " (last failure: " + e.Last + ")"
	}
	return msg
}

// Is makes errors.Is(err, gobreaker.ErrOpenState) work.
func (e *BreakerOpenError) Is(target error) bool {
	return target == gobreaker.ErrOpenState || target == gobreaker.ErrTooManyRequests
}

var (
	errBreakerFailure  = errors.New("breaker failure")
	errBreakerExcluded = errors.New("breaker excluded")
)

// Breaker is a member's circuit breaker at the HTTP transport level: every
// request to the member but the readiness probe (client-go calls, informer
// lists and watches) passes through it. Only what says the member cannot be
// reached counts: transport errors and 502/503/504 answers. A 500 (the
// member's admission refusing a pod), a 429 or any 4xx is the member
// answering, and is its caller's business. Consecutive failures open the
// breaker and calls then fail fast with *BreakerOpenError; after
// OpenTimeout a trial call is let through, and a successful probe (the
// breaker's health check, HealthCheckPassed) closes it at once.
//
// The breaker never feeds readiness: the prober has its own request path.
type Breaker struct {
	cluster  string
	settings gobreaker.Settings
	// cb is replaced by a fresh, closed breaker when a health check passes
	// (gobreaker has no reset); calls in flight on the old one finish there.
	cb       atomic.Pointer[gobreaker.TwoStepCircuitBreaker[struct{}]]
	log      logr.Logger
	onChange func(cluster string, from, to BreakerState)

	opened, halfOpened, closed, rejected, failures atomic.Uint64

	mu        sync.Mutex
	lastClass hysteresis.Class
	lastErr   string
}

// newBreaker makes a breaker for one member. onChange (may be nil) is called
// on every state change, synchronously: it must not block or call the
// breaker.
func newBreaker(cluster string, s BreakerSettings, log logr.Logger, onChange func(cluster string, from, to BreakerState)) *Breaker {
	b := &Breaker{cluster: cluster, log: log, onChange: onChange}
	if s.ConsecutiveFailures == 0 {
		s.ConsecutiveFailures = defaultBreakerSettings().ConsecutiveFailures
	}
	threshold := s.ConsecutiveFailures
	b.settings = gobreaker.Settings{
		Name:        cluster,
		MaxRequests: s.HalfOpenRequests,
		Timeout:     s.OpenTimeout,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= threshold },
		IsSuccessful: func(err error) bool {
			return err == nil
		},
		IsExcluded: func(err error) bool {
			return errors.Is(err, errBreakerExcluded)
		},
	}
	b.cb.Store(b.fresh())
	return b
}

// fresh returns a closed gobreaker whose state changes are reported only
// while it is the current one.
func (b *Breaker) fresh() *gobreaker.TwoStepCircuitBreaker[struct{}] {
	var self *gobreaker.TwoStepCircuitBreaker[struct{}]
	s := b.settings
	s.OnStateChange = func(_ string, from, to gobreaker.State) {
		if b.cb.Load() == self {
			b.stateChanged(from, to)
		}
	}
	self = gobreaker.NewTwoStepCircuitBreaker[struct{}](s)
	return self
}

// HealthCheckPassed closes the breaker: the member answered its readiness
// probe, so calls may flow again without waiting for OpenTimeout.
func (b *Breaker) HealthCheckPassed() {
	cur := b.cb.Load()
	from := cur.State()
	if from == BreakerClosed {
		return
	}
	if b.cb.CompareAndSwap(cur, b.fresh()) {
		b.stateChanged(from, BreakerClosed)
	}
}

func (b *Breaker) stateChanged(from, to gobreaker.State) {
	switch to {
	case BreakerOpen:
		b.opened.Add(1)
		b.mu.Lock()
		last := b.lastErr
		b.mu.Unlock()
		b.log.Info("circuit breaker opened: calls to the member fail fast", "cluster", b.cluster, "from", from.String(), "lastFailure", last)
	case BreakerHalfOpen:
		b.halfOpened.Add(1)
		b.log.V(1).Info("circuit breaker half-open: letting a trial call through", "cluster", b.cluster)
	case BreakerClosed:
		b.closed.Add(1)
		b.log.Info("circuit breaker closed: member answers again", "cluster", b.cluster, "from", from.String())
	}
	if b.onChange != nil {
		b.onChange(b.cluster, from, to)
	}
}

// State returns the breaker's current state.
func (b *Breaker) State() BreakerState { return b.cb.Load().State() }

// Stats returns the breaker's counters.
func (b *Breaker) Stats() BreakerStats {
	return BreakerStats{
		State:      b.State(),
		Opened:     b.opened.Load(),
		HalfOpened: b.halfOpened.Load(),
		Closed:     b.closed.Load(),
		Rejected:   b.rejected.Load(),
		Failures:   b.failures.Load(),
	}
}

// Wrap returns rt behind the breaker; use it as rest.Config.WrapTransport.
func (b *Breaker) Wrap(rt http.RoundTripper) http.RoundTripper {
	return &breakerTransport{b: b, next: rt}
}

type breakerTransport struct {
	b    *Breaker
	next http.RoundTripper
}

// WrappedRoundTripper lets client-go's debugging helpers see through.
func (t *breakerTransport) WrappedRoundTripper() http.RoundTripper { return t.next }

func (t *breakerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	b := t.b
	cb := b.cb.Load()
	done, err := cb.Allow()
	if err != nil {
		b.rejected.Add(1)
		b.mu.Lock()
		oe := &BreakerOpenError{Cluster: b.cluster, State: cb.State(), Class: b.lastClass, Last: b.lastErr}
		b.mu.Unlock()
		return nil, oe
	}
	resp, err := t.next.RoundTrip(req)
	done(b.outcome(req, resp, err))
	return resp, err
}

// outcome maps a call's result to what the breaker counts.
func (b *Breaker) outcome(req *http.Request, resp *http.Response, err error) error {
	var class hysteresis.Class
	var detail string
	switch {
	case err != nil:
		// The caller gave up (an informer stopping, a cancelled context):
		// that says nothing about the member.
		if errors.Is(req.Context().Err(), context.Canceled) {
			return errBreakerExcluded
		}
		if class = Classify(err); !countsForBreaker(class) {
			return errBreakerExcluded // TLS/config: waiting does not help
		}
		detail = err.Error()
	case unreachableStatus(resp.StatusCode):
		class = hysteresis.ClassServer
		detail = fmt.Sprintf("%s %s: %s", req.Method, req.URL.Path, resp.Status)
	default:
		return nil // the member answered
	}
	b.failures.Add(1)
	b.mu.Lock()
	b.lastClass, b.lastErr = class, detail
	b.mu.Unlock()
	return errBreakerFailure
}

// unreachableStatus: answers of a gateway or an API server that cannot
// serve at all (502 bad gateway, 503 unavailable, 504 gateway timeout).
// Other codes are the member's answer to this request.
func unreachableStatus(code int) bool {
	return code == http.StatusBadGateway || code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout
}
