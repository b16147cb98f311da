//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leafsync/leafsync/test/harness"
)

// auditPodWatches records every watch of the host's pods.
const auditPodWatches = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["watch"]
  resources:
  - group: ""
    resources: ["pods"]
- level: None
`

// TestHostPodsOneWatchForAllLeaves: pod sync follows the host's pods on
// every leaf through one watch, not a watch per member (each cost a
// member an informer: about ten goroutines and a listener's buffer, in
// make bench-scale). Three more members registered into a running
// leafsync open no new watch of the host's pods; pod sync still works for
// them (TestPodSync and the other pod sync tests).
func TestHostPodsOneWatchForAllLeaves(t *testing.T) {
	f := newFleet(t, harness.HostOptions{AuditPolicy: auditPodWatches},
		harness.MemberOptions{Name: "member-a", Nodes: 1}, harness.MemberOptions{Name: "member-b", Nodes: 1},
		harness.MemberOptions{Name: "member-c", Nodes: 1}, harness.MemberOptions{Name: "member-d", Nodes: 1})
	f.startLeafsync(t, "leafsync")
	f.register(t, "member-a", nil)
	f.waitLeafReady(t, "leaf-member-a", time.Minute)
	before := podWatches(t, f)
	for _, m := range []string{"member-b", "member-c", "member-d"} {
		f.register(t, m, nil)
	}
	for _, m := range []string{"member-b", "member-c", "member-d"} {
		f.waitLeafReady(t, "leaf-"+m, time.Minute)
	}
	// Pod sync engages a member after its leaf: give it the time to open
	// a watch, as the old code did one per member.
	time.Sleep(5 * time.Second)
	after := podWatches(t, f)
	t.Logf("leafsync's watches of the host's pods: %d with one member, %d with four", before, after)
	if after != before {
		t.Errorf("leafsync opened %d watches of the host's pods for 3 more members, want none", after-before)
	}
}

// podWatches counts the watches of the host's pods leafsync started,
// ended or not (harness.AuditEvents reads ended requests only).
func podWatches(t *testing.T, f *fleet) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(f.host.Dir, "audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range bytes.Split(data, []byte("\n")) {
		var e harness.AuditEvent
		if json.Unmarshal(line, &e) != nil {
			continue // a line being written
		}
		if strings.HasPrefix(e.UserAgent, "leafsync") && e.Verb == "watch" && e.ObjectRef.Resource == "pods" && e.Stage == "ResponseStarted" {
			n++
		}
	}
	return n
}
