package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Specs of sharding (internal/syncer/shard): which members this replica
// acts on, read at scrape time from its Sharder (see ShardCollector).
var (
	ShardMembers = spec(Spec{Group: "Shards", Name: "leafsync_shard_members", Kind: Gauge,
		Help:   "Members this replica acts on now: it holds its shard Lease and the member's Lease names this replica's incarnation as writer. Summed over the replicas, it equals the registered members when every member has an owner.",
		Labels: []string{"replica"}})
	ShardAssignedMembers = spec(Spec{Group: "Shards", Name: "leafsync_shard_assigned_members", Kind: Gauge,
		Help:   "Members the assignment (rendezvous hashing with bounded loads over the live replicas) gives this replica. Differs from leafsync_shard_members while a handover is under way.",
		Labels: []string{"replica"}})
	ShardLiveReplicas = spec(Spec{Group: "Shards", Name: "leafsync_shard_live_replicas", Kind: Gauge,
		Help: "Replicas live and not draining in this replica's view (their shard Lease renewed within its duration, by this replica's clock): the replicas members are assigned to."})
	ShardHandovers = spec(Spec{Group: "Shards", Name: "leafsync_shard_handovers_total", Kind: Counter,
		Help:   "Members this replica took, by reason: new (the member had no writer), rebalance (taken from a live replica, make before break), failover (its writer's shard Lease had expired, or was a former incarnation of this replica).",
		Labels: []string{"reason"}})
	ShardLeaseHeld = spec(Spec{Group: "Shards", Name: "leafsync_shard_lease_held", Kind: Gauge,
		Help: "1 while this replica holds its shard Lease (renewed within its duration by the local monotonic clock); 0 while it acts on no member."})
)

// ShardHandoverReasons are the reason label's values.
var ShardHandoverReasons = []string{"new", "rebalance", "failover"}

// ShardState is what the shard metrics are read from.
type ShardState struct {
	Replica                string
	Acting, Assigned, Live int
	Held                   bool
	// Handovers by reason (ShardHandoverReasons).
	Handovers map[string]uint64
}

// ShardCollector exports a Sharder's state at scrape time.
type ShardCollector struct {
	snapshot func() ShardState
	descs    map[string]*prometheus.Desc
}

// NewShardCollector returns a collector over snapshot, which must be cheap
// and safe to call concurrently.
func NewShardCollector(snapshot func() ShardState) *ShardCollector {
	c := &ShardCollector{snapshot: snapshot, descs: map[string]*prometheus.Desc{}}
	for _, s := range []Spec{ShardMembers, ShardAssignedMembers, ShardLiveReplicas, ShardHandovers, ShardLeaseHeld} {
		c.descs[s.Name] = prometheus.NewDesc(s.Name, s.Help, s.Labels, nil)
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *ShardCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *ShardCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.snapshot()
	gauge := func(s Spec, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(c.descs[s.Name], prometheus.GaugeValue, v, labels...)
	}
	gauge(ShardMembers, float64(st.Acting), st.Replica)
	gauge(ShardAssignedMembers, float64(st.Assigned), st.Replica)
	gauge(ShardLiveReplicas, float64(st.Live))
	gauge(ShardLeaseHeld, b2f(st.Held))
	for _, r := range ShardHandoverReasons {
		ch <- prometheus.MustNewConstMetric(c.descs[ShardHandovers.Name], prometheus.CounterValue, float64(st.Handovers[r]), r)
	}
}
