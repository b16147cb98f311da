package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/leafsync/leafsync/hysteresis"
)

type simulateOptions struct {
	trace  string
	config string
	format string
}

func newSimulateCommand() *cobra.Command {
	var o simulateOptions
	cmd := &cobra.Command{
		Use:   "simulate [--trace FILE] [--config FILE] [threshold flags]",
		Short: "Replay a probe trace through the hysteresis engine and print the decisions",
		Long: `simulate replays recorded or invented probe outcomes through the same
hysteresis engine the controller uses, and prints what the leaf nodes would have
done: every transition, then a summary per cluster.

Input (stdin, or --trace FILE): JSON Lines, one probe per line, times RFC 3339
and non-decreasing, "class" (network, server, auth or config) only on failures,
"detail" optional:

  {"t":"2026-01-02T03:04:05Z","cluster":"eu-1","ok":false,"class":"network"}
  {"t":"2026-01-02T03:04:10Z","cluster":"eu-1","ok":true}

Output (stdout, --format jsonl): one line per transition ("from" equals "to"
when only "cordoned" changed), then one summary line per cluster, by name:

  {"t":"…","cluster":"eu-1","from":"Ready","to":"Suspect","cordoned":false,"reason":"NetworkFailure"}
  {"cluster":"eu-1","summary":true,"flapsSuppressed":3,"notReadyTransitions":1,"notReadySeconds":412.5,"cordonedSeconds":500,"maxPenalty":2875.3}

notReadyTransitions counts the times the leaf went from Ready to NotReady (a
relapse while Recovering is not one: the leaf was not Ready already);
notReadySeconds is the time the leaf was not Ready (states NotReady and
Recovering) and cordonedSeconds the time it was cordoned, both up to the
cluster's last probe; maxPenalty is the highest flap-damping penalty reached.
--format table prints the same for people.

Thresholds come from the defaults, then the hysteresis: section of --config
(the controller's config file, per-cluster overrides included), then the flags,
which override the file everywhere, per-cluster entries included.`,
		Example: `  leafsync simulate --trace outage.jsonl --not-ready-after 2m
  leafsync simulate --config leafsync.yaml --format table < probes.jsonl`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.trace, "trace", "", "read the probe trace from `FILE` instead of stdin")
	fs.StringVar(&o.config, "config", "", "read thresholds from the hysteresis: section of the controller config `FILE`")
	fs.StringVar(&o.format, "format", "jsonl", "output format: jsonl or table")
	// One flag per threshold, typed so that a bad value is refused by name.
	d := hysteresis.DefaultConfig()
	for _, t := range hysteresis.Thresholds {
		switch v := t.Get(d).(type) {
		case hysteresis.Duration:
			fs.Duration(t.Flag, v.Duration, t.Doc)
		case float64:
			fs.Float64(t.Flag, v, t.Doc)
		case int:
			fs.Int(t.Flag, v, t.Doc)
		}
	}
	return cmd
}

func (o simulateOptions) run(cmd *cobra.Command) error {
	if o.format != "jsonl" && o.format != "table" {
		return fmt.Errorf("--format %q: want jsonl or table", o.format)
	}
	fc, err := o.fleetConfig(cmd.Flags())
	if err != nil {
		return err
	}
	in, name := cmd.InOrStdin(), "stdin"
	if o.trace != "" {
		f, err := os.Open(o.trace)
		if err != nil {
			return err
		}
		defer f.Close()
		in, name = f, o.trace
	}
	probes, err := readTrace(in)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	out := &simOutput{w: cmd.OutOrStdout(), table: o.format == "table"}
	if err := simulate(fc, probes, out); err != nil {
		return err
	}
	return out.err
}

