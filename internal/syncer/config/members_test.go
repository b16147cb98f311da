package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMembersDefaultsValid(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatal(err)
	}
	m := Default().Members
	if m.AllowExecAuth || m.AllowFileReferences {
		t.Error("exec auth or file references allowed by default")
	}
}

func TestMembersFromFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte("members:\n  allowExecAuth: true\n  probeTimeout: 1s\n  breaker:\n    openTimeout: 10s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	m := cfg.Members
	if !m.AllowExecAuth || m.ProbeTimeout.Duration != time.Second || m.Breaker.OpenTimeout.Duration != 10*time.Second {
		t.Errorf("members = %+v", m)
	}
	// Fields not in the file keep their defaults.
	if m.Timeout.Duration != 30*time.Second || m.Breaker.ConsecutiveFailures != 5 || m.QPS != 20 {
		t.Errorf("defaults lost: %+v", m)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestMembersValidate(t *testing.T) {
	cfg := Default()
	cfg.Members.Timeout.Duration = 0
	cfg.Members.QPS = 0
	cfg.Members.Burst = 0
	cfg.Members.ProbeTimeout.Duration = -1
	cfg.Members.ReconnectTimeout.Duration = 0
	cfg.Members.Breaker.ConsecutiveFailures = 0
	cfg.Members.Breaker.OpenTimeout.Duration = 0
	cfg.Members.Breaker.HalfOpenRequests = 0
	err := cfg.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, field := range []string{"members.timeout", "members.qps", "members.burst", "members.probeTimeout", "members.reconnectTimeout",
		"members.breaker.consecutiveFailures", "members.breaker.openTimeout", "members.breaker.halfOpenRequests"} {
		if !strings.Contains(err.Error(), field+" ") {
			t.Errorf("error does not name %s: %v", field, err)
		}
	}
	cfg = Default()
	cfg.Members.ProbeTimeout.Duration = time.Minute
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "must not exceed members.timeout") {
		t.Errorf("err = %v", err)
	}
}
