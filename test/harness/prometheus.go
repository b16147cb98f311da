package harness

import (
	"context"

	"fmt"

	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// Prometheus is a real Prometheus server (Debian's package) scraping
// targets on loopback.
type Prometheus struct {
	URL  string
	proc *process
}

// PrometheusBinary is $PROMETHEUS, or prometheus on PATH.
func PrometheusBinary() (string, error) {
	if p := os.Getenv("PROMETHEUS"); p != "" {
		return p, nil
	}
	p, err := exec.LookPath("prometheus")
	if err != nil {
		return "", fmt.Errorf("prometheus not found: install Debian's package prometheus (`apt-get install prometheus`) or set $PROMETHEUS")
	}
	return p, nil
}

// StartPrometheus scrapes targets (host:port, path /metrics) every second
// under job "leafsync", evaluates ruleFiles every second, and waits until
// it is ready.
func StartPrometheus(t TB, targets []string, ruleFiles []string) *Prometheus {
	t.Helper()
	bin, err := PrometheusBinary()
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	dir := filepath.Join(LogDir(t), "prometheus")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("harness: %v", err)
	}
	quoted := make([]string, len(targets))
	for i, tg := range targets {
		quoted[i] = fmt.Sprintf("%q", tg)
	}
	var rules strings.Builder
	for _, f := range ruleFiles {
		abs, err := filepath.Abs(f)
		if err != nil {
			t.Fatalf("harness: %v", err)
		}
		fmt.Fprintf(&rules, "  - %q\n", abs)
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
%s
scrape_configs:
- job_name: leafsync
  static_configs:
  - targets: [%s]
`, rules.String(), strings.Join(quoted, ", "))
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatalf("harness: %v", err)
	}
	port := freePorts(t, 1)[0]
	p := &Prometheus{URL: fmt.Sprintf("http://127.0.0.1:%d", port)}
	p.proc, err = startProcess(dir, "prometheus", bin,
		"--config.file="+cfgPath,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port),
		"--log.level=warn",
	)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	t.Cleanup(func() { p.proc.Stop(5 * time.Second) })
	if err := p.proc.waitFor(60*time.Second, "ready", func() error { return httpOK(p.URL + "/-/ready") }); err != nil {
		t.Fatalf("harness: %v", err)
	}
	return p
}

// Query runs an instant PromQL query through the HTTP API (client_golang)
// and returns its samples. An expression that does not parse or evaluate
// comes back as a *promv1.Error that names the reason.
func (p *Prometheus) Query(ctx context.Context, expr string) (model.Vector, error) {
	api, err := p.api()
	if err != nil {
		return nil, err
	}
	v, _, _, err := api.Query(ctx, expr, time.Now())
	if err != nil {
		return nil, err
	}
	vec, ok := v.(model.Vector)
	if !ok {
		return nil, fmt.Errorf("%q is a %s, not an instant vector", expr, v.Type())
	}
	return vec, nil
}

func (p *Prometheus) api() (promv1.API, error) {
	c, err := promapi.NewClient(promapi.Config{Address: p.URL})
	if err != nil {
		return nil, err
	}
	return promv1.NewAPI(c), nil
}

// AlertingRules are the alerting rules Prometheus has loaded, by name, with
// their health and last evaluation (the rules API, through client_golang).
func (p *Prometheus) AlertingRules(ctx context.Context) (map[string]promv1.AlertingRule, error) {
	api, err := p.api()
	if err != nil {
		return nil, err
	}
	res, err := api.Rules(ctx, nil)
	if err != nil {
		return nil, err
	}
	out := map[string]promv1.AlertingRule{}
	for _, g := range res.Groups {
		for _, r := range g.Rules {
			if a, ok := r.(promv1.AlertingRule); ok {
				out[a.Name] = a
			}
		}
	}
	return out, nil
}