// fleetConfig: defaults, then the --config file, then changed flags.
func (o simulateOptions) fleetConfig(fs *pflag.FlagSet) (hysteresis.FleetConfig, error) {
	file := struct {
		Hysteresis hysteresis.FleetConfig `json:"hysteresis"`
	}{Hysteresis: hysteresis.DefaultFleetConfig()}
	if o.config != "" {
		b, err := os.ReadFile(o.config)
		if err != nil {
			return file.Hysteresis, err
		}
		if err := yaml.Unmarshal(b, &file); err != nil {
			return file.Hysteresis, fmt.Errorf("%s: %w", o.config, err)
		}
	}
	fc := file.Hysteresis
	kv := map[string]string{}
	for _, t := range hysteresis.Thresholds {
		if fl := fs.Lookup(t.Flag); fl != nil && fl.Changed {
			kv[t.Name] = fl.Value.String()
		}
	}
	flagOv, err := hysteresis.ParseOverrides(kv)
	if err != nil {
		return fc, err
	}
	fc.Config = flagOv.Apply(fc.Config)
	if len(fc.Clusters) > 0 {
		clusters := make(map[string]hysteresis.Overrides, len(fc.Clusters))
		for n, ov := range fc.Clusters {
			clusters[n] = ov.Merge(flagOv)
		}
		fc.Clusters = clusters
	}
	if err := fc.Validate(); err != nil {
		return fc, err
	}
	return fc, nil
}

type simProbe struct {
	line    int
	cluster string
	obs     hysteresis.Observation
}

// readTrace parses the whole trace first, so bad input produces an error
// and no partial output.
func readTrace(r io.Reader) ([]simProbe, error) {
	br := bufio.NewReader(r)
	var probes []simProbe
	var prev time.Time
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			p, perr := parseProbe(line)
			if perr != nil {
				return nil, fmt.Errorf("line %d: %w", n, perr)
			}
			if p.obs.Time.Before(prev) {
				return nil, fmt.Errorf("line %d: time %s goes backwards (an earlier line has %s)",
					n, p.obs.Time.Format(time.RFC3339Nano), prev.Format(time.RFC3339Nano))
			}
			prev = p.obs.Time
			p.line = n
			probes = append(probes, p)
		}
		if err == io.EOF {
			return probes, nil
		}
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
	}
}

func parseProbe(line []byte) (simProbe, error) {
	var v struct {
		T       *string `json:"t"`
		Cluster *string `json:"cluster"`
		OK      *bool   `json:"ok"`
		Class   *string `json:"class"`
		Detail  string  `json:"detail"`
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return simProbe{}, fmt.Errorf("invalid JSON: %w", err)
	}
	if dec.More() {
		return simProbe{}, errors.New("invalid JSON: more than one value on the line")
	}
	var p simProbe
	switch {
	case v.T == nil:
		return p, errors.New(`missing "t"`)
	case v.Cluster == nil || *v.Cluster == "":
		return p, errors.New(`missing "cluster"`)
	case v.OK == nil:
		return p, errors.New(`missing "ok"`)
	}
	t, err := time.Parse(time.RFC3339Nano, *v.T)
	if err != nil {
		return p, fmt.Errorf(`"t": %q is not an RFC 3339 time`, *v.T)
	}
	p.cluster = *v.Cluster
	p.obs = hysteresis.Observation{Time: t, OK: *v.OK, Detail: v.Detail}
	switch {
	case *v.OK && v.Class != nil && *v.Class != "":
		return p, fmt.Errorf(`"class" %q given for a successful probe`, *v.Class)
	case !*v.OK && (v.Class == nil || *v.Class == ""):
		return p, errors.New(`missing "class" for a failed probe (want network, server, auth or config)`)
	case !*v.OK:
		if p.obs.Class, err = hysteresis.ParseClass(*v.Class); err != nil {
			return p, err
		}
	}
	return p, nil
}

func simulate(fc hysteresis.FleetConfig, probes []simProbe, out *simOutput) error {
	fleet, err := hysteresis.NewRawFleet(fc)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	var names []string
	for _, p := range probes {
		if !seen[p.cluster] {
			seen[p.cluster] = true
			names = append(names, p.cluster)
		}
	}
	sort.Strings(names)
	// Every cluster of the trace is in the fleet from the start, so the
	// mass-disconnect guard sees the whole fleet.
	for _, n := range names {
		if err := fleet.Add(n, hysteresis.Overrides{}); err != nil {
			return err
		}
	}
	out.begin()
	for _, p := range probes {
		_, trs, err := fleet.Observe(p.cluster, p.obs)
		if err != nil {
			return fmt.Errorf("line %d: %w", p.line, err)
		}
		for _, tr := range trs {
			out.transition(tr)
		}
	}
	out.endTransitions()
	for _, n := range names {
		k, _ := fleet.Counters(n)
		s := simSummary{Cluster: n, Summary: true, FlapsSuppressed: k.FlapsSuppressed,
			NotReadySeconds: (k.TimeIn[hysteresis.NotReady] + k.TimeIn[hysteresis.Recovering]).Seconds(),
			CordonedSeconds: k.Cordoned.Seconds(),
			MaxPenalty:      math.Round(k.MaxPenalty*10) / 10,
		}
		// Flips of the leaf: from a Ready leaf (Ready, Suspect) to NotReady.
		// Recovering -> NotReady is a relapse of a leaf already not Ready.
		for _, from := range []hysteresis.State{hysteresis.Ready, hysteresis.Suspect} {
			s.NotReadyTransitions += k.Transitions[from][hysteresis.NotReady]
		}
		out.summary(s)
	}
	out.end()
	return nil
}

