// Package flapbench measures, side by side in one run, what a network flap
// or an outage costs the workloads on a leafsync leaf and on a leaf served
// by the virtual-kubelet architecture (Liqo, Admiralty, tensile-kube). It
// is its own Go module so that the baseline and the plotting library stay
// out of leafsync's dependencies. The scenarios run against real control
// planes (test/harness); `make bench-flap` runs them all.
package flapbench

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/leafsync/leafsync/test/harness"
)

// Sample is one look at a contestant's leaf and workloads.
type Sample struct {
	// At is the time since the fault began (negative: before).
	At time.Duration `json:"at"`
	// LeafReady is the leaf Node's Ready condition ("" if there is no Node).
	LeafReady string `json:"leafReady"`
	// HostReady counts the workloads' host pods that are Ready (their
	// Service endpoints); MemberRunning the member pods that run.
	HostReady     int `json:"hostReady"`
	MemberRunning int `json:"memberRunning"`
	// Elsewhere counts, per workload, the Ready host pods on a node other
	// than the leaf (failover; only in scenarios with a spare node).
	Elsewhere map[string]int `json:"elsewhere,omitempty"`
}

// Result is what one scenario cost one contestant.
type Result struct {
	Scenario   string `json:"scenario"`
	Contestant string `json:"contestant"`
	// Repetition counts the runs of the scenario from 1.
	Repetition int `json:"repetition,omitempty"`
	// Desired is the number of pods the workloads want.
	Desired int `json:"desired"`
	// NotReadyTransitions: the leaf's Ready condition left True.
	NotReadyTransitions int `json:"notReadyTransitions"`
	// NoExecuteTaints: node lifecycle NoExecute taints put on the leaf.
	NoExecuteTaints int `json:"noExecuteTaints"`
	// HostEvictions: host pods deleted by the taint manager.
	HostEvictions int `json:"hostEvictions"`
	// MemberPodsDeleted: member pods deleted (distinct UIDs).
	MemberPodsDeleted int `json:"memberPodsDeleted"`
	// MemberPodsStarted: member pods created after the fault began (a
	// restart of the workload downstream).
	MemberPodsStarted int `json:"memberPodsStarted"`
	// PodSecondsNotReady: ∫ (desired − Ready host pods) dt from the fault
	// on: traffic a Service lost although, often, the pods ran.
	PodSecondsNotReady float64 `json:"podSecondsNotReady"`
	// CapacitySecondsLost: ∫ (desired − running member pods) dt.
	CapacitySecondsLost float64 `json:"capacitySecondsLost"`
	// OrphansAtEnd: member pods no host pod stands for at the end.
	OrphansAtEnd int `json:"orphansAtEnd"`
	// RecoveredAfter: seconds from the fault's end until every desired host
	// pod was Ready again (0: whole again by the fault's end, or never
	// lost: see NeverShort; -1: not within the observation).
	RecoveredAfter float64 `json:"recoveredAfter"`
	// NeverShort: every desired host pod was Ready throughout (so a
	// RecoveredAfter of 0 means nothing was lost, not a quick recovery).
	NeverShort bool `json:"neverShort"`
	// Failover is, per workload, the replicas it wants, in scenarios where
	// a spare node outside the member can take them; FailoverAfter is the
	// seconds from the fault's beginning until all of them were Ready on
	// it (-1: not within the observation).
	Failover      map[string]int     `json:"failover,omitempty"`
	FailoverAfter map[string]float64 `json:"failoverAfter,omitempty"`
	// FaultEnd is when the fault ended, since it began.
	FaultEnd time.Duration `json:"faultEnd"`
	Samples  []Sample      `json:"samples"`
}

// Integrate computes the lost pod-seconds and the recovery time from the
// samples (each sample holds until the next).
func (r *Result) Integrate() {
	r.PodSecondsNotReady, r.CapacitySecondsLost, r.RecoveredAfter = 0, 0, 0
	lastShort := -1
	for i, s := range r.Samples {
		if s.At < 0 {
			continue
		}
		next := s.At
		if i+1 < len(r.Samples) {
			next = r.Samples[i+1].At
		}
		dt := (next - s.At).Seconds()
		r.PodSecondsNotReady += float64(max(r.Desired-s.HostReady, 0)) * dt
		r.CapacitySecondsLost += float64(max(r.Desired-s.MemberRunning, 0)) * dt
		if s.HostReady < r.Desired {
			lastShort = i
		}
	}
	r.NeverShort = lastShort < 0
	switch {
	case lastShort < 0:
		r.RecoveredAfter = 0
	case lastShort+1 >= len(r.Samples):
		r.RecoveredAfter = -1
	default:
		r.RecoveredAfter = max((r.Samples[lastShort+1].At - r.FaultEnd).Seconds(), 0)
	}
	r.FailoverAfter = nil
	for w, want := range r.Failover {
		if r.FailoverAfter == nil {
			r.FailoverAfter = map[string]float64{}
		}
		r.FailoverAfter[w] = -1
		for _, s := range r.Samples {
			if s.At >= 0 && s.Elsewhere[w] >= want {
				r.FailoverAfter[w] = s.At.Seconds()
				break
			}
		}
	}
}

// Report is a run: the machine, the timings, every result.
type Report struct {
	Date    string `json:"date"`
	Command string `json:"command"`
	Machine string `json:"machine"`
	Timings string `json:"timings"`
	// Notes say what a contestant is, or why one was left out.
	Notes    []string `json:"notes,omitempty"`
	Results  []Result `json:"results"`
	Duration string   `json:"duration"`
}

// Write puts report.json, report.md and one PNG per scenario in dir.
func (rep *Report) Write(dir string) error {
	if err := harness.WriteReport(dir, rep, rep.Markdown); err != nil {
		return err
	}
	for _, sc := range rep.scenarios() {
		first := slices.DeleteFunc(rep.byScenario(sc), func(r Result) bool { return r.Repetition > 1 })
		if err := PlotScenario(filepath.Join(dir, sc+".png"), sc, first); err != nil {
			return fmt.Errorf("plotting %s: %w", sc, err)
		}
	}
	return nil
}

func (rep *Report) scenarios() []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range rep.Results {
		if !seen[r.Scenario] {
			seen[r.Scenario] = true
			out = append(out, r.Scenario)
		}
	}
	return out
}

func (rep *Report) byScenario(sc string) []Result {
	var out []Result
	for _, r := range rep.Results {
		if r.Scenario == sc {
			out = append(out, r)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Contestant < out[j].Contestant })
	return out
}

// Markdown writes the table: one row per scenario and contestant, each
// figure the median of the repetitions, with their range when they differ.
func (rep *Report) Markdown(w io.Writer) {
	fmt.Fprintf(w, "Command: `%s`  \nMachine: %s  \nDate: %s, run took %s  \nTimings: %s\n\n", rep.Command, rep.Machine, rep.Date, rep.Duration, rep.Timings)
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "- %s\n", n)
	}
	if len(rep.Notes) > 0 {
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "| scenario | contestant | leaf NotReady | NoExecute taints | host evictions | member pods deleted | member pods started | pod-s NotReady (host) | capacity-s lost | orphans | recovered after | failover after |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, sc := range rep.scenarios() {
		rs := rep.byScenario(sc)
		for len(rs) > 0 {
			n := 1
			for n < len(rs) && rs[n].Contestant == rs[0].Contestant {
				n++
			}
			fmt.Fprintln(w, row(rs[:n]))
			rs = rs[n:]
		}
	}
}
