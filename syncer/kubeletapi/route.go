package kubeletapi

import (
	"fmt"
	"net/url"
	"strings"
)

// Verb is a kubelet streaming endpoint leafsync serves.
type Verb string

// The kubelet endpoints a leaf answers, by the first segment of the path.
const (
	Logs        Verb = "containerLogs"
	Exec        Verb = "exec"
	Attach      Verb = "attach"
	PortForward Verb = "portForward"
)

// Target is what a kubelet request asks for: a verb on one container (or,
// for port forwarding, one pod).
type Target struct {
	Verb      Verb
	Namespace string
	Pod       string
	// UID is the pod UID when the path carries one (exec, attach and
	// portForward accept /{ns}/{pod}/{uid}/...); empty otherwise.
	UID       string
	Container string
}

// ParsePath reads a kubelet API path:
//
//	/containerLogs/{ns}/{pod}/{container}
//	/exec/{ns}/{pod}[/{uid}]/{container}
//	/attach/{ns}/{pod}[/{uid}]/{container}
//	/portForward/{ns}/{pod}[/{uid}]
func ParsePath(path string) (Target, error) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if len(parts) < 3 {
		return Target{}, fmt.Errorf("unsupported path %q", path)
	}
	for _, p := range parts {
		if p == "" || p == "." || p == ".." {
			return Target{}, fmt.Errorf("malformed path %q", path)
		}
	}
	t := Target{Verb: Verb(parts[0]), Namespace: parts[1], Pod: parts[2]}
	rest := parts[3:]
	switch t.Verb {
	case Logs:
		if len(rest) != 1 {
			return Target{}, fmt.Errorf("%s wants /%s/{namespace}/{pod}/{container}, got %q", t.Verb, t.Verb, path)
		}
		t.Container = rest[0]
	case Exec, Attach:
		switch len(rest) {
		case 1:
			t.Container = rest[0]
		case 2:
			t.UID, t.Container = rest[0], rest[1]
		default:
			return Target{}, fmt.Errorf("%s wants /%s/{namespace}/{pod}[/{uid}]/{container}, got %q", t.Verb, t.Verb, path)
		}
	case PortForward:
		switch len(rest) {
		case 0:
		case 1:
			t.UID = rest[0]
		default:
			return Target{}, fmt.Errorf("%s wants /%s/{namespace}/{pod}[/{uid}], got %q", t.Verb, t.Verb, path)
		}
	default:
		return Target{}, fmt.Errorf("unsupported path %q", path)
	}
	return t, nil
}

// Streaming reports whether the verb upgrades the connection (SPDY or
// WebSocket) rather than answering with a plain HTTP body.
func (t Target) Streaming() bool { return t.Verb != Logs }

// logParams are the containerLogs parameters the kubelet and the API
// server's pods/log share (PodLogOptions). insecureSkipTLSVerifyBackend is
// not passed on: the member's API server decides how it reaches its kubelet.
var logParams = []string{"follow", "previous", "timestamps", "sinceSeconds", "sinceTime", "tailLines", "limitBytes", "stream"}

// MemberRequest maps a kubelet request to the member API server's pod
// subresource: the path under the API server's base URL and its query.
// The kubelet's stream flags (input, output, error, tty = "1") become the
// API's PodExecOptions/PodAttachOptions (stdin, stdout, stderr, tty =
// "true"); port forwarding's "port" becomes "ports". Anything else in the
// query is dropped.
func MemberRequest(t Target, q url.Values) (path string, query url.Values) {
	sub := map[Verb]string{Logs: "log", Exec: "exec", Attach: "attach", PortForward: "portforward"}[t.Verb]
	path = "/api/v1/namespaces/" + url.PathEscape(t.Namespace) + "/pods/" + url.PathEscape(t.Pod) + "/" + sub
	query = url.Values{}
	if t.Container != "" {
		query.Set("container", t.Container)
	}
	switch t.Verb {
	case Logs:
		for _, k := range logParams {
			if vs, ok := q[k]; ok {
				query[k] = vs
			}
		}
	case Exec, Attach:
		for kubelet, api := range map[string]string{"input": "stdin", "output": "stdout", "error": "stderr", "tty": "tty"} {
			if truthy(q.Get(kubelet)) || truthy(q.Get(api)) {
				query.Set(api, "true")
			}
		}
		if t.Verb == Exec {
			if cmd, ok := q["command"]; ok {
				query["command"] = cmd
			}
		}
	case PortForward:
		for _, k := range []string{"port", "ports"} {
			for _, v := range q[k] {
				query.Add("ports", v)
			}
		}
	}
	return path, query
}

func truthy(v string) bool { return v == "1" || v == "true" }
