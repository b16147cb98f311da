package harness

import (
	"path/filepath"
	"testing"
)

// TestOriginalSysctlsSurviveAKilledRun: the first node saves the machine's
// settings; a node started after a run killed before its cleanup (the
// file still there, the kubelet's values current) restores the saved
// ones, not the kubelet's.
func TestOriginalSysctlsSurviveAKilledRun(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sysctls")
	machine := map[string]string{"vm/overcommit_memory": "0", "kernel/panic_on_oops": "0"}
	got, err := originalSysctls(file, machine)
	if err != nil || got["vm/overcommit_memory"] != "0" {
		t.Fatalf("first node: %v, %v", got, err)
	}
	// Killed: the file stays, the kubelet's values are current.
	kubelet := map[string]string{"vm/overcommit_memory": "1", "kernel/panic_on_oops": "1"}
	got, err = originalSysctls(file, kubelet)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range machine {
		if got[k] != v {
			t.Errorf("after a killed run %s would be restored to %s, want the machine's %s", k, got[k], v)
		}
	}
}
