package scalebench

import (
	"fmt"
	"io"
	"strings"
)

// ReplicaStep is what one of N sharded replicas cost at a step
// (REPLICAS=N): the members it held and its own share of the resources.
type ReplicaStep struct {
	Replica string `json:"replica"`
	// Members whose member Lease this replica's incarnation held at the end
	// of the steady window, and leafsync_shard_members (those it acted on)
	// then.
	Members int `json:"members"`
	Acting  int `json:"acting"`
	// As Step's, for this process alone.
	SteadyRSSMiB  float64 `json:"steadyRSSMiB"`
	SteadyHeapMiB float64 `json:"steadyHeapMiB"`
	SteadyCPU     float64 `json:"steadyCPU"`
	ChurnRSSMiB   float64 `json:"churnRSSMiB"`
	ChurnCPU      float64 `json:"churnCPU"`
	// HostWritesPerSec: this replica's writes to the host in steady state
	// (audit log, told apart by user agent).
	HostWritesPerSec float64 `json:"hostWritesPerSec"`
	LeaseLagP99      float64 `json:"leaseLagP99"`
	// LeaseRenewalFailures: as Step's, this replica's alone.
	LeaseRenewalFailures float64 `json:"leaseRenewalFailures"`
	Goroutines           int     `json:"goroutines"`
}

// replicaOfUserAgent is the replica named in a sharded leafsync's user
// agent, "leafsync/<version> (replica <name>)"; "" for any other.
func replicaOfUserAgent(ua string) string {
	_, rest, ok := strings.Cut(ua, "(replica ")
	if !ok {
		return ""
	}
	name, _, ok := strings.Cut(rest, ")")
	if !ok {
		return ""
	}
	return name
}

// replicasMarkdown writes the per-replica table of a sharded run.
func (rep *Report) replicasMarkdown(w io.Writer) {
	if rep.Replicas <= 1 {
		return
	}
	fmt.Fprintf(w, "\nPer replica (%d replicas, sharding on; the table above sums RSS, Go heap, CPU, probes and goroutines over them):\n\n", rep.Replicas)
	fmt.Fprintln(w, "| registrations | replica | members held / acting | RSS steady / churn | Go heap steady | CPU steady / churn (cores) | host writes/s | Lease renewal lag p99, failed renewals | goroutines |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	for _, s := range rep.Steps {
		for _, r := range s.Replicas {
			fmt.Fprintf(w, "| %d | %s | %d / %d | %.0f / %.0f MiB | %.0f MiB | %.2f / %.2f | %.2f | %.2fs, %.0f | %d |\n",
				s.Registrations, r.Replica, r.Members, r.Acting, r.SteadyRSSMiB, r.ChurnRSSMiB, r.SteadyHeapMiB,
				r.SteadyCPU, r.ChurnCPU, r.HostWritesPerSec, r.LeaseLagP99, r.LeaseRenewalFailures, r.Goroutines)
		}
	}
}
