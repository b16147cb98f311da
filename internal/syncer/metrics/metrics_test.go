package metrics

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/leafsync/leafsync/hysteresis"
)

var update = flag.Bool("update", false, "rewrite docs/metrics.md")

const docPath = "../../../docs/metrics.md"

func TestDocIsCurrent(t *testing.T) {
	want := markdown()
	if *update {
		if err := os.WriteFile(docPath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("%s is stale: run `go test ./internal/syncer/metrics -update`", filepath.Clean(docPath))
	}
}

var validName = regexp.MustCompile(`^leafsync_[a-z_]+$`)

func TestSpecsAreWellFormed(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range allSpecs() {
		if !validName.MatchString(s.Name) || seen[s.Name] {
			t.Errorf("bad or duplicate metric name %q", s.Name)
		}
		seen[s.Name] = true
		if s.Kind == Counter && !strings.HasSuffix(s.Name, "_total") {
			t.Errorf("counter %s must end in _total", s.Name)
		}
		if s.Kind == Histogram && !strings.HasSuffix(s.Name, "_seconds") {
			t.Errorf("histogram %s must be in seconds", s.Name)
		}
		if len(s.Help) < 20 {
			t.Errorf("%s: help %q does not explain the metric", s.Name, s.Help)
		}
		for _, l := range s.Labels {
			if l == "pod" || l == "name" || l == "namespace" {
				t.Errorf("%s: label %q has unbounded cardinality", s.Name, l)
			}
		}
	}
}

func TestRegisterAndStateCollector(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	if err := Register(reg); err != nil {
		t.Fatal(err)
	}
	var counters hysteresis.Counters
	counters.FlapsSuppressed = 3
	counters.ClockSteps = 2
	counters.Transitions[hysteresis.Ready][hysteresis.Suspect] = 4
	sc := NewStateCollector(func() []ClusterState {
		return []ClusterState{{
			Cluster:    "eu-1",
			Hysteresis: hysteresis.Status{State: hysteresis.Suspect, Cordoned: true, Penalty: 1500, Held: true},
			Counters:   counters, BreakerState: 2, BreakerOpened: 1, BreakerRejectedCalls: 7,
			Problem: "Unreachable",
		}}
	})
	if err := reg.Register(sc); err != nil {
		t.Fatal(err)
	}
	ProbeResultsVec.WithLabelValues("eu-1", "network").Inc()
	for name, want := range map[string]float64{
		`leafsync_member_state{cluster="eu-1",state="Suspect"}`:                       1,
		`leafsync_member_state{cluster="eu-1",state="Ready"}`:                         0,
		`leafsync_member_cordoned{cluster="eu-1"}`:                                    1,
		`leafsync_member_flap_penalty{cluster="eu-1"}`:                                1500,
		`leafsync_member_flaps_suppressed_total{cluster="eu-1"}`:                      3,
		`leafsync_member_clock_steps_total{cluster="eu-1"}`:                           2,
		`leafsync_member_transitions_total{cluster="eu-1",from="Ready",to="Suspect"}`: 4,
		`leafsync_mass_disconnect_active`:                                             1,
		`leafsync_breaker_state{cluster="eu-1"}`:                                      2,
		`leafsync_breaker_rejected_total{cluster="eu-1"}`:                             7,
		`leafsync_registration_problem{cluster="eu-1",reason="Unreachable"}`:          1,
		`leafsync_probe_results_total{cluster="eu-1",result="network"}`:               1,
	} {
		if got := gatheredValue(t, reg, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	ForgetCluster("eu-1")
	if n := testutil.CollectAndCount(ProbeResultsVec); n != 0 {
		t.Errorf("ForgetCluster left %d probe series", n)
	}
}

// gatheredValue finds one sample by its text-format name{labels}.
func gatheredValue(t *testing.T, reg *prometheus.Registry, series string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			var parts []string
			for _, lp := range m.Label {
				parts = append(parts, lp.GetName()+`="`+lp.GetValue()+`"`)
			}
			name := mf.GetName()
			if len(parts) > 0 {
				name += "{" + strings.Join(parts, ",") + "}"
			}
			if name != series {
				continue
			}
			switch {
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Counter != nil:
				return m.Counter.GetValue()
			}
		}
	}
	t.Fatalf("series %s not gathered", series)
	return 0
}
