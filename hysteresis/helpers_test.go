package hysteresis

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// ev is one probe in a test trace: at is the offset from t0.
type ev struct {
	at    time.Duration
	ok    bool
	class Class
}

func okAt(at time.Duration) ev            { return ev{at: at, ok: true} }
func failAt(at time.Duration, c Class) ev { return ev{at: at, class: c} }
func netAt(at time.Duration) ev           { return failAt(at, ClassNetwork) }
func sec(s float64) time.Duration         { return time.Duration(s * float64(time.Second)) }
func (e ev) obs() Observation             { return Observation{Time: t0.Add(e.at), OK: e.ok, Class: e.class} }
func every(from, to, step time.Duration, f func(time.Duration) ev) []ev {
	var out []ev
	for at := from; at <= to; at += step {
		out = append(out, f(at))
	}
	return out
}

func concat(parts ...[]ev) []ev {
	var out []ev
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func newFleet(t testing.TB, cfg Config, clusters ...string) *RawFleet {
	t.Helper()
	f, err := NewRawFleet(FleetConfig{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if len(clusters) == 0 {
		clusters = []string{"c"}
	}
	for _, c := range clusters {
		if err := f.Add(c, Overrides{}); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// run feeds the trace to cluster "c" and returns the last status and all
// transitions.
func run(t testing.TB, f *RawFleet, trace []ev) (Status, []Transition) {
	t.Helper()
	var st Status
	var all []Transition
	for _, e := range trace {
		s, ts, err := f.Observe("c", e.obs())
		if err != nil {
			t.Fatalf("observe %+v: %v", e, err)
		}
		st = s
		all = append(all, ts...)
	}
	return st, all
}

func fmtTransitions(ts []Transition) string {
	var b strings.Builder
	for _, tr := range ts {
		fmt.Fprintf(&b, "%v %s %s->%s cordoned=%v %s\n", tr.Time.Sub(t0), tr.Cluster, tr.From, tr.To, tr.Cordoned, tr.Reason)
	}
	return b.String()
}
