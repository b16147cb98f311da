package shard

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%05d", prefix, i)
	}
	return out
}

func shuffled(in []string, r *rand.Rand) []string {
	out := slices.Clone(in)
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// TestAssignIsTheSameWhateverTheOrder: every replica lists Secrets and
// Leases in its own order and must compute the same assignment.
func TestAssignIsTheSameWhateverTheOrder(t *testing.T) {
	members, replicas := names("member", 500), names("replica", 7)
	want := Assign(members, replicas, 0.05)
	r := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		got := Assign(shuffled(members, r), shuffled(replicas, r), 0.05)
		for m, o := range want {
			if got[m] != o {
				t.Fatalf("%s: %s in one order, %s in another", m, o, got[m])
			}
		}
	}
	if len(want) != len(members) {
		t.Fatalf("%d of %d members assigned", len(want), len(members))
	}
	withDuplicates := Assign(append(slices.Clone(members), members[:50]...), replicas, 0.05)
	for m, o := range want {
		if withDuplicates[m] != o {
			t.Fatalf("%s: %s, or %s when some Secrets name the same member twice", m, o, withDuplicates[m])
		}
	}
}

func TestAssignBoundsTheLoad(t *testing.T) {
	for _, tc := range []struct {
		members, replicas int
		eps               float64
	}{{10000, 50, 0.05}, {12, 3, 0.05}, {7, 3, 0}, {1000, 20, 0.25}} {
		ms, rs := names("member", tc.members), names("replica", tc.replicas)
		load := map[string]int{}
		for _, r := range Assign(ms, rs, tc.eps) {
			load[r]++
		}
		limit := int(math.Ceil((1 + tc.eps) * float64(tc.members) / float64(tc.replicas)))
		for r, n := range load {
			if n > limit {
				t.Errorf("%+v: %s holds %d, over the bound %d", tc, r, n, limit)
			}
		}
	}
}

// TestRemovingAReplicaMovesItsMembersAndFewMore: a replica's loss moves
// its members, and (the bound's price) a few others.
func TestRemovingAReplicaMovesItsMembersAndFewMore(t *testing.T) {
	ms, rs := names("member", 10000), names("replica", 20)
	before := Assign(ms, rs, 0.05)
	lost := rs[7]
	after := Assign(ms, slices.Delete(slices.Clone(rs), 7, 8), 0.05)
	had, moved := 0, 0
	for m, r := range before {
		if r == lost {
			had++
		}
		if after[m] == lost {
			t.Fatalf("%s still on the lost replica", m)
		}
		if after[m] != r {
			moved++
		}
	}
	if moved < had || float64(moved) > 1.5*float64(had) {
		t.Fatalf("a loss moved %d members; the lost replica had %d", moved, had)
	}
	// Unbounded (plain rendezvous): exactly the lost replica's members.
	plainBefore := Assign(ms, rs, float64(len(rs)))
	plainAfter := Assign(ms, slices.Delete(slices.Clone(rs), 7, 8), float64(len(rs)))
	for m, r := range plainBefore {
		if r != lost && plainAfter[m] != r {
			t.Fatalf("plain rendezvous moved %s from %s, which was not lost", m, r)
		}
	}
}

func TestAssignWithoutReplicas(t *testing.T) {
	if got := Assign([]string{"a", "b"}, nil, 0.05); len(got) != 0 {
		t.Fatalf("no replicas: %v", got)
	}
}

func TestReplicaOf(t *testing.T) {
	for inc, want := range map[string]string{
		"leafsync-7d9f8b6c4-x2x9z-0a1b2c3d": "leafsync-7d9f8b6c4-x2x9z",
		"leafsync-a-deadbeef":               "leafsync-a",
		"leafsync-a":                        "leafsync-a",
		"leafsync-zzzzzzzz":                 "leafsync-zzzzzzzz",
		"":                                  "",
	} {
		if got := ReplicaOf(inc); got != want {
			t.Errorf("ReplicaOf(%q) = %q, want %q", inc, got, want)
		}
	}
}
