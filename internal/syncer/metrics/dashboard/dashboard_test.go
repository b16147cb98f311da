package dashboard

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/leafsync/leafsync/internal/syncer/metrics"
)

var update = flag.Bool("update", false, "rewrite charts/leafsync/files/dashboard.json")

const jsonPath = "../../../../charts/leafsync/files/dashboard.json"

func TestDashboardIsCurrent(t *testing.T) {
	want, err := JSON()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(jsonPath, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale: run `go test ./internal/syncer/metrics/dashboard -update`", filepath.Clean(jsonPath))
	}
}

// TestQueriesAreCheckedAgainstSpecs: a label, kind or label value the
// Specs do not have stops the generator.
func TestQueriesAreCheckedAgainstSpecs(t *testing.T) {
	for name, f := range map[string]func(){
		"unknown label":        func() { sel(metrics.SyncedPods, eq("pod", "x")) },
		"rate of a gauge":      func() { counter(metrics.SyncedPods) },
		"bucket of a counter":  func() { bucket(metrics.LeafWrites) },
		"unknown label value":  func() { known(metrics.DeleteOutcomes, "forwarded", "dropped") },
		"gauge without labels": func() { sel(metrics.StorePendingWrites, inClusters) },
		"variable of no label": func() { labelValues(metrics.MassDisconnect, "cluster") },
		"sum by no label":      func() { sumBy(metrics.ShardLiveReplicas, "replica", sel(metrics.ShardLiveReplicas)) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
	if got, want := p99(metrics.PodSyncDuration),
		`histogram_quantile(0.99, sum by (cluster, le) (rate(leafsync_pod_sync_duration_seconds_bucket{cluster=~"$cluster"}[5m])))`; got != want {
		t.Errorf("p99 = %s, want %s", got, want)
	}
}
