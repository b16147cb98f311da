// Package shard simulates docs/scaling.md's sharding: members assigned to
// leafsync replicas by leafsync's own assignment (internal/syncer/shard)
// over the replicas' live shard Leases, with the per-member cost measured
// by `make bench-scale`, through replica loss and rebalancing. It is a
// model to size a fleet and check the design's properties (one owner per
// member, minimal movement, balance); the assignment is leafsync's code.
package shard

import (
	"fmt"
	"math"
	"sort"
	"time"

	leafshard "github.com/leafsync/leafsync/internal/syncer/shard"
)

// Owner is the replica that owns a member: the one with the highest hash
// of (member, replica) among the live replicas (rendezvous hashing,
// leafsync's shard.Rank). Every replica computes the same answer from the
// same set of live Leases, with no coordinator; when a replica goes, only
// its members move, each to the replica that ranked second for it.
func Owner(member string, replicas []string) string {
	if len(replicas) == 0 {
		return ""
	}
	return leafshard.Rank(member, replicas)[0]
}

// AssignBounded is leafsync's assignment (internal/syncer/shard.Assign):
// rendezvous hashing with bounded loads, no replica holding more than
// ceil((1+eps)·members/replicas).
func AssignBounded(members, replicas []string, eps float64) map[string]string {
	return leafshard.Assign(members, replicas, eps)
}

// Assign maps every member to its owner (plain rendezvous hashing).
func Assign(members, replicas []string) map[string]string {
	out := make(map[string]string, len(members))
	for _, m := range members {
		out[m] = Owner(m, replicas)
	}
	return out
}

// Cost is what one replica pays, measured (docs/benchmarks/scale.md):
// a base plus a cost per registration, and how fast it engages new ones.
type Cost struct {
	BaseMiB, MiBPerMember     float64
	BaseCores, CoresPerMember float64
	// EngagePerSecond: registrations one replica brings to a Ready leaf
	// per second when many arrive at once (a batch's size over its p99).
	EngagePerSecond float64
}

// Load is a replica's share.
type Load struct {
	Replica string
	Members int
	MiB     float64
	Cores   float64
}

// Loads computes every replica's load under an assignment.
func Loads(assign map[string]string, replicas []string, c Cost) []Load {
	count := map[string]int{}
	for _, r := range assign {
		count[r]++
	}
	out := make([]Load, 0, len(replicas))
	for _, r := range replicas {
		n := float64(count[r])
		out = append(out, Load{Replica: r, Members: count[r], MiB: c.BaseMiB + n*c.MiBPerMember, Cores: c.BaseCores + n*c.CoresPerMember})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Replica < out[j].Replica })
	return out
}

// Change is what a change of the replica set costs.
type Change struct {
	// Moved members, and the most any one replica takes on.
	Moved, MaxTaken int
	// Handover: from the loss until every moved member has a Ready leaf
	// again: the lost replica's Lease must expire first (a graceful
	// rebalance releases at once), then the busiest taker engages its
	// share at EngagePerSecond.
	Handover time.Duration
}

// Diff compares two assignments of the same members.
func Diff(before, after map[string]string, lossWait time.Duration, c Cost) Change {
	taken := map[string]int{}
	var ch Change
	for m, r := range after {
		if before[m] != r {
			ch.Moved++
			taken[r]++
		}
	}
	for _, n := range taken {
		ch.MaxTaken = max(ch.MaxTaken, n)
	}
	engage := time.Duration(0)
	if c.EngagePerSecond > 0 {
		engage = time.Duration(float64(ch.MaxTaken) / c.EngagePerSecond * float64(time.Second))
	}
	ch.Handover = lossWait + engage
	return ch
}

// Names makes n names with a prefix.
func Names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%05d", prefix, i)
	}
	return out
}

// Imbalance is the most loaded replica's members over the mean.
func Imbalance(loads []Load) float64 {
	if len(loads) == 0 {
		return 0
	}
	total, most := 0, 0
	for _, l := range loads {
		total += l.Members
		most = max(most, l.Members)
	}
	return float64(most) / (float64(total) / float64(len(loads)))
}

// ReplicasFor is the fewest replicas that keep every one under a memory
// budget and a CPU budget after one of them is lost, with loads bounded
// to (1+eps)× the mean.
func ReplicasFor(members int, c Cost, eps, budgetMiB, budgetCores float64) int {
	for r := 1; r <= members; r++ {
		// After losing one of r replicas, r-1 share the members.
		per := math.Ceil((1 + eps) * float64(members) / float64(max(r-1, 1)))
		if c.BaseMiB+per*c.MiBPerMember <= budgetMiB && c.BaseCores+per*c.CoresPerMember <= budgetCores {
			return r
		}
	}
	return members
}
