package hysteresis

import (
	"os/exec"
	"strings"
	"testing"
)

// The engine must stay pure: only the standard library, and certainly no
// k8s.io/client-go or sigs.k8s.io/controller-runtime.
func TestNoKubernetesDependencies(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	// A test run has a go binary; failing to list is a failure, not a pass.
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go binary to list the dependencies with: %v", err)
	}
	out, err := exec.Command(gobin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		first, _, _ := strings.Cut(p, "/")
		if strings.Contains(first, ".") && p != "github.com/leafsync/leafsync/hysteresis" {
			t.Errorf("non-standard dependency %s", p)
		}
	}
}
