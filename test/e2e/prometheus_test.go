//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"sigs.k8s.io/yaml"

	"github.com/leafsync/leafsync/test/harness"
)

const (
	dashboardFile = "../../charts/leafsync/files/dashboard.json"
	alertsFile    = "../../charts/leafsync/files/alerts.yaml"
)

// TestAlertRules checks the rules file and runs promtool's unit tests of
// every alert (test/prometheus/alerts_test.yaml).
func TestAlertRules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool not found: install Debian's package prometheus")
	}
	for _, args := range [][]string{
		{"check", "rules", alertsFile},
		{"test", "rules", "../prometheus/alerts_test.yaml"},
	} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("promtool %v: %v\n%s", args, err, out)
		}
		t.Logf("promtool %v:\n%s", args, out)
	}
}

// TestPrometheusScrapesAFlap: a real Prometheus scrapes the real leafsync
// while one member flaps and another goes down for longer than
// notReadyAfter; then every expression of the dashboard and of the alert
// rules is evaluated through Prometheus's HTTP API. Each must parse; every
// metric they use must have data; the flap shows in the flaps-suppressed
// counter and the outage in the transitions counter.
func TestPrometheusScrapesAFlap(t *testing.T) {
	f := newFleet(t, harness.HostOptions{},
		harness.MemberOptions{Name: "member-a", Nodes: 1, Pods: 1},
		harness.MemberOptions{Name: "member-b", Nodes: 1})
	ls := f.startLeafsync(t, "leafsync")
	prom := harness.StartPrometheus(t, []string{ls.MetricsAddr}, []string{alertsFile})
	f.register(t, "member-a", nil)
	f.register(t, "member-b", nil)
	f.waitLeafReady(t, "leaf-member-a", time.Minute)
	f.waitLeafReady(t, "leaf-member-b", time.Minute)
	ctx := context.Background()

	// The scripted flap: member-a is cut for 4s (< notReadyAfter 10s);
	// member-b for 15s (> notReadyAfter), then both heal.
	f.members["member-b"].proxy.Cut()
	f.members["member-a"].proxy.Cut()
	time.Sleep(4 * time.Second)
	if err := f.members["member-a"].proxy.Heal(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(11 * time.Second)
	if err := f.members["member-b"].proxy.Heal(); err != nil {
		t.Fatal(err)
	}
	f.waitLeafReady(t, "leaf-member-b", time.Minute)

	waitSeries := func(expr string, min float64) {
		t.Helper()
		harness.Eventually(t, 30*time.Second, expr, func() error {
			r, err := prom.Query(ctx, expr)
			if err != nil {
				return err
			}
			if len(r) == 0 {
				return fmt.Errorf("no data")
			}
			if v := float64(r[0].Value); v < min {
				return fmt.Errorf("value %v, want >= %v", v, min)
			}
			return nil
		})
	}
	waitSeries(`leafsync_member_flaps_suppressed_total{cluster="member-a"}`, 1)
	waitSeries(`leafsync_member_transitions_total{cluster="member-b",from="Suspect",to="NotReady"}`, 1)
	waitSeries(`leafsync_member_transitions_total{cluster="member-b",from="Recovering",to="Ready"}`, 1)
	waitSeries(`max_over_time(leafsync_breaker_state{cluster="member-b"}[5m])`, 2)
	waitSeries(`leafsync_member_state{cluster="member-a",state="Ready"}`, 1)
	// Lease renewals were observed.
	waitSeries(`leafsync_lease_renewal_lag_seconds_count{cluster="member-a"}`, 1)

	exprs := dashboardExprs(t)
	dash := len(exprs)
	rules := chartRules(t)
	for _, r := range rules {
		exprs = append(exprs, r.Expr)
	}
	metric := regexp.MustCompile(`leafsync_[a-z_]+`)
	checked := map[string]bool{}
	for i, e := range exprs {
		// The Shards row and LeafsyncMemberWithoutOwner read what sharded
		// replicas export: TestPrometheusScrapesShards.
		if shardExpr(e) {
			continue
		}
		r, err := prom.Query(ctx, e)
		var promErr *promv1.Error
		if errors.As(err, &promErr) {
			t.Errorf("%q does not evaluate: %v", e, err)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		// Dashboard queries have no filters: each returns data. Alert
		// expressions end in a threshold and are empty while quiet; the
		// metrics they read must have data.
		if i < dash && len(r) == 0 {
			t.Errorf("dashboard query %q returned no data", e)
		}
		for _, name := range metric.FindAllString(e, -1) {
			if checked[name] {
				continue
			}
			checked[name] = true
			r, err := prom.Query(ctx, "count({__name__=\""+name+"\"})")
			if err != nil {
				t.Fatal(err)
			}
			if len(r) == 0 {
				t.Errorf("metric %s (used by %q) has no series in Prometheus", name, e)
			}
		}
	}
	t.Logf("%d dashboard and %d alert expressions evaluated; %d metrics have data", dash, len(exprs)-dash, len(checked))

	// Prometheus itself loaded every alert rule of the chart and evaluates
	// it without error (the rules API; a query of ALERTS could not fail).
	var want []string
	for _, r := range rules {
		if r.Alert != "" {
			want = append(want, r.Alert)
		}
	}
	harness.Eventually(t, time.Minute, "alert rules loaded and evaluated", func() error {
		got, err := prom.AlertingRules(ctx)
		if err != nil {
			return err
		}
		for _, name := range want {
			r, ok := got[name]
			switch {
			case !ok:
				return fmt.Errorf("alert rule %s not loaded (%d loaded)", name, len(got))
			case r.Health != promv1.RuleHealthGood:
				return fmt.Errorf("alert rule %s: health %q, %s", name, r.Health, r.LastError)
			case r.LastEvaluation.IsZero():
				return fmt.Errorf("alert rule %s never evaluated", name)
			}
		}
		return nil
	})
	t.Logf("%d alert rules loaded and healthy", len(want))
}

// shardExpr: e reads the metrics of sharded replicas.
func shardExpr(e string) bool { return strings.Contains(e, "leafsync_shard_") }

// TestPrometheusScrapesShards: a real Prometheus scrapes two sharded
// replicas sharing four registrations. Every query of the dashboard's
// Shards row returns data; the members per replica add up to the
// registrations, as do the members assigned; LeafsyncMemberWithoutOwner's
// expression finds no member without an owner, and Prometheus evaluates
// the rule without error.
func TestPrometheusScrapesShards(t *testing.T) {
	f := newFleet(t, harness.HostOptions{}, harness.MemberOptions{Name: "member-a", Nodes: 1})
	r0, r1 := f.startShardReplica(t, "r0"), f.startShardReplica(t, "r1")
	prom := harness.StartPrometheus(t, []string{r0.MetricsAddr, r1.MetricsAddr}, []string{alertsFile})
	const registrations = 4
	for i := range registrations {
		f.registerAs(t, fmt.Sprintf("shard-%d", i), "member-a")
	}
	for i := range registrations {
		f.waitLeafReady(t, fmt.Sprintf("leaf-shard-%d", i), 2*time.Minute)
	}
	ctx := context.Background()
	value := func(expr string) (float64, error) {
		r, err := prom.Query(ctx, expr)
		if err != nil {
			return 0, err
		}
		if len(r) != 1 {
			return 0, fmt.Errorf("%d series", len(r))
		}
		return float64(r[0].Value), nil
	}
	for _, expr := range []string{"sum(leafsync_shard_members)", "sum(leafsync_shard_assigned_members)", "count(leafsync_shard_members)"} {
		want := float64(registrations)
		if strings.HasPrefix(expr, "count") {
			want = 2 // one series per replica
		}
		harness.Eventually(t, time.Minute, expr, func() error {
			v, err := value(expr)
			if err == nil && v != want {
				err = fmt.Errorf("%v, want %v", v, want)
			}
			return err
		})
	}

	var shardQueries int
	for _, e := range dashboardExprs(t) {
		if !shardExpr(e) {
			continue
		}
		shardQueries++
		harness.Eventually(t, 30*time.Second, e, func() error {
			r, err := prom.Query(ctx, e)
			if err == nil && len(r) == 0 {
				err = errors.New("no data")
			}
			return err
		})
	}
	if shardQueries < 5 {
		t.Fatalf("%d queries of the Shards row, want at least 5", shardQueries)
	}

	var rule chartRule
	for _, r := range chartRules(t) {
		if r.Alert == "LeafsyncMemberWithoutOwner" {
			rule = r
		}
	}
	if rule.Expr == "" {
		t.Fatal("no rule LeafsyncMemberWithoutOwner")
	}
	// The rule's threshold removed: the members without an owner, 0.
	lhs, _, _ := strings.Cut(rule.Expr, " > ")
	harness.Eventually(t, 30*time.Second, lhs+" = 0: every member owned", func() error {
		v, err := value(lhs)
		if err == nil && v != 0 {
			err = fmt.Errorf("%v", v)
		}
		return err
	})
	harness.Eventually(t, time.Minute, "LeafsyncMemberWithoutOwner evaluated", func() error {
		got, err := prom.AlertingRules(ctx)
		if err != nil {
			return err
		}
		r, ok := got[rule.Alert]
		switch {
		case !ok:
			return errors.New("not loaded")
		case r.Health != promv1.RuleHealthGood || r.LastEvaluation.IsZero():
			return fmt.Errorf("health %q, %s, last evaluated %s", r.Health, r.LastError, r.LastEvaluation)
		case len(r.Alerts) > 0:
			return fmt.Errorf("%d alerts pending or firing", len(r.Alerts))
		}
		return nil
	})
}

func dashboardExprs(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			// Grafana would substitute the cluster variable; "All" is ".*".
			out = append(out, strings.ReplaceAll(tg.Expr, "$cluster", ".*"))
		}
	}
	return out
}

// chartRule is one rule of the chart's alert rules file.
type chartRule struct {
	Alert string `json:"alert"`
	Expr  string `json:"expr"`
}

// chartRules are the rules of the chart's alert rules file.
func chartRules(t *testing.T) []chartRule {
	t.Helper()
	data, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []chartRule `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(data, &rules); err != nil {
		t.Fatal(err)
	}
	var out []chartRule
	for _, g := range rules.Groups {
		out = append(out, g.Rules...)
	}
	if len(out) == 0 {
		t.Fatalf("no rule in %s", alertsFile)
	}
	return out
}
