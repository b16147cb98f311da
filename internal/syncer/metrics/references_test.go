package metrics

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const (
	dashboardPath = "../../../charts/leafsync/files/dashboard.json"
	alertsPath    = "../../../charts/leafsync/files/alerts.yaml"
)

// dashboard is the part of Grafana's dashboard model a clean import needs.
type dashboard struct {
	Title         string `json:"title"`
	UID           string `json:"uid"`
	SchemaVersion int    `json:"schemaVersion"`
	Templating    struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID         int    `json:"id"`
		Type       string `json:"type"`
		Title      string `json:"title"`
		Datasource *struct {
			Type string `json:"type"`
			UID  string `json:"uid"`
		} `json:"datasource"`
		GridPos struct{ H, W, X, Y int } `json:"gridPos"`
		Targets []struct {
			Expr  string `json:"expr"`
			RefID string `json:"refId"`
		} `json:"targets"`
	} `json:"panels"`
}

var panelTypes = map[string]bool{"row": true, "stat": true, "timeseries": true, "state-timeline": true, "table": true, "gauge": true, "bargauge": true}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	data, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	dec := json.NewDecoder(strings.NewReader(string(data)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("dashboard is not valid JSON: %v", err)
	}
	return d
}

func TestDashboardImportsCleanly(t *testing.T) {
	d := loadDashboard(t)
	if d.Title == "" || d.UID == "" || d.SchemaVersion < 30 {
		t.Fatalf("title %q, uid %q, schemaVersion %d: all required", d.Title, d.UID, d.SchemaVersion)
	}
	if !strings.Contains(strings.ToLower(d.Title), "flap") {
		t.Errorf("title %q should say it is about flap suppression", d.Title)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	if vars["datasource"] != "datasource" || vars["cluster"] != "query" {
		t.Fatalf("template variables %v: want a datasource variable and a cluster query variable", vars)
	}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("duplicate panel id %d", p.ID)
		}
		ids[p.ID] = true
		if !panelTypes[p.Type] {
			t.Errorf("panel %q: unknown type %q", p.Title, p.Type)
		}
		if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: bad gridPos %+v", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q must use the datasource variable", p.Title)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if tg.Expr == "" || tg.RefID == "" || refs[tg.RefID] {
				t.Errorf("panel %q: query %q with refId %q", p.Title, tg.Expr, tg.RefID)
			}
			refs[tg.RefID] = true
		}
	}
}

// Exprs returns every PromQL expression of the dashboard and the alert rules.
func exprs(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, p := range loadDashboard(t).Panels {
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	data, err := os.ReadFile(alertsPath)
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert       string            `json:"alert"`
				Expr        string            `json:"expr"`
				For         string            `json:"for"`
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(data, &rules); err != nil {
		t.Fatal(err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			out = append(out, r.Expr)
		}
	}
	return out
}

var metricRef = regexp.MustCompile(`leafsync_[a-z_]+`)

// TestNoDanglingMetricNames: every metric the dashboard or the alerts use
// is one leafsync exports.
func TestNoDanglingMetricNames(t *testing.T) {
	known := map[string]bool{}
	for _, s := range allSpecs() {
		known[s.Name] = true
		if s.Kind == Histogram {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				known[s.Name+suffix] = true
			}
		}
	}
	used := map[string]bool{}
	for _, e := range exprs(t) {
		for _, name := range metricRef.FindAllString(e, -1) {
			used[name] = true
			if !known[name] {
				t.Errorf("%q refers to %s, which leafsync does not export", e, name)
			}
		}
	}
	if len(used) < 10 {
		t.Fatalf("only %d metrics referenced; the test reads the wrong files?", len(used))
	}
}
