package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/leafsync/leafsync/internal/syncer/config"
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
		"bad pprof address":             {[]string{"--pprof-bind-address=6060"}, "pprofBindAddress"},
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

// TestRunFlagsOverrideTheFile: a flag that is set wins over the config
// file; a flag that is not leaves the file's value alone.
func TestRunFlagsOverrideTheFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "leafsync.yaml")
	if err := os.WriteFile(p, []byte("namespace: from-file\nmembers:\n  qps: 7\n  burst: 8\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	opts := runOptions{flags: config.Default()}
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	opts.bind(fs)
	args := []string{"--config=" + p, "--member-burst=9", "--etcd-endpoints=https://a:2379,https://b:2379", "--store-backend=etcd", "--member-timeout=12s", "--leader-elect=false"}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	cfg, err := opts.resolve(fs)
	if err != nil {
		t.Fatal(err)
	}
	want := config.Default()
	want.Namespace = "from-file"
	want.Members.QPS = 7
	want.Members.Burst = 9
	want.Members.Timeout.Duration = 12 * time.Second
	want.Store.Backend = "etcd"
	want.Store.Etcd.Endpoints = []string{"https://a:2379", "https://b:2379"}
	want.LeaderElection.Enabled = false
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("leafsync run %v:\n got %+v\nwant %+v", args, cfg, want)
	}
}

// TestShardedReplicasElectNoLeader: with sharding on, leader election is
// not used even when enabled: every replica acts on its members.
func TestShardedReplicasElectNoLeader(t *testing.T) {
	cfg := config.Default()
	cfg.LeaderElection.Enabled = true
	if !elected(cfg) {
		t.Error("unsharded with leader election: no leader elected")
	}
	cfg.Sharding.Enabled = true
	if elected(cfg) {
		t.Error("sharded: a leader is elected, and losing its Lease would stop the replica")
	}
}
