package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/simulate/*.golden")

// runSimulate runs `leafsync simulate args...` with stdin and returns stdout
// and the error.
func runSimulate(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	cmd := newSimulateCommand()
	var out, errOut bytes.Buffer
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(append([]string{}, args...)) // never nil: cobra would read os.Args
	err := cmd.Execute()
	return out.String(), err
}

func TestSimulateGolden(t *testing.T) {
	dir := filepath.Join("testdata", "simulate")
	trace := func(name string) string { return filepath.Join(dir, name+".jsonl") }
	cases := []struct {
		golden string
		trace  string // via --trace; stdin when stdin is set
		stdin  bool
		args   []string
	}{
		// eu-1: three 20s blips a minute apart; never NotReady, the third
		// flap is damped (cordoned, FlapDamped) until the penalty decays.
		{golden: "flap_suppressed", trace: "flap_suppressed"},
		// Outage 30s–150s: Suspect, cordoned at 40s, NotReady at 120s,
		// Recovering, a relapse, Ready after 30s of success.
		{golden: "outage_recovers", trace: "outage_recovers", stdin: true},
		{golden: "outage_recovers_table", trace: "outage_recovers", args: []string{"--format", "table"}},
		// The config file's per-cluster notReadyAfter (2m) applies...
		{golden: "outage_config", trace: "outage_recovers", args: []string{"--config", filepath.Join(dir, "config.yaml")}},
		// ...and a flag overrides it.
		{golden: "outage_config_flag", trace: "outage_recovers", args: []string{"--config", filepath.Join(dir, "config.yaml"), "--not-ready-after", "3m"}},
		// 3 of 4 clusters down together: held (MassDisconnect) for less than
		// massHoldMax, so never NotReady; eu-3 alone stays down afterwards
		// and goes NotReady.
		{golden: "mass_disconnect", trace: "mass_disconnect"},
		// The same with a 30s hold: released one by one, 20s apart.
		{golden: "mass_disconnect_released", trace: "mass_disconnect", args: []string{"--mass-hold-max", "30s", "--mass-release-interval", "20s"}},
		// 401s cordon but never make the leaf NotReady.
		{golden: "auth_failure", trace: "auth_failure"},
		// Unknown class on line 3: an error naming the line, no output.
		{golden: "bad_line", trace: "bad_line"},
	}
	for _, tc := range cases {
		t.Run(tc.golden, func(t *testing.T) {
			var got string
			var err error
			if tc.stdin {
				in, rerr := os.ReadFile(trace(tc.trace))
				if rerr != nil {
					t.Fatal(rerr)
				}
				got, err = runSimulate(t, string(in), tc.args...)
			} else {
				got, err = runSimulate(t, "", append([]string{"--trace", trace(tc.trace)}, tc.args...)...)
			}
			if err != nil {
				got += "error: " + err.Error() + "\n"
			}
			path := filepath.Join(dir, tc.golden+".golden")
			if *updateGolden {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("output differs from %s:\n--- got\n%s--- want\n%s", path, got, want)
			}
		})
	}
}

func TestSimulateBadInput(t *testing.T) {
	const ok1 = `{"t":"2026-01-02T03:00:00Z","cluster":"eu-1","ok":true}` + "\n"
	cases := []struct {
		name, in, want string
		args           []string
	}{
		{"unparseable", ok1 + "{not json\n", "stdin: line 2: invalid JSON", nil},
		{"two values", ok1 + ok1[:len(ok1)-1] + " {}\n", "stdin: line 2: invalid JSON: more than one value", nil},
		{"unknown field", `{"t":"2026-01-02T03:00:00Z","cluster":"eu-1","ok":true,"klass":"x"}`, `stdin: line 1: invalid JSON: json: unknown field "klass"`, nil},
		{"backwards", ok1 + "\n" + `{"t":"2026-01-02T02:59:59Z","cluster":"eu-2","ok":true}`, "stdin: line 3: time 2026-01-02T02:59:59Z goes backwards (an earlier line has 2026-01-02T03:00:00Z)", nil},
		{"unknown class", `{"t":"2026-01-02T03:00:00Z","cluster":"eu-1","ok":false,"class":"dns"}`, `stdin: line 1: unknown failure class "dns"`, nil},
		{"missing class", `{"t":"2026-01-02T03:00:00Z","cluster":"eu-1","ok":false}`, `stdin: line 1: missing "class" for a failed probe`, nil},
		{"class on success", `{"t":"2026-01-02T03:00:00Z","cluster":"eu-1","ok":true,"class":"network"}`, `stdin: line 1: "class" "network" given for a successful probe`, nil},
		{"missing cluster", `{"t":"2026-01-02T03:00:00Z","ok":true}`, `stdin: line 1: missing "cluster"`, nil},
		{"empty cluster", `{"t":"2026-01-02T03:00:00Z","cluster":"","ok":true}`, `stdin: line 1: missing "cluster"`, nil},
		{"missing t", `{"cluster":"eu-1","ok":true}`, `stdin: line 1: missing "t"`, nil},
		{"bad t", `{"t":"yesterday","cluster":"eu-1","ok":true}`, `stdin: line 1: "t": "yesterday" is not an RFC 3339 time`, nil},
		{"missing ok", `{"t":"2026-01-02T03:00:00Z","cluster":"eu-1"}`, `stdin: line 1: missing "ok"`, nil},
		{"bad format", ok1, `--format "yaml": want jsonl or table`, []string{"--format", "yaml"}},
		{"invalid thresholds", ok1, "hysteresis.reuse (3000) must be below hysteresis.suppress (2000)", []string{"--reuse", "3000"}},
		{"negative flag", ok1, `hysteresis override notReadyAfter: duration "-1s" must not be negative`, []string{"--not-ready-after", "-1s"}},
		{"missing trace file", ok1, "no/such/file", []string{"--trace", "no/such/file"}},
		{"extra argument", ok1, "unknown command", []string{"extra"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runSimulate(t, tc.in, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got error %v, want %q", err, tc.want)
			}
			if out != "" {
				t.Errorf("output on bad input: %q", out)
			}
		})
	}
}

func TestSimulateEmptyAndBlankLines(t *testing.T) {
	out, err := runSimulate(t, "\n  \n")
	if err != nil || out != "" {
		t.Fatalf("empty trace: %q %v", out, err)
	}
	in := `{"t":"2026-01-02T03:00:00Z","cluster":"b","ok":true}` + "\n\n" +
		`{"t":"2026-01-02T03:00:00Z","cluster":"a","ok":false,"class":"config","detail":"no server"}`
	out, err = runSimulate(t, in, "--cordon-after", "0s")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"t":"2026-01-02T03:00:00Z","cluster":"a","from":"Ready","to":"Ready","cordoned":true,"reason":"ConfigFailure"}
{"cluster":"a","summary":true,"flapsSuppressed":0,"notReadyTransitions":0,"notReadySeconds":0,"cordonedSeconds":0,"maxPenalty":0}
{"cluster":"b","summary":true,"flapsSuppressed":0,"notReadyTransitions":0,"notReadySeconds":0,"cordonedSeconds":0,"maxPenalty":0}
`
	if out != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
}
