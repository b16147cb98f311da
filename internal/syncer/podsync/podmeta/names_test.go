package podmeta

import (
	"testing"

	"github.com/leafsync/leafsync/internal/syncer/config"
)

func TestPoliciesMatchConfig(t *testing.T) {
	if len(config.StaleEvictionPolicies) != len(Policies) {
		t.Fatalf("config lists %v, podmeta %v", config.StaleEvictionPolicies, Policies)
	}
	for i, p := range Policies {
		if string(p) != config.StaleEvictionPolicies[i] {
			t.Errorf("config lists %v, podmeta %v", config.StaleEvictionPolicies, Policies)
		}
		if _, err := ParsePolicy(string(p)); err != nil {
			t.Error(err)
		}
	}
	if config.DefaultPodSync().StaleEvictionPolicy != string(DeferUntilReplaced) {
		t.Error("default policy is not DeferUntilReplaced")
	}
	if _, err := ParsePolicy("Defer"); err == nil {
		t.Error("ParsePolicy accepted an unknown policy")
	}
}
