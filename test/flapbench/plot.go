package flapbench

import (
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// contestantColors keeps each contestant's colour across charts.
var contestantColors = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, // blue
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, // red
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, // green
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}, // orange
}

// PlotScenario draws one scenario's timeline for every contestant: Ready
// host pods (the Service's endpoints, solid), running member pods
// (dashed), and the leaf's Ready condition as a band at the bottom (1 when
// Ready, 0 otherwise, dotted). The fault runs from 0 to the grey line.
func PlotScenario(path, title string, results []Result) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "seconds since the fault began"
	p.Y.Label.Text = "pods"
	p.Legend.Top = true
	p.Legend.Left = true
	maxY := 1
	for i, r := range results {
		c := contestantColors[i%len(contestantColors)]
		ready, running, leaf := make(plotter.XYs, len(r.Samples)), make(plotter.XYs, len(r.Samples)), make(plotter.XYs, len(r.Samples))
		for j, s := range r.Samples {
			x := s.At.Seconds()
			ready[j] = plotter.XY{X: x, Y: float64(s.HostReady)}
			running[j] = plotter.XY{X: x, Y: float64(s.MemberRunning)}
			y := 0.0
			if s.LeafReady == "True" {
				y = 0.5
			}
			leaf[j] = plotter.XY{X: x, Y: y - 0.1*float64(i)}
		}
		maxY = max(maxY, r.Desired)
		for _, l := range []struct {
			xys  plotter.XYs
			name string
			dash []vg.Length
		}{
			{ready, r.Contestant + ": Ready host pods (endpoints)", nil},
			{running, r.Contestant + ": running member pods", []vg.Length{vg.Points(6), vg.Points(3)}},
			{leaf, r.Contestant + ": leaf Ready (0.5) / not (0)", []vg.Length{vg.Points(1), vg.Points(2)}},
		} {
			line, err := plotter.NewLine(stepped(l.xys))
			if err != nil {
				return err
			}
			line.Color, line.Width, line.Dashes = c, vg.Points(1.5), l.dash
			p.Add(line)
			p.Legend.Add(l.name, line)
		}
		if i == 0 && r.FaultEnd > 0 {
			end, err := plotter.NewLine(plotter.XYs{{X: r.FaultEnd.Seconds(), Y: -0.5}, {X: r.FaultEnd.Seconds(), Y: float64(r.Desired) + 0.5}})
			if err != nil {
				return err
			}
			end.Color, end.Dashes = color.Gray{Y: 0x99}, []vg.Length{vg.Points(2), vg.Points(2)}
			p.Add(end)
		}
	}
	p.Y.Min, p.Y.Max = -0.5, float64(maxY)+2.5
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	p.Legend.Padding = vg.Points(1)
	p.Legend.YOffs = -vg.Points(2)
	return p.Save(10*vg.Inch, 5*vg.Inch, path)
}

// stepped turns samples into a step line (a value holds until the next).
func stepped(xys plotter.XYs) plotter.XYs {
	out := make(plotter.XYs, 0, 2*len(xys))
	for i, p := range xys {
		if i > 0 {
			out = append(out, plotter.XY{X: p.X, Y: xys[i-1].Y})
		}
		out = append(out, p)
	}
	return out
}
