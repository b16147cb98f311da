package syncer

import (
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/syncer/clusters"
	"github.com/leafsync/leafsync/internal/syncer/metrics"
)

// setupMetrics registers leafsync's metrics on the manager's metrics
// endpoint. Per-member state is read from the registry and the engine at
// scrape time.
func setupMetrics(reg *clusters.Registry, fleet *hysteresis.Fleet) error {
	if err := metrics.Register(ctrlmetrics.Registry); err != nil {
		return err
	}
	return ctrlmetrics.Registry.Register(metrics.NewStateCollector(func() []metrics.ClusterState {
		statuses := reg.Statuses()
		out := make([]metrics.ClusterState, 0, len(statuses))
		seen := make(map[string]bool, len(statuses))
		for _, st := range statuses {
			// One ClusterState per cluster: a Secret that loses to an older
			// one for the same cluster (Duplicate) would repeat the
			// cluster's series, and the whole scrape would fail (HTTP 500).
			if st.Cluster == "" || st.Phase == clusters.PhaseDuplicate || seen[st.Cluster] {
				continue
			}
			seen[st.Cluster] = true
			cs := metrics.ClusterState{
				Cluster:              st.Cluster,
				Hysteresis:           st.Hysteresis,
				BreakerState:         int(st.Breaker.State),
				BreakerOpened:        st.Breaker.Opened,
				BreakerHalfOpened:    st.Breaker.HalfOpened,
				BreakerClosed:        st.Breaker.Closed,
				BreakerRejectedCalls: st.Breaker.Rejected,
			}
			if c, ok := fleet.Counters(st.Cluster); ok {
				cs.Counters = c
			}
			if st.Warning() {
				cs.Problem = st.Reason
			}
			out = append(out, cs)
		}
		return out
	}))
}
