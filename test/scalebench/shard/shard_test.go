package shard

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// measured is the per-member cost from docs/benchmarks/scale.md (members
// of 200 nodes and 2,000 pods), as of 2026-11-29 with the member's pods
// summed by node (0ec15c6): RSS 1.71 MiB a member between 200 and 400
// registrations on one replica (base 85 MiB), 1.86 over three sharded
// replicas between 300 and 600 (base about 76 MiB a replica), taken as
// 1.9 over a base of 80 (7.4 in the first run, 2.1 on 2026-11-25); CPU
// 0.0004 cores a member steady, plus 0.0002 for each pod created or
// deleted per second in it (0.0005 before the sums), taken at one change
// a second; and 5.9 registrations engaged per second (a batch of 200
// Ready within 33.7s at p99 on one replica, the two member API servers on
// the same 2 cores; 3.6 on 2026-11-25).
var measured = Cost{BaseMiB: 80, MiBPerMember: 1.9, BaseCores: 0.01, CoresPerMember: 0.0006, EngagePerSecond: 5.9}

// leaseWait: a lost replica's members move once its shard Lease has
// expired (leader election's defaults: 15s duration, 2s retry).
const leaseWait = 17 * time.Second

func TestOwnerIsOneLiveReplicaWhateverTheOrder(t *testing.T) {
	replicas := Names("replica", 7)
	for _, m := range Names("member", 1000) {
		o := Owner(m, replicas)
		if !slices.Contains(replicas, o) {
			t.Fatalf("%s owned by %q, not a live replica", m, o)
		}
		shuffled := slices.Clone(replicas)
		rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if o2 := Owner(m, shuffled); o2 != o {
			t.Fatalf("%s: owner %s, or %s with the replicas in another order", m, o, o2)
		}
	}
}

func TestLossMovesOnlyTheLostReplicasMembers(t *testing.T) {
	members, replicas := Names("member", 10000), Names("replica", 20)
	before := Assign(members, replicas)
	lost := replicas[3]
	after := Assign(members, slices.Delete(slices.Clone(replicas), 3, 4))
	had := 0
	for m, r := range before {
		if r == lost {
			had++
			if after[m] == lost {
				t.Fatalf("%s still on the lost replica", m)
			}
		} else if after[m] != r {
			t.Fatalf("%s moved from %s to %s though %s was not lost", m, r, after[m], r)
		}
	}
	if ch := Diff(before, after, leaseWait, measured); ch.Moved != had {
		t.Fatalf("moved %d, the lost replica had %d", ch.Moved, had)
	}
}

func TestAddingAReplicaTakesItsShareOnly(t *testing.T) {
	members, replicas := Names("member", 10000), Names("replica", 20)
	before := Assign(members, replicas)
	after := Assign(members, append(slices.Clone(replicas), "replica-new"))
	ch := Diff(before, after, 0, measured)
	for m, r := range after {
		if before[m] != r && r != "replica-new" {
			t.Fatalf("%s moved between old replicas (%s → %s)", m, before[m], r)
		}
	}
	fair := 10000.0 / 21
	if float64(ch.Moved) < 0.85*fair || float64(ch.Moved) > 1.15*fair {
		t.Fatalf("the new replica took %d members, its fair share is %.0f", ch.Moved, fair)
	}
}

// eps bounds each replica's load to 1.05× the mean.
const eps = 0.05

func TestBalance(t *testing.T) {
	worst := 0.0
	for _, r := range []int{2, 5, 20, 50} {
		ms, rs := Names("member", 10000), Names("replica", r)
		worst = max(worst, Imbalance(Loads(Assign(ms, rs), rs, measured)))
		if im := Imbalance(Loads(AssignBounded(ms, rs, eps), rs, measured)); im > 1+eps+1e-9 {
			t.Errorf("%d replicas, bounded loads: the busiest holds %.3f× the mean", r, im)
		}
	}
	// Why the bound: plain rendezvous leaves one replica well above.
	if worst < 1.10 {
		t.Logf("plain rendezvous: busiest %.2f× the mean", worst)
	}
}

func TestBoundedLossMovesLittleMore(t *testing.T) {
	ms, rs := Names("member", 10000), Names("replica", 20)
	before := AssignBounded(ms, rs, eps)
	lostHad := 0
	for _, r := range before {
		if r == rs[7] {
			lostHad++
		}
	}
	after := AssignBounded(ms, slices.Delete(slices.Clone(rs), 7, 8), eps)
	ch := Diff(before, after, leaseWait, measured)
	if ch.Moved < lostHad || float64(ch.Moved) > 1.5*float64(lostHad) {
		t.Fatalf("moved %d members on a loss, the lost replica had %d", ch.Moved, lostHad)
	}
	t.Logf("bounded loads: a loss moved %d members, the lost replica had %d", ch.Moved, lostHad)
}

// TestShardSimulation sizes a fleet of 10,000 members with the measured
// cost and plays a replica loss and a scale-up; `go test -run
// TestShardSimulation -v ./shard` prints the table in docs/scaling.md.
func TestShardSimulation(t *testing.T) {
	const members = 10000
	for _, budget := range []struct{ mib, cores float64 }{{1024, 1}, {4096, 2}} {
		r := ReplicasFor(members, measured, eps, budget.mib, budget.cores)
		ms, rs := Names("member", members), Names("replica", r)
		before := AssignBounded(ms, rs, eps)
		loads := Loads(before, rs, measured)
		most := slices.MaxFunc(loads, func(a, b Load) int { return a.Members - b.Members })
		lossAssign := AssignBounded(ms, rs[1:], eps)
		loss := Diff(before, lossAssign, leaseWait, measured)
		afterLoss := Loads(lossAssign, rs[1:], measured)
		mostAfter := slices.MaxFunc(afterLoss, func(a, b Load) int { return a.Members - b.Members })
		add := Diff(before, AssignBounded(ms, append(slices.Clone(rs), "replica-new"), eps), 0, measured)
		if mostAfter.MiB > budget.mib || mostAfter.Cores > budget.cores {
			t.Errorf("after a loss the busiest replica needs %.0f MiB, %.2f cores: over the budget %v", mostAfter.MiB, mostAfter.Cores, budget)
		}
		t.Logf("budget %.0f MiB, %.1f cores per replica: %d replicas; busiest %d members (%.0f MiB, %.2f cores, %.2f× the mean); "+
			"one lost: %d members move, the busiest taker gets %d, all Ready again after %s, busiest then %d members (%.0f MiB); "+
			"one added: %d members move, %d of them to it, handover %s",
			budget.mib, budget.cores, r, most.Members, most.MiB, most.Cores, Imbalance(loads),
			loss.Moved, loss.MaxTaken, loss.Handover.Round(time.Second), mostAfter.Members, mostAfter.MiB,
			add.Moved, add.MaxTaken, add.Handover.Round(time.Second))
	}
}
