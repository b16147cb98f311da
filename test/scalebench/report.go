// Package scalebench measures what one leafsync replica costs as the number
// of registered members grows, against real control planes: many
// registrations of a few real member API servers (each registration has
// its own connection, informers, prober and leaf), members with kwok nodes
// and pods. It is its own Go module so that the plotting library stays out
// of leafsync's dependencies; `make bench-scale` runs it.
package scalebench

import (
	"fmt"
	"image/color"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"gonum.org/v1/plot"

	"github.com/leafsync/leafsync/test/harness"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Step is what one replica cost with a number of registrations.
type Step struct {
	Registrations int `json:"registrations"`
	// Seconds from a registration's Secret to its Ready leaf, over the
	// registrations added in this step.
	RegisterP50 float64 `json:"registerP50"`
	RegisterP99 float64 `json:"registerP99"`
	// RegisterAlone: one more registration on its own, with the others
	// running.
	RegisterAlone float64 `json:"registerAlone"`
	// Steady state (no change in the members) and churn (member pods
	// created and deleted at ChurnRate per second): leafsync's resident
	// memory, Go heap in use, and CPU in cores.
	SteadyRSSMiB  float64 `json:"steadyRSSMiB"`
	SteadyHeapMiB float64 `json:"steadyHeapMiB"`
	SteadyCPU     float64 `json:"steadyCPU"`
	ChurnRSSMiB   float64 `json:"churnRSSMiB"`
	ChurnCPU      float64 `json:"churnCPU"`
	ChurnRate     float64 `json:"churnRate"`
	// Seconds from a member change (a node added or removed) until the
	// leaves of that member's registrations showed it.
	LeafUpdateP50 float64 `json:"leafUpdateP50"`
	LeafUpdateP99 float64 `json:"leafUpdateP99"`
	LeafUpdates   int     `json:"leafUpdates"`
	// Where a leaf update's time went (host audit log): from the node's
	// deletion until the host API server received leafsync's status patch
	// of the leaf that removed it (ToHost), and from then until the server
	// completed that request (InHost); p50/p99 over the updates whose patch
	// was found. WritesMissing: updates with no such patch;
	// WritesAmbiguous: updates with several, of which the last received
	// before the bench saw the change was taken (splitUpdates).
	LeafUpdateToHostP50       float64 `json:"leafUpdateToHostP50"`
	LeafUpdateToHostP99       float64 `json:"leafUpdateToHostP99"`
	LeafUpdateInHostP50       float64 `json:"leafUpdateInHostP50"`
	LeafUpdateInHostP99       float64 `json:"leafUpdateInHostP99"`
	LeafUpdateWritesMissing   int     `json:"leafUpdateWritesMissing"`
	LeafUpdateWritesAmbiguous int     `json:"leafUpdateWritesAmbiguous"`
	// Host API requests per second made by leafsync in steady state, by
	// "verb resource[/subresource]" (from the host's audit log), and the
	// writes among them per leaf.
	HostRequests      map[string]float64 `json:"hostRequests"`
	HostWritesPerLeaf float64            `json:"hostWritesPerLeaf"`
	// HostWritesPerLeafChurn: the same during churn.
	HostWritesPerLeafChurn float64 `json:"hostWritesPerLeafChurn"`
	// Probes per second and the leaves' Lease renewal lag p99 (seconds),
	// from leafsync's metrics over the steady window; goroutines at its end.
	ProbesPerSec float64 `json:"probesPerSec"`
	LeaseLagP99  float64 `json:"leaseLagP99"`
	Goroutines   int     `json:"goroutines"`
	// LeaseRenewalFailures: rounds of leaf Lease renewal that failed over
	// the whole step (leafsync_lease_renewal_failures_total; a round
	// retried in time is no fault a user sees, a leaf that lost Ready is).
	LeaseRenewalFailures float64 `json:"leaseRenewalFailures"`
	// ReadyLost: how many times, over the whole step, a leaf that had been
	// Ready was seen by the bench's host informer with Ready False or
	// Unknown; ReadyLosses: the first of them. Any fails the run.
	ReadyLost   int         `json:"readyLost"`
	ReadyLosses []ReadyLoss `json:"readyLosses,omitempty"`
	// Replicas: each replica's share when REPLICAS > 1 (the figures above
	// are then the fleet's: sums of the replicas' RSS, heap, CPU, probes
	// and goroutines).
	Replicas []ReplicaStep `json:"replicas,omitempty"`
}

// Report is a run.
type Report struct {
	Date     string `json:"date"`
	Command  string `json:"command"`
	Machine  string `json:"machine"`
	Setup    string `json:"setup"`
	Duration string `json:"duration"`
	// Replicas: leafsync processes sharing the members (REPLICAS; 0 or 1:
	// one replica, unsharded).
	Replicas int `json:"replicas,omitempty"`
	// Stopped says why the run did not go further ("" if it did all steps).
	Stopped string `json:"stopped,omitempty"`
	Steps   []Step `json:"steps"`
}

// Write puts report.json, report.md and the plots in dir.
func (rep *Report) Write(dir string) error {
	if err := harness.WriteReport(dir, rep, rep.Markdown); err != nil {
		return err
	}
	return rep.Plot(filepath.Join(dir, "scale.png"))
}

// Markdown writes the tables.
func (rep *Report) Markdown(w io.Writer) {
	fmt.Fprintf(w, "Command: `%s`  \nMachine: %s  \nDate: %s, run took %s  \nSetup: %s\n\n", rep.Command, rep.Machine, rep.Date, rep.Duration, rep.Setup)
	if rep.Stopped != "" {
		fmt.Fprintf(w, "Stopped: %s\n\n", rep.Stopped)
	}
	fmt.Fprintln(w, "| registrations | registration → Ready: batch p50 / p99, alone | RSS steady / churn | Go heap steady | CPU steady / churn (cores) | leaf update p50 / p99 | host writes/s per leaf steady / churn | probes/s | Lease renewal lag p99, failed renewals | leaves that lost Ready | goroutines |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
	for _, s := range rep.Steps {
		fmt.Fprintf(w, "| %d | %.1fs / %.1fs, %.1fs | %.0f / %.0f MiB | %.0f MiB | %.2f / %.2f | %.2fs / %.2fs (n=%d) | %.3f / %.3f | %.1f | %.2fs, %.0f | %d | %d |\n",
			s.Registrations, s.RegisterP50, s.RegisterP99, s.RegisterAlone, s.SteadyRSSMiB, s.ChurnRSSMiB, s.SteadyHeapMiB,
			s.SteadyCPU, s.ChurnCPU, s.LeafUpdateP50, s.LeafUpdateP99, s.LeafUpdates, s.HostWritesPerLeaf, s.HostWritesPerLeafChurn, s.ProbesPerSec,
			s.LeaseLagP99, s.LeaseRenewalFailures, s.ReadyLost, s.Goroutines)
	}
	for _, s := range rep.Steps {
		if text := s.readyLossText(); text != "" {
			fmt.Fprintf(w, "\nAt %d registrations, %s.\n", s.Registrations, text)
		}
	}
	rep.updateSplitMarkdown(w)
	rep.replicasMarkdown(w)
	if len(rep.Steps) == 0 {
		return
	}
	fmt.Fprintln(w, "\nHost API requests per second by leafsync in steady state (audit log):")
	fmt.Fprintln(w)
	keys := map[string]bool{}
	for _, s := range rep.Steps {
		for k := range s.HostRequests {
			keys[k] = true
		}
	}
	fmt.Fprint(w, "| request |")
	for _, s := range rep.Steps {
		fmt.Fprintf(w, " %d |", s.Registrations)
	}
	fmt.Fprint(w, "\n|---|")
	for range rep.Steps {
		fmt.Fprint(w, "---|")
	}
	fmt.Fprintln(w)
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		fmt.Fprintf(w, "| %s |", k)
		for _, s := range rep.Steps {
			fmt.Fprintf(w, " %.2f |", s.HostRequests[k])
		}
		fmt.Fprintln(w)
	}
}

// updateSplitMarkdown writes where the leaf updates' time went.
func (rep *Report) updateSplitMarkdown(w io.Writer) {
	if len(rep.Steps) == 0 {
		return
	}
	fmt.Fprintln(w, "\nWhere a leaf update's time went (host audit log: leafsync's status patch of the leaf that removed the node):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| registrations | leaf update p50 / p99 | until the host received the write p50 / p99 | in the host API server p50 / p99 | updates without a write found / with several |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, s := range rep.Steps {
		fmt.Fprintf(w, "| %d | %.2fs / %.2fs (n=%d) | %.2fs / %.2fs | %.3fs / %.3fs | %d / %d |\n",
			s.Registrations, s.LeafUpdateP50, s.LeafUpdateP99, s.LeafUpdates, s.LeafUpdateToHostP50, s.LeafUpdateToHostP99,
			s.LeafUpdateInHostP50, s.LeafUpdateInHostP99, s.LeafUpdateWritesMissing, s.LeafUpdateWritesAmbiguous)
	}
}

// Plot draws each figure against the number of registrations, one panel
// each, in one PNG.
func (rep *Report) Plot(path string) error {
	figures := []struct {
		title string
		value func(Step) float64
	}{
		{"RSS steady (MiB)", func(s Step) float64 { return s.SteadyRSSMiB }},
		{"RSS churn (MiB)", func(s Step) float64 { return s.ChurnRSSMiB }},
		{"CPU steady (cores)", func(s Step) float64 { return s.SteadyCPU }},
		{"CPU churn (cores)", func(s Step) float64 { return s.ChurnCPU }},
		{"registration → Ready p99 (s)", func(s Step) float64 { return s.RegisterP99 }},
		{"leaf update p99 (s)", func(s Step) float64 { return s.LeafUpdateP99 }},
		{"host writes/s per leaf (steady)", func(s Step) float64 { return s.HostWritesPerLeaf }},
		{"host writes/s per leaf (churn)", func(s Step) float64 { return s.HostWritesPerLeafChurn }},
		{"goroutines", func(s Step) float64 { return float64(s.Goroutines) }},
	}
	const cols = 4
	rows := (len(figures) + cols - 1) / cols
	plots := make([][]*plot.Plot, rows)
	for i := range plots {
		plots[i] = make([]*plot.Plot, cols)
	}
	blue := color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	for i, fig := range figures {
		p := plot.New()
		p.Title.Text = fig.title
		p.X.Label.Text = "registrations"
		xys := make(plotter.XYs, len(rep.Steps))
		for j, s := range rep.Steps {
			xys[j] = plotter.XY{X: float64(s.Registrations), Y: fig.value(s)}
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return err
		}
		line.Color, points.Color = blue, blue
		p.Add(line, points)
		p.Y.Min = 0
		plots[i/cols][i%cols] = p
	}
	img := vgimg.New(cols*3*vg.Inch, vg.Length(rows)*3*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Millimeter, PadY: vg.Millimeter,
		PadTop: vg.Points(2), PadBottom: vg.Points(2), PadLeft: vg.Points(2), PadRight: vg.Points(2)}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		for j, p := range plots[i] {
			if p != nil {
				p.Draw(canvases[i][j])
			}
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Percentile of xs (nearest rank); 0 for none.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(p/100*float64(len(s))+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}
