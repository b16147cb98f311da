package main

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/syncer/config"
	"github.com/leafsync/leafsync/internal/syncer/registration"
)

// Every threshold of hysteresis.Thresholds reaches the engine's Config by
// each way in: a registration annotation (leafsync register, then the
// controller's parse), a `leafsync simulate` flag, and the config file, both
// as a fleet default and as a cluster's entry.
func TestThresholdsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := writeKubeconfig(t, dir, "member.yaml", nil)
	def := hysteresis.DefaultConfig()
	for _, th := range hysteresis.Thresholds {
		t.Run(th.Name, func(t *testing.T) {
			// A value other than the default that keeps the config valid.
			var want any
			var text string
			switch v := th.Get(def).(type) {
			case hysteresis.Duration:
				want = hysteresis.D(v.Duration + time.Second)
				text = want.(hysteresis.Duration).String()
			case float64:
				want, text = v/2, strconv.FormatFloat(v/2, 'g', -1, 64)
			case int:
				want, text = v+1, strconv.Itoa(v+1)
			}

			out, _, err := runRegister(t, "--cluster", "eu-1", "--member-kubeconfig", kubeconfig, "--dry-run",
				"--annotation", th.Flag+"="+text, "--kubeconfig", "/nonexistent")
			if err != nil {
				t.Fatal(err)
			}
			s := decodeSecret(t, out)
			if got := s.Annotations[registration.AnnotationPrefix+th.Flag]; got != text {
				t.Fatalf("annotation %s%s = %q, want %q", registration.AnnotationPrefix, th.Flag, got, text)
			}
			fleet := hysteresis.DefaultFleetConfig()
			spec, err := registration.Parse(s, registration.Policy{Thresholds: &fleet})
			if err != nil {
				t.Fatal(err)
			}
			if got := th.Get(spec.Overrides.Apply(def)); got != want {
				t.Errorf("annotation: %v, want %v", got, want)
			}

			cmd := newSimulateCommand()
			fl := cmd.Flags().Lookup(th.Flag)
			if fl == nil {
				t.Fatalf("no flag --%s", th.Flag)
			}
			if err := cmd.Flags().Set(th.Flag, text); err != nil {
				t.Fatal(err)
			}
			fc, err := simulateOptions{}.fleetConfig(cmd.Flags())
			if err != nil {
				t.Fatal(err)
			}
			if got := th.Get(fc.Config); got != want {
				t.Errorf("flag: %v, want %v", got, want)
			}

			file := filepath.Join(dir, th.Name+".yaml")
			yaml := "hysteresis:\n  " + th.Name + ": " + text + "\n  clusters:\n    eu-2:\n      " + th.Name + ": " + text + "\n"
			if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Load(file)
			if err != nil {
				t.Fatal(err)
			}
			if got := th.Get(cfg.Hysteresis.Config); got != want {
				t.Errorf("config file: %v, want %v", got, want)
			}
			cfg.Hysteresis.Config = def
			if got := th.Get(cfg.Hysteresis.For("eu-2")); got != want {
				t.Errorf("config file, cluster entry: %v, want %v", got, want)
			}
		})
	}
}
