// Package hostclock tells the host API server's time on leafsync's clock.
//
// Times in host objects come from the host's control plane: a pod's
// deletionTimestamp from the API server, a DisruptionTarget condition or a
// NoExecute taint's timeAdded from kube-controller-manager (which runs next
// to it). leafsync's own times (its clock, the hysteresis engine's
// outage times) come from another machine. A duration is measured between
// two times of one clock: a host time against Now here, a leafsync time
// against leafsync's clock, never one against the other.
//
// The offset between the two clocks is measured from the Date header of
// the host's answers (RFC 7231: the server's time, to the second). Each
// answer bounds the offset: the server wrote Date between sending and
// receiving, so offset ∈ [Date − received, Date + 1s − sent]. The bounds of
// successive answers are intersected, which narrows the estimate well
// below a second; when they no longer overlap, one of the clocks stepped,
// and the estimate starts again from the latest answer.
package hostclock

import (
	"net/http"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Clock is the host API server's clock as leafsync sees it: leafsync's own
// clock plus the measured offset (zero until an answer was seen).
type Clock struct {
	local clock.PassiveClock

	mu     sync.Mutex
	lo, hi time.Duration // bounds of host time − local time
	known  bool
}

// New returns a Clock over leafsync's clock (the real clock when nil).
func New(local clock.PassiveClock) *Clock {
	if local == nil {
		local = clock.RealClock{}
	}
	return &Clock{local: local}
}

// Now is the host API server's time now.
func (c *Clock) Now() time.Time { return c.local.Now().Add(c.Offset()) }

// Offset is host time minus leafsync's time: positive when leafsync's clock
// is behind the host's.
func (c *Clock) Offset() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.known {
		return 0
	}
	return c.lo + (c.hi-c.lo)/2
}

// Observe takes one answer: sent and received on leafsync's clock, date
// the answer's Date header.
func (c *Clock) Observe(sent, received, date time.Time) {
	lo, hi := date.Sub(received), date.Add(time.Second).Sub(sent)
	if hi < lo {
		return // received before sent: not an answer to learn from
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.known && lo <= c.hi && hi >= c.lo {
		c.lo, c.hi = max(c.lo, lo), min(c.hi, hi)
		return
	}
	c.lo, c.hi, c.known = lo, hi, true
}

// Wrap returns a RoundTripper that observes the Date of every answer
// (for rest.Config.Wrap).
func (c *Clock) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper{c: c, next: rt}
}

type roundTripper struct {
	c    *Clock
	next http.RoundTripper
}

func (r roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	sent := r.c.local.Now()
	resp, err := r.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if d, perr := http.ParseTime(resp.Header.Get("Date")); perr == nil {
		r.c.Observe(sent, r.c.local.Now(), d)
	}
	return resp, nil
}
