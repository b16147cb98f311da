package flapbench

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// A scenario runs several times per contestant (FLAPBENCH_REPEAT, make
// bench-flap REPEAT=); the table gives each figure's median and, when the
// runs differ, their range. "Never" (a recovery or failover not within the
// observation, -1 in a Result) counts as longer than any time.

// summarize is the median of vals and, when they differ, "(min–max)".
func summarize(vals []float64, format func(float64) string) string {
	s := slices.Sorted(slices.Values(vals))
	mid := s[len(s)/2]
	if len(s)%2 == 0 {
		mid = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	if s[0] == s[len(s)-1] {
		return format(mid)
	}
	return fmt.Sprintf("%s (%s–%s)", format(mid), format(s[0]), format(s[len(s)-1]))
}

// never maps a Result's -1 ("not within the observation") to +Inf.
func never(v float64) float64 {
	if v < 0 {
		return math.Inf(1)
	}
	return v
}

func count(v float64) string { return fmt.Sprintf("%.0f", v) }

func seconds(never string) func(float64) string {
	return func(v float64) string {
		if math.IsInf(v, 1) {
			return never
		}
		return fmt.Sprintf("%.0fs", v)
	}
}

// column collects one figure of every repetition.
func column(rs []Result, f func(Result) float64) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = f(r)
	}
	return out
}

// row is the table row of one contestant's repetitions of a scenario.
func row(rs []Result) string {
	cells := []string{rs[0].Scenario, rs[0].Contestant}
	for _, f := range []func(Result) float64{
		func(r Result) float64 { return float64(r.NotReadyTransitions) },
		func(r Result) float64 { return float64(r.NoExecuteTaints) },
		func(r Result) float64 { return float64(r.HostEvictions) },
		func(r Result) float64 { return float64(r.MemberPodsDeleted) },
		func(r Result) float64 { return float64(r.MemberPodsStarted) },
		func(r Result) float64 { return r.PodSecondsNotReady },
		func(r Result) float64 { return r.CapacitySecondsLost },
		func(r Result) float64 { return float64(r.OrphansAtEnd) },
	} {
		cells = append(cells, summarize(column(rs, f), count))
	}
	recovered := column(rs, func(r Result) float64 { return never(r.RecoveredAfter) })
	if !slices.ContainsFunc(rs, func(r Result) bool { return !r.NeverShort }) {
		cells = append(cells, "—") // never lost
	} else {
		cells = append(cells, summarize(recovered, seconds("not within the run")))
	}
	return "| " + strings.Join(append(cells, failoverCell(rs)), " | ") + " |"
}

// failoverCell says when each workload ran elsewhere ("—" without a spare).
func failoverCell(rs []Result) string {
	if len(rs[0].Failover) == 0 {
		return "—"
	}
	var parts []string
	for _, w := range slices.Sorted(maps.Keys(rs[0].Failover)) {
		at := column(rs, func(r Result) float64 { return never(r.FailoverAfter[w]) })
		parts = append(parts, w+" "+summarize(at, seconds("never")))
	}
	return strings.Join(parts, ", ")
}
