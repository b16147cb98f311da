package scalebench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPercentile(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	for _, c := range []struct{ p, want float64 }{{50, 5}, {99, 10}, {10, 1}, {100, 10}} {
		if got := Percentile(xs, c.p); got != c.want {
			t.Errorf("p%v = %v, want %v", c.p, got, c.want)
		}
	}
	if Percentile(nil, 50) != 0 {
		t.Errorf("no samples")
	}
}

func TestReportWrite(t *testing.T) {
	dir := t.TempDir()
	rep := &Report{Date: "2026-11-23", Command: "make bench-scale", Steps: []Step{
		{Registrations: 2, SteadyRSSMiB: 50, HostRequests: map[string]float64{"update leases": 0.2}},
		{Registrations: 4, SteadyRSSMiB: 60, HostRequests: map[string]float64{"update leases": 0.4, "patch nodes/status": 0.1}},
	}}
	if err := rep.Write(dir); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "| update leases | 0.20 | 0.40 |") || !strings.Contains(string(md), "| patch nodes/status | 0.00 | 0.10 |") {
		t.Fatalf("request table:\n%s", md)
	}
	if st, err := os.Stat(filepath.Join(dir, "scale.png")); err != nil || st.Size() == 0 {
		t.Fatalf("plot: %v", err)
	}
}
