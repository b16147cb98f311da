package conformance

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadJUnit: from a JUnit file as the e2e framework writes it, the
// in-scope specs only, each with its group and result: a failure's first
// line, a framework skip's reason, a spec outside the run's focus "not run".
func TestReadJUnit(t *testing.T) {
	junit := `<?xml version="1.0" encoding="UTF-8"?>
<testsuites><testsuite name="Kubernetes e2e suite">
<testcase name="[It] [sig-node] Pods should get a host IP [NodeConformance] [Conformance]" status="passed" time="4.5"></testcase>
<testcase name="[It] [sig-storage] ConfigMap optional updates should be reflected in volume [NodeConformance] [Conformance]" status="failed" time="120">
<failure type="failed">
[FAILED] Timed out after 120.000s.
Expected file content
</failure></testcase>
<testcase name="[It] [sig-node] Sysctls [LinuxOnly] [NodeConformance] should support sysctls [MinimumKubeletVersion:1.21] [Conformance]" status="skipped" time="0"><skipped message="skipped - only Linux"></skipped></testcase>
<testcase name="[It] [sig-cli] Kubectl client Guestbook application should create and stop a working application [Conformance]" status="skipped" time="0"><skipped message="skipped"></skipped></testcase>
<testcase name="[It] [sig-node] Pods should be updated [NodeConformance] [Conformance]" status="skipped" time="0"><skipped message="skipped"></skipped></testcase>
<testcase name="[It] [sig-node] Pods should be deleted [Conformance]" status="interrupted" time="30"><error message="interrupted" type="interrupted">Interrupted by Timeout</error></testcase>
<testcase name="[It] [sig-node] Pods should be patched [Conformance]" status="timedout" time="77"><failure message="" type="timedout">[TIMEDOUT] A suite timeout occurred
In [It] at: pods.go:1</failure></testcase>
<testcase name="[It] [sig-apps] Deployment should run [Conformance]" status="passed" time="9"></testcase>
</testsuite></testsuites>`
	path := filepath.Join(t.TempDir(), "junit_01.xml")
	if err := os.WriteFile(path, []byte(junit), 0o644); err != nil {
		t.Fatal(err)
	}
	specs, err := readJUnit(path, Focus)
	if err != nil {
		t.Fatal(err)
	}
	skips := map[string]string{"Guestbook application": "needs cluster DNS"}
	markSkipped(specs, skips)
	want := []Spec{
		{Group: "Pods", Result: "passed"},
		{Group: "ConfigMap", Result: "failed", Reason: "[FAILED] Timed out after 120.000s."},
		{Group: "Sysctls", Result: "skipped", Reason: "skipped - only Linux"},
		{Group: "Kubectl client", Result: "skipped", Reason: "skip list: needs cluster DNS"},
		{Group: "Pods", Result: "not run"},
		{Group: "Pods", Result: "not run", Reason: "interrupted by the suite's timeout"},
		{Group: "Pods", Result: "not run", Reason: "interrupted by the suite's timeout"},
	}
	if len(specs) != len(want) {
		t.Fatalf("%d specs, want %d: %+v", len(specs), len(want), specs)
	}
	for i, w := range want {
		s := specs[i]
		if s.Group != w.Group || s.Result != w.Result || s.Reason != w.Reason || strings.HasPrefix(s.Name, "[It]") {
			t.Errorf("spec %d: %+v, want %+v", i, s, w)
		}
	}
	r := report{Specs: specs}
	if got := r.totals(); got != "7 in scope: 1 passed, 1 failed, 2 skipped, 3 not run" {
		t.Errorf("totals %q", got)
	}
	dir := filepath.Join(t.TempDir(), "report")
	if err := r.write(dir); err != nil {
		t.Fatal(err)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if md := read("report.md"); !strings.Contains(md, "| ConfigMap | 0 | 1 | 0 | 0 |") {
		t.Errorf("report.md has no ConfigMap row:\n%s", md)
	}
	if j := read("junit.xml"); !strings.Contains(j, `tests="4" failures="1" skipped="2"`) {
		t.Errorf("junit.xml:\n%s", j)
	}
	var back report
	if err := json.Unmarshal([]byte(read("report.json")), &back); err != nil || len(back.Specs) != len(specs) {
		t.Errorf("report.json does not read back to %d specs: %v", len(specs), err)
	}
}
