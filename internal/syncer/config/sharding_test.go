package config

import (
	"strings"
	"testing"
	"time"
)

func TestShardingValidation(t *testing.T) {
	valid := func() Config {
		c := Default()
		c.Sharding.Enabled = true
		c.Sharding.Replica = "leafsync-0"
		return c
	}
	if err := valid().Validate(); err != nil {
		t.Fatalf("sharding with the defaults: %v", err)
	}
	off := Default()
	off.Sharding.LoadBound = 7
	off.Store.Backend = StoreMemory
	if err := off.Validate(); err != nil {
		t.Fatalf("a sharding block that is off is not checked: %v", err)
	}
	for name, tc := range map[string]struct {
		change func(*Config)
		want   string
	}{
		"memory store":          {func(c *Config) { c.Store.Backend = StoreMemory }, "store.backend kube or etcd"},
		"renew not below lease": {func(c *Config) { c.Sharding.RenewInterval.Duration = 15 * time.Second }, "sharding.renewInterval"},
		"zero lease":            {func(c *Config) { c.Sharding.LeaseDuration.Duration = 0 }, "must all be positive"},
		"load bound above 1":    {func(c *Config) { c.Sharding.LoadBound = 1.5 }, "sharding.loadBound"},
		"negative load bound":   {func(c *Config) { c.Sharding.LoadBound = -0.1 }, "sharding.loadBound"},
		"replica not a name":    {func(c *Config) { c.Sharding.Replica = "Leafsync_0" }, "sharding.replica"},
		"empty ring":            {func(c *Config) { c.Sharding.Ring = "" }, "sharding.ring"},
		"zero drain timeout":    {func(c *Config) { c.Sharding.DrainTimeout.Duration = 0 }, "must all be positive"},
	} {
		c := valid()
		tc.change(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error naming %q", name, err, tc.want)
		}
	}
}

func TestReplicaNameFallsBackToPodName(t *testing.T) {
	t.Setenv("POD_NAME", "leafsync-7f9c-abcde")
	if got := (Sharding{}).ReplicaName(); got != "leafsync-7f9c-abcde" {
		t.Fatalf("ReplicaName() = %q, want $POD_NAME", got)
	}
	if got := (Sharding{Replica: "r1"}).ReplicaName(); got != "r1" {
		t.Fatalf("ReplicaName() = %q, want the configured name", got)
	}
}
