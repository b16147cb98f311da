package scalebench

import (
	"bytes"
	"strings"
	"testing"
)

func TestReplicaOfUserAgent(t *testing.T) {
	for ua, want := range map[string]string{
		"leafsync/v0.3.0 (replica r1)":                  "r1",
		"leafsync/v0.3.0 (replica leafsync-7d9f-abcde)": "leafsync-7d9f-abcde",
		"leafsync/v0.3.0":                               "",
		"kube-controller-manager/v1.36.0 (linux/amd64)": "",
	} {
		if got := replicaOfUserAgent(ua); got != want {
			t.Errorf("replicaOfUserAgent(%q) = %q, want %q", ua, got, want)
		}
	}
}

func TestReplicasMarkdown(t *testing.T) {
	rep := &Report{Replicas: 2, Steps: []Step{{Registrations: 30, Replicas: []ReplicaStep{
		{Replica: "r0", Members: 16, Acting: 16, SteadyRSSMiB: 120},
		{Replica: "r1", Members: 14, Acting: 14, SteadyRSSMiB: 110},
	}}}}
	var buf bytes.Buffer
	rep.Markdown(&buf)
	for _, want := range []string{"Per replica (2 replicas", "| 30 | r0 | 16 / 16 | 120 / 0 MiB |", "| 30 | r1 | 14 / 14 | 110 / 0 MiB |"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("no %q in:\n%s", want, buf.String())
		}
	}
	buf.Reset()
	rep.Replicas, rep.Steps[0].Replicas = 1, nil
	rep.Markdown(&buf)
	if strings.Contains(buf.String(), "Per replica") {
		t.Errorf("one replica has a per-replica table:\n%s", buf.String())
	}
}
