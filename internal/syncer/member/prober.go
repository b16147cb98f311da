package member

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/syncer/metrics"
)

// maxProbeBody bounds what a probe reads of an answer: enough for "ok" or
// a Kubernetes Status, and for the start of anything else.
const maxProbeBody = 4 << 10

// ObserveFunc receives every probe outcome of a member and returns the
// probe interval the engine's decision asks for (zero: unchanged).
type ObserveFunc func(obs hysteresis.Observation) (interval time.Duration)

// Prober checks a member's API server with GET /readyz and classifies the
// outcome for the hysteresis engine. Only the API server can say "I am
// here" (a 200 with the body "ok") or "leafsync is at fault" (a
// Kubernetes Status with 401/403/4xx: auth or config); any other answer,
// such as a load balancer's HTML 404 once the API server behind it is
// gone, is outage evidence (classifyAnswer). It is the only source of
// readiness evidence; its client must not pass through the member's
// breaker, and must follow no redirect (the credentials would go with it).
type Prober struct {
	cluster string
	client  *http.Client
	url     string
	timeout time.Duration
	observe ObserveFunc
	success func()
	clock   clock.Clock

	mu       sync.Mutex
	last     hysteresis.Observation
	interval time.Duration
}

// ProberOptions configure a Prober.
type ProberOptions struct {
	Cluster string
	// Client sends the probe; its transport carries the member's
	// credentials, and no breaker. Its Timeout is ignored (Timeout below is
	// used).
	Client *http.Client
	// URL is the member's /readyz URL.
	URL string
	// Timeout bounds one probe (and the probe interval bounds it too).
	Timeout time.Duration
	// Interval is the probe interval until Observe returns another (so a
	// changed threshold applies from the next probe).
	Interval time.Duration
	// Observe receives each outcome (may be nil).
	Observe ObserveFunc
	// OnSuccess is called after every successful probe (may be nil): the
	// breaker's health check.
	OnSuccess func()
	// Clock times the probes and stamps their outcomes (the real clock
	// when nil).
	Clock clock.Clock
}

// NewProber returns a Prober.
func NewProber(o ProberOptions) *Prober {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Timeout <= 0 {
		o.Timeout = 3 * time.Second
	}
	if o.Interval <= 0 {
		o.Interval = hysteresis.DefaultConfig().ProbeInterval.Duration
	}
	return &Prober{cluster: o.Cluster, client: o.Client, url: o.URL, timeout: o.Timeout, interval: o.Interval, observe: o.Observe, success: o.OnSuccess, clock: o.Clock}
}

// Last returns the last probe outcome (zero Time if none yet).
func (p *Prober) Last() hysteresis.Observation {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// Interval is the current probe interval.
func (p *Prober) Interval() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.interval
}

// Run probes at once, then every interval, until ctx ends. Probes do not
// overlap: a slow probe delays the next one.
func (p *Prober) Run(ctx context.Context) {
	for {
		start := p.clock.Now()
		obs, ok := p.probe(ctx)
		if !ok {
			return
		}
		if p.observe != nil {
			if next := p.observe(obs); next > 0 {
				p.mu.Lock()
				p.interval = next
				p.mu.Unlock()
			}
		}
		wait := p.Interval() - p.clock.Since(start)
		if wait <= 0 {
			continue
		}
		t := p.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// Probe runs one probe and returns (and records) its outcome.
func (p *Prober) Probe(ctx context.Context) hysteresis.Observation {
	obs, _ := p.probe(ctx)
	return obs
}

// probe returns ok=false when ctx ended during the probe (the outcome then
// says nothing about the member and is not recorded).
func (p *Prober) probe(ctx context.Context) (hysteresis.Observation, bool) {
	// A probe never outlasts the interval: the engine counts at most
	// 1.5×probeInterval of evidence per observation, so probes must keep
	// coming at least that often.
	timeout := min(p.timeout, p.Interval())
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := p.clock.Now()
	obs := p.do(pctx, timeout)
	if ctx.Err() != nil {
		return obs, false
	}
	result := "ok"
	if !obs.OK {
		result = obs.Class.String()
	}
	metrics.ProbeResultsVec.WithLabelValues(p.cluster, result).Inc()
	metrics.ProbeDurationVec.WithLabelValues(p.cluster).Observe(p.clock.Since(start).Seconds())
	p.mu.Lock()
	p.last = obs
	p.mu.Unlock()
	if obs.OK && p.success != nil {
		p.success()
	}
	return obs, true
}

func (p *Prober) do(ctx context.Context, timeout time.Duration) hysteresis.Observation {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url, nil)
	if err != nil {
		return hysteresis.Observation{Time: p.clock.Now(), Class: hysteresis.ClassConfig, Detail: fmt.Sprintf("bad probe URL %q: %v", p.url, err)}
	}
	req.Header.Set("Accept", "text/plain, */*")
	resp, err := p.client.Do(req)
	if err != nil {
		class := Classify(err)
		if ctx.Err() == context.DeadlineExceeded {
			class = hysteresis.ClassNetwork
			err = fmt.Errorf("no answer within %s: %w", timeout, err)
		}
		return hysteresis.Observation{Time: p.clock.Now(), Class: class, Detail: describe(class, err.Error())}
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxProbeBody))
	_ = resp.Body.Close()
	apiStatus := isAPIStatus(body)
	class, failed := classifyAnswer(resp.StatusCode, apiStatus)
	text := strings.TrimSpace(string(body))
	if !failed {
		if text == "ok" {
			return hysteresis.Observation{Time: p.clock.Now(), OK: true}
		}
		// A captive portal, a load balancer's page: not the API server.
		class = hysteresis.ClassServer
	}
	var status metav1.Status
	if apiStatus && json.Unmarshal(body, &status) == nil && status.Message != "" {
		text = status.Message // a Kubernetes Status: its message is the useful part
	}
	if len(text) > 300 {
		text = text[:300] + "…"
	}
	detail := fmt.Sprintf("GET /readyz: %s", resp.Status)
	if loc := resp.Header.Get("Location"); loc != "" {
		if len(loc) > 300 {
			loc = loc[:300] + "…"
		}
		detail += " to " + loc + ", not followed (the member's credentials would go with it)"
	} else if text != "" {
		detail += ": " + strings.Join(strings.Fields(text), " ")
	} else {
		detail += ", empty body"
	}
	if !apiStatus && class == hysteresis.ClassServer && resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests {
		return hysteresis.Observation{Time: p.clock.Now(), Class: class,
			Detail: "member API server not reached: what answers at its address is not a Kubernetes API server (" + detail + ")"}
	}
	return hysteresis.Observation{Time: p.clock.Now(), Class: class, Detail: describe(class, detail)}
}

// describe prefixes a failure with what it most likely means.
func describe(class hysteresis.Class, detail string) string {
	switch class {
	case hysteresis.ClassAuth:
		return "member rejects leafsync's credentials (" + detail + ")"
	case hysteresis.ClassConfig:
		return "cannot talk to the member as configured (" + detail + ")"
	case hysteresis.ClassServer:
		return "member API server is failing or overloaded (" + detail + ")"
	default:
		return "member unreachable (" + detail + ")"
	}
}