type simTransition struct {
	T        time.Time `json:"t"`
	Cluster  string    `json:"cluster"`
	From     string    `json:"from"`
	To       string    `json:"to"`
	Cordoned bool      `json:"cordoned"`
	Reason   string    `json:"reason"`
}

type simSummary struct {
	Cluster             string  `json:"cluster"`
	Summary             bool    `json:"summary"`
	FlapsSuppressed     uint64  `json:"flapsSuppressed"`
	NotReadyTransitions uint64  `json:"notReadyTransitions"`
	NotReadySeconds     float64 `json:"notReadySeconds"`
	CordonedSeconds     float64 `json:"cordonedSeconds"`
	MaxPenalty          float64 `json:"maxPenalty"`
}

// simOutput writes JSON Lines, or tables through a tabwriter.
type simOutput struct {
	w     io.Writer
	table bool
	tw    *tabwriter.Writer
	n     int
	err   error
}

func (o *simOutput) printf(format string, a ...any) {
	if o.err == nil {
		w := o.w
		if o.tw != nil {
			w = o.tw
		}
		_, o.err = fmt.Fprintf(w, format, a...)
	}
}

func (o *simOutput) json(v any) {
	b, err := json.Marshal(v)
	if err != nil && o.err == nil {
		o.err = err
	}
	o.printf("%s\n", b)
}

func (o *simOutput) begin() {
	if o.table {
		o.tw = tabwriter.NewWriter(o.w, 0, 4, 2, ' ', 0)
		o.printf("TIME\tCLUSTER\tFROM\tTO\tCORDONED\tREASON\n")
	}
}

func (o *simOutput) transition(tr hysteresis.Transition) {
	o.n++
	if o.table {
		reason := tr.Reason
		if reason == "" {
			reason = "-"
		}
		o.printf("%s\t%s\t%s\t%s\t%v\t%s\n", tr.Time.Format(time.RFC3339Nano), tr.Cluster, tr.From, tr.To, tr.Cordoned, reason)
		return
	}
	o.json(simTransition{T: tr.Time, Cluster: tr.Cluster, From: tr.From.String(), To: tr.To.String(), Cordoned: tr.Cordoned, Reason: tr.Reason})
}

func (o *simOutput) endTransitions() {
	if !o.table {
		return
	}
	if o.n == 0 {
		o.printf("(no transitions)\n")
	}
	o.flush()
	o.printf("\n")
	o.tw = tabwriter.NewWriter(o.w, 0, 4, 2, ' ', 0)
	o.printf("CLUSTER\tFLAPS SUPPRESSED\tNOTREADY TRANSITIONS\tNOTREADY SECONDS\tCORDONED SECONDS\tMAX PENALTY\n")
}

func (o *simOutput) summary(s simSummary) {
	if o.table {
		o.printf("%s\t%d\t%d\t%s\t%s\t%s\n", s.Cluster, s.FlapsSuppressed, s.NotReadyTransitions,
			simNum(s.NotReadySeconds), simNum(s.CordonedSeconds), simNum(s.MaxPenalty))
		return
	}
	o.json(s)
}

func (o *simOutput) end() { o.flush() }

func (o *simOutput) flush() {
	if o.tw != nil {
		if err := o.tw.Flush(); err != nil && o.err == nil {
			o.err = err
		}
		o.tw = nil
	}
}

func simNum(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
