package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/leafsync/leafsync/hysteresis"
)

// ClusterState is what the scrape-time metrics of one member are read from.
type ClusterState struct {
	Cluster    string
	Hysteresis hysteresis.Status
	Counters   hysteresis.Counters
	// Breaker state: 0 closed, 1 half-open, 2 open; transition counts.
	BreakerState                        int
	BreakerOpened, BreakerHalfOpened    uint64
	BreakerClosed, BreakerRejectedCalls uint64
	// Problem is the reason of a registration problem, "" when healthy.
	Problem string
}

// StateCollector exports the per-member state metrics at scrape time, read
// from the engine and the registry, so they are always consistent with
// what leafsync decides and need no bookkeeping.
type StateCollector struct {
	snapshot func() []ClusterState
	descs    map[string]*prometheus.Desc
}

// NewStateCollector returns a collector over snapshot, which must be cheap
// and safe to call concurrently.
func NewStateCollector(snapshot func() []ClusterState) *StateCollector {
	c := &StateCollector{snapshot: snapshot, descs: map[string]*prometheus.Desc{}}
	for _, s := range []Spec{MemberState, MemberCordoned, FlapPenalty, FlapsSuppressed, transitions, stateSeconds,
		MassDisconnect, BreakerState, breakerTransitions, BreakerRejected, registrationProblem, clockSteps} {
		c.descs[s.Name] = prometheus.NewDesc(s.Name, s.Help, s.Labels, nil)
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *StateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

var states = []hysteresis.State{hysteresis.Ready, hysteresis.Suspect, hysteresis.NotReady, hysteresis.Recovering}

// Collect implements prometheus.Collector.
func (c *StateCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(s Spec, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(c.descs[s.Name], prometheus.GaugeValue, v, labels...)
	}
	counter := func(s Spec, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(c.descs[s.Name], prometheus.CounterValue, v, labels...)
	}
	held := 0.0
	for _, m := range c.snapshot() {
		cl := m.Cluster
		for _, st := range states {
			gauge(MemberState, b2f(m.Hysteresis.State == st), cl, st.String())
			counter(stateSeconds, m.Counters.TimeIn[st].Seconds(), cl, st.String())
			for _, to := range states {
				if n := m.Counters.Transitions[st][to]; n > 0 || st != to {
					counter(transitions, float64(n), cl, st.String(), to.String())
				}
			}
		}
		gauge(MemberCordoned, b2f(m.Hysteresis.Cordoned), cl)
		gauge(FlapPenalty, m.Hysteresis.Penalty, cl)
		counter(FlapsSuppressed, float64(m.Counters.FlapsSuppressed), cl)
		counter(clockSteps, float64(m.Counters.ClockSteps), cl)
		gauge(BreakerState, float64(m.BreakerState), cl)
		counter(breakerTransitions, float64(m.BreakerOpened), cl, "open")
		counter(breakerTransitions, float64(m.BreakerHalfOpened), cl, "half-open")
		counter(breakerTransitions, float64(m.BreakerClosed), cl, "closed")
		counter(BreakerRejected, float64(m.BreakerRejectedCalls), cl)
		// A healthy member has the series at 0 (reason ""), so that the
		// metric exists for every member, not only for broken ones.
		gauge(registrationProblem, b2f(m.Problem != ""), cl, m.Problem)
		if m.Hysteresis.Held {
			held = 1
		}
	}
	gauge(MassDisconnect, held)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
