package kubeletapi

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/proxy"
)

// TestFirstAnswerTimeout: a member that does not answer fails the request
// after the timeout; one that answers may then stream for longer.
func TestFirstAnswerTimeout(t *testing.T) {
	t.Parallel() // real network deadlines: independent, each on its own listeners
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/silent" {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		time.Sleep(300 * time.Millisecond) // longer than the timeout, after the answer
		io.WriteString(w, "late line")
	}))
	defer srv.Close()
	defer close(release)
	rt := &firstAnswerTimeout{next: http.DefaultTransport, d: 100 * time.Millisecond}

	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/silent", nil)
	start := time.Now()
	if _, err := rt.RoundTrip(req); err == nil || !strings.Contains(err.Error(), "did not answer within 100ms") {
		t.Fatalf("silent member: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("silent member failed after %s", took)
	}

	req, _ = http.NewRequest(http.MethodGet, srv.URL+"/stream", nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(body) != "late line" {
		t.Fatalf("stream: %q, %v", body, err)
	}
}

// TestUpgradeAnswerDeadline: an exec whose member completes TLS and then
// says nothing fails with a 502 after the timeout; one whose member
// answers 101 in time may then be idle for longer than the timeout.
func TestUpgradeAnswerDeadline(t *testing.T) {
	t.Parallel() // real network deadlines: independent, each on its own listeners
	const timeout = 300 * time.Millisecond
	release := make(chan struct{})
	member := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		if strings.Contains(r.URL.Path, "/silent/") {
			<-release // accepted, TLS done, no answer
			return
		}
		io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n")
		time.Sleep(3 * timeout) // idle stream, longer than the timeout
		io.WriteString(conn, "late output")
	}))
	defer member.Close()
	base, _ := url.Parse(member.URL)
	tlsCfg := member.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	tlsCfg.NextProtos = []string{"http/1.1"}
	dialer := &net.Dialer{Timeout: timeout}
	p := &memberProxy{base: base, timeout: timeout, upgrade: proxy.NewUpgradeRequestRoundTripper(
		&http.Transport{DialContext: answerDeadline(dialer.DialContext, timeout), TLSClientConfig: tlsCfg}, proxy.MirrorRequest)}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pod := strings.TrimPrefix(r.URL.Path, "/")
		p.serve(&statusRecorder{ResponseWriter: w}, r, target{Verb: verbExec, Namespace: "ns", Pod: pod}, nil)
	}))
	defer front.Close()
	defer close(release) // first: front's handler may wait on the member
	// exec sends an upgrade request through serve and returns the answer's
	// status, its body or the stream that followed it, and how long the
	// answer took.
	exec := func(pod string) (int, string, time.Duration) {
		t.Helper()
		conn, err := net.Dial("tcp", strings.TrimPrefix(front.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		start := time.Now()
		io.WriteString(conn, "POST /"+pod+" HTTP/1.1\r\nHost: front\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n")
		_ = conn.SetReadDeadline(time.Now().Add(20 * timeout)) // liveness
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: no answer within %s: %v", pod, 20*timeout, err)
		}
		took := time.Since(start)
		if resp.StatusCode != http.StatusSwitchingProtocols {
			body, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(body), took
		}
		rest, _ := io.ReadAll(br)
		return resp.StatusCode, string(rest), took
	}

	code, body, took := exec("silent")
	if code != http.StatusBadGateway || !strings.Contains(body, "i/o timeout") {
		t.Fatalf("silent member: %d %q after %s, want 502 and the timeout", code, body, took)
	}
	t.Logf("silent member: %d after %s: %s", code, took.Round(time.Millisecond), strings.TrimSpace(body))
	if took < timeout {
		t.Errorf("silent member failed after %s, before the %s timeout", took, timeout)
	}
	code, rest, took := exec("idle")
	if code != http.StatusSwitchingProtocols || rest != "late output" {
		t.Fatalf("idle stream: %d after %s, then %q; want 101 and the late output", code, took, rest)
	}
}
