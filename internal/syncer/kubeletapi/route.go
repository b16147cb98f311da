package kubeletapi

import (
	"fmt"
	"net/url"
	"strings"
)

// kubeletVerb is a kubelet streaming endpoint leafsync serves.
type kubeletVerb string

// The kubelet endpoints a leaf answers, by the first segment of the path.
const (
	verbLogs        kubeletVerb = "containerLogs"
	verbExec        kubeletVerb = "exec"
	verbAttach      kubeletVerb = "attach"
	verbPortForward kubeletVerb = "portForward"
)

// target is what a kubelet request asks for: a verb on one container (or,
// for port forwarding, one pod).
type target struct {
	Verb      kubeletVerb
	Namespace string
	Pod       string
	// UID is the pod UID when the path carries one (exec, attach and
	// portForward accept /{ns}/{pod}/{uid}/...); empty otherwise.
	UID       string
	Container string
}

// parsePath reads a kubelet API path:
//
//	/containerLogs/{ns}/{pod}/{container}
//	/exec/{ns}/{pod}[/{uid}]/{container}
//	/attach/{ns}/{pod}[/{uid}]/{container}
//	/portForward/{ns}/{pod}[/{uid}]
func parsePath(path string) (target, error) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if len(parts) < 3 {
		return target{}, fmt.Errorf("unsupported path %q", path)
	}
	for _, p := range parts {
		if p == "" || p == "." || p == ".." {
			return target{}, fmt.Errorf("malformed path %q", path)
		}
	}
	t := target{Verb: kubeletVerb(parts[0]), Namespace: parts[1], Pod: parts[2]}
	rest := parts[3:]
	switch t.Verb {
	case verbLogs:
		if len(rest) != 1 {
			return target{}, fmt.Errorf("%s wants /%s/{namespace}/{pod}/{container}, got %q", t.Verb, t.Verb, path)
		}
		t.Container = rest[0]
	case verbExec, verbAttach:
		switch len(rest) {
		case 1:
			t.Container = rest[0]
		case 2:
			t.UID, t.Container = rest[0], rest[1]
		default:
			return target{}, fmt.Errorf("%s wants /%s/{namespace}/{pod}[/{uid}]/{container}, got %q", t.Verb, t.Verb, path)
		}
	case verbPortForward:
		switch len(rest) {
		case 0:
		case 1:
			t.UID = rest[0]
		default:
			return target{}, fmt.Errorf("%s wants /%s/{namespace}/{pod}[/{uid}], got %q", t.Verb, t.Verb, path)
		}
	default:
		return target{}, fmt.Errorf("unsupported path %q", path)
	}
	return t, nil
}

// Streaming reports whether the verb upgrades the connection (SPDY or
// WebSocket) rather than answering with a plain HTTP body.
func (t target) Streaming() bool { return t.Verb != verbLogs }

// logParams are the containerLogs parameters the kubelet and the API
// server's pods/log share (PodLogOptions). insecureSkipTLSVerifyBackend is
// not passed on: the member's API server decides how it reaches its kubelet.
var logParams = []string{"follow", "previous", "timestamps", "sinceSeconds", "sinceTime", "tailLines", "limitBytes", "stream"}

// memberRequest maps a kubelet request to the member API server's pod
// subresource: the path under the API server's base URL and its query.
// The kubelet's stream flags (input, output, error, tty = "1") become the
// API's PodExecOptions/PodAttachOptions (stdin, stdout, stderr, tty =
// "true"); port forwarding's "port" becomes "ports". Anything else in the
// query is dropped.
func memberRequest(t target, q url.Values) (path string, query url.Values) {
	sub := map[kubeletVerb]string{verbLogs: "log", verbExec: "exec", verbAttach: "attach", verbPortForward: "portforward"}[t.Verb]
	path = "/api/v1/namespaces/" + url.PathEscape(t.Namespace) + "/pods/" + url.PathEscape(t.Pod) + "/" + sub
	query = url.Values{}
	if t.Container != "" {
		query.Set("container", t.Container)
	}
	switch t.Verb {
	case verbLogs:
		for _, k := range logParams {
			if vs, ok := q[k]; ok {
				query[k] = vs
			}
		}
	case verbExec, verbAttach:
		for kubelet, api := range map[string]string{"input": "stdin", "output": "stdout", "error": "stderr", "tty": "tty"} {
			if truthy(q.Get(kubelet)) || truthy(q.Get(api)) {
				query.Set(api, "true")
			}
		}
		if t.Verb == verbExec {
			if cmd, ok := q["command"]; ok {
				query["command"] = cmd
			}
		}
	case verbPortForward:
		for _, k := range []string{"port", "ports"} {
			for _, v := range q[k] {
				query.Add("ports", v)
			}
		}
	}
	return path, query
}

func truthy(v string) bool { return v == "1" || v == "true" }
