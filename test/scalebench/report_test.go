package scalebench

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

func TestReportMarkdownShowsLossesFailuresAndTheUpdateSplit(t *testing.T) {
	lost := time.Date(2026, 11, 25, 17, 10, 3, 0, time.UTC)
	rep := &Report{Replicas: 3, Steps: []Step{
		{Registrations: 300, LeaseLagP99: 0.05, LeafUpdates: 300, LeafUpdateP50: 0.61, LeafUpdateP99: 1.38,
			LeafUpdateToHostP50: 0.4, LeafUpdateToHostP99: 1.1, LeafUpdateInHostP50: 0.012, LeafUpdateInHostP99: 0.25},
		{Registrations: 600, LeaseLagP99: 0.1, LeaseRenewalFailures: 1068, ReadyLost: 599,
			ReadyLosses:             []ReadyLoss{{Leaf: "leaf-reg-000", At: lost, Status: "Unknown", Reason: "NodeStatusUnknown"}},
			LeafUpdateWritesMissing: 2, LeafUpdateWritesAmbiguous: 5,
			Replicas: []ReplicaStep{{Replica: "r0", LeaseLagP99: 0.05, LeaseRenewalFailures: 350}}},
	}}
	var buf bytes.Buffer
	rep.Markdown(&buf)
	for _, want := range []string{
		"| Lease renewal lag p99, failed renewals | leaves that lost Ready | goroutines |",
		"| 0.05s, 0 | 0 | 0 |",
		"| 0.10s, 1068 | 599 | 0 |",
		"At 600 registrations, 599 times a leaf lost Ready: leaf-reg-000 Unknown at 17:10:03.000 (NodeStatusUnknown) and 598 more.",
		"| 300 | 0.61s / 1.38s (n=300) | 0.40s / 1.10s | 0.012s / 0.250s | 0 / 0 |",
		"| 600 | 0.00s / 0.00s (n=0) | 0.00s / 0.00s | 0.000s / 0.000s | 2 / 5 |",
		"| 600 | r0 | 0 / 0 | 0 / 0 MiB | 0 MiB | 0.00 / 0.00 | 0.00 | 0.05s, 350 | 0 |",
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("no %q in:\n%s", want, buf.String())
		}
	}
	if strings.Contains(buf.String(), "At 300 registrations") {
		t.Errorf("a step without losses has a loss line:\n%s", buf.String())
	}
}
