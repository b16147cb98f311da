package kubeletapi

import (
	"net/url"
	"reflect"
	"testing"

	"github.com/leafsync/leafsync/internal/syncer/metrics"
)

func TestParsePath(t *testing.T) {
	good := map[string]target{
		"/containerLogs/ns/p/c":   {Verb: verbLogs, Namespace: "ns", Pod: "p", Container: "c"},
		"/exec/ns/p/c":            {Verb: verbExec, Namespace: "ns", Pod: "p", Container: "c"},
		"/exec/ns/p/uid-1/c":      {Verb: verbExec, Namespace: "ns", Pod: "p", UID: "uid-1", Container: "c"},
		"/attach/ns/p/c":          {Verb: verbAttach, Namespace: "ns", Pod: "p", Container: "c"},
		"/portForward/ns/p":       {Verb: verbPortForward, Namespace: "ns", Pod: "p"},
		"/portForward/ns/p/uid-1": {Verb: verbPortForward, Namespace: "ns", Pod: "p", UID: "uid-1"},
	}
	for path, want := range good {
		got, err := parsePath(path)
		if err != nil || got != want {
			t.Errorf("parsePath(%q) = %+v, %v; want %+v", path, got, err, want)
		}
	}
	for _, path := range []string{
		"/", "/containerLogs/ns/p", "/containerLogs/ns/p/c/x", "/exec/ns/p", "/exec/ns/p/u/c/x",
		"/portForward/ns", "/portForward/ns/p/u/x", "/run/ns/p/c", "/pods", "/logs/syslog",
		"/exec/ns/../c", "/exec//p/c",
	} {
		if got, err := parsePath(path); err == nil {
			t.Errorf("parsePath(%q) = %+v, want an error", path, got)
		}
	}
}

func TestMemberRequest(t *testing.T) {
	cases := []struct {
		name  string
		t     target
		query string
		path  string
		wantQ url.Values
	}{
		{
			name:  "logs keep the PodLogOptions",
			t:     target{Verb: verbLogs, Namespace: "ns", Pod: "p", Container: "c"},
			query: "follow=true&previous=true&timestamps=true&tailLines=5&sinceSeconds=10&limitBytes=7&insecureSkipTLSVerifyBackend=true&other=x",
			path:  "/api/v1/namespaces/ns/pods/p/log",
			wantQ: url.Values{"container": {"c"}, "follow": {"true"}, "previous": {"true"}, "timestamps": {"true"},
				"tailLines": {"5"}, "sinceSeconds": {"10"}, "limitBytes": {"7"}},
		},
		{
			name:  "exec: the kubelet's stream flags become PodExecOptions",
			t:     target{Verb: verbExec, Namespace: "ns", Pod: "p", UID: "u", Container: "c"},
			query: "command=sh&command=-c&command=echo+hi&input=1&output=1&error=1&tty=1",
			path:  "/api/v1/namespaces/ns/pods/p/exec",
			wantQ: url.Values{"container": {"c"}, "command": {"sh", "-c", "echo hi"}, "stdin": {"true"}, "stdout": {"true"}, "stderr": {"true"}, "tty": {"true"}},
		},
		{
			name:  "attach has no command",
			t:     target{Verb: verbAttach, Namespace: "ns", Pod: "p", Container: "c"},
			query: "command=x&output=1",
			path:  "/api/v1/namespaces/ns/pods/p/attach",
			wantQ: url.Values{"container": {"c"}, "stdout": {"true"}},
		},
		{
			name:  "port forward: port becomes ports",
			t:     target{Verb: verbPortForward, Namespace: "ns", Pod: "p"},
			query: "port=80&port=443",
			path:  "/api/v1/namespaces/ns/pods/p/portforward",
			wantQ: url.Values{"ports": {"80", "443"}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q, err := url.ParseQuery(c.query)
			if err != nil {
				t.Fatal(err)
			}
			path, got := memberRequest(c.t, q)
			if path != c.path || !reflect.DeepEqual(got, c.wantQ) {
				t.Errorf("memberRequest = %s %v; want %s %v", path, got, c.path, c.wantQ)
			}
		})
	}
}

// TestEveryVerbHasItsSeries: the metric's series that exist from the start
// are exactly the API's verbs.
func TestEveryVerbHasItsSeries(t *testing.T) {
	verbs := []kubeletVerb{verbLogs, verbExec, verbAttach, verbPortForward}
	if len(metrics.KubeletAPISuccess) != len(verbs) {
		t.Errorf("metrics.KubeletAPISuccess has %d verbs, the API %d", len(metrics.KubeletAPISuccess), len(verbs))
	}
	for _, v := range verbs {
		if _, ok := metrics.KubeletAPISuccess[string(v)]; !ok {
			t.Errorf("verb %s has no series in metrics.KubeletAPISuccess", v)
		}
	}
}
