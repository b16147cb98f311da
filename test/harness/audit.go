package harness

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// auditPolicy records who wrote what to pods, nodes and node Leases, at
// Metadata level: enough to prove which identity deleted or evicted a pod,
// or renewed a node's Lease.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
  resources:
  - group: ""
    resources: ["pods", "pods/status", "pods/eviction", "pods/binding", "nodes", "nodes/status"]
- level: Metadata
  verbs: ["create", "update", "patch", "delete"]
  namespaces: ["kube-node-lease"]
  resources:
  - group: "coordination.k8s.io"
    resources: ["leases"]
- level: None
`

// AuditPolicyWith is the default audit policy with more rules (YAML list
// items) before its final catch-all "- level: None".
func AuditPolicyWith(rules string) string {
	return strings.Replace(auditPolicy, "- level: None\n", rules+"- level: None\n", 1)
}

// AuditEvent is the part of a kube-apiserver audit event the tests read.
type AuditEvent struct {
	Stage     string `json:"stage"`
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	User      struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	SourceIPs       []string  `json:"sourceIPs"`
	RequestReceived time.Time `json:"requestReceivedTimestamp"`
	// StageTimestamp: when the event's stage was reached (for the
	// ResponseComplete events AuditEvents returns, the response's end).
	StageTimestamp time.Time `json:"stageTimestamp"`
}

func (c *Cluster) auditArgs(custom string) ([]string, error) {
	policy := filepath.Join(c.logDir, "audit-policy.yaml")
	text := auditPolicy
	if custom != "" {
		text = custom
	}
	if err := os.WriteFile(policy, []byte(text), 0o600); err != nil {
		return nil, err
	}
	return []string{
		"--audit-policy-file=" + policy,
		"--audit-log-path=" + c.auditLogPath(),
		"--audit-log-format=json",
		"--audit-log-mode=blocking",
	}, nil
}

func (c *Cluster) auditLogPath() string { return filepath.Join(c.logDir, "audit.log") }

// AuditEvents reads the audit log (written when ClusterOptions.Audit is set)
// and returns the completed events that match.
func (c *Cluster) AuditEvents(match func(AuditEvent) bool) ([]AuditEvent, error) {
	f, err := os.Open(c.auditLogPath())
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []AuditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1024*1024), 16*1024*1024)
	for sc.Scan() {
		var ev AuditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, err
		}
		if ev.Stage == "ResponseComplete" && match(ev) {
			out = append(out, ev)
		}
	}
	return out, sc.Err()
}
