package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunRejectsBadConfig: invalid flags or config fail with a message
// naming the bad field, before touching any cluster.
func TestRunRejectsBadConfig(t *testing.T) {
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := map[string]struct {
		args []string
		want string
	}{
		"bad log level":                 {[]string{"--log-level=loud"}, "logLevel"},
		"bad namespace":                 {[]string{"--namespace=Not_A_Namespace"}, "namespace"},
		"bad metrics address":           {[]string{"--metrics-bind-address=nonsense"}, "metricsBindAddress"},
		"missing config file":           {[]string{"--config=/nonexistent/leafsync.yaml"}, "reading config file"},
		"unknown flag":                  {[]string{"--no-such-flag"}, "no-such-flag"},
		"misspelt config key":           {[]string{"--config=" + file("unknown.yaml", "namespace: leafsync-system\nlogLevl: debug\n")}, "logLevl"},
		"reuse above suppress":          {[]string{"--config=" + file("hysteresis.yaml", "hysteresis:\n  suppress: 500\n  reuse: 900\n")}, "hysteresis.reuse"},
		"renew deadline above lease":    {[]string{"--config=" + file("election.yaml", "leaderElection:\n  leaseDuration: 5s\n  renewDeadline: 10s\n")}, "leaderElection.renewDeadline"},
		"negative allocatable interval": {[]string{"--config=" + file("leaves.yaml", "leaves:\n  allocatableInterval: -1s\n")}, "leaves.allocatableInterval"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cmd := newRunCommand()
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SetArgs(tc.args)
			err := cmd.Execute()
			if err == nil {
				t.Fatalf("leafsync run %v succeeded; output:\n%s", tc.args, out.String())
			}
			if msg := err.Error() + out.String(); !strings.Contains(msg, tc.want) {
				t.Fatalf("leafsync run %v: %q does not name %q", tc.args, msg, tc.want)
			}
		})
	}
}
