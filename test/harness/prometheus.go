package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
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
	if err := p.proc.waitFor(60*time.Second, "ready", func() error {
		resp, err := http.Get(p.URL + "/-/ready")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/-/ready: %s", resp.Status)
		}
		return nil
	}); err != nil {
		t.Fatalf("harness: %v", err)
	}
	return p
}

// QueryResult is an instant query's answer.
type QueryResult struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	} `json:"data"`
}

// Query runs an instant PromQL query through the HTTP API. A query that
// does not parse comes back with Status "error" and the reason.
func (p *Prometheus) Query(ctx context.Context, expr string) (QueryResult, error) {
	var r QueryResult
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/api/v1/query?query="+url.QueryEscape(expr), nil)
	if err != nil {
		return r, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return r, fmt.Errorf("decoding answer to %q (%s): %w", expr, resp.Status, err)
	}
	return r, nil
}

// Value is the first sample's value of an instant query, as a string.
func (r QueryResult) Value() (string, bool) {
	if len(r.Data.Result) == 0 {
		return "", false
	}
	v, ok := r.Data.Result[0].Value[1].(string)
	return v, ok
}

// AlertingRules are the alerting rules Prometheus has loaded, by name, with
// their health and last evaluation (the rules API, through client_golang).
func (p *Prometheus) AlertingRules(ctx context.Context) (map[string]promv1.AlertingRule, error) {
	c, err := promapi.NewClient(promapi.Config{Address: p.URL})
	if err != nil {
		return nil, err
	}
	res, err := promv1.NewAPI(c).Rules(ctx, nil)
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
