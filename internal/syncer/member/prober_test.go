package member

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/leafsync/leafsync/hysteresis"
)

func probeOnce(t *testing.T, cfg *rest.Config, mutate func(*Options)) hysteresis.Observation {
	t.Helper()
	o := Options{Cluster: "east", RESTConfig: cfg, ProbeTimeout: 500 * time.Millisecond, Logger: logr.Discard()}
	if mutate != nil {
		mutate(&o)
	}
	rt, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Stop()
	return rt.Prober().Probe(context.Background())
}

func tlsConfigFor(srv *httptest.Server) *rest.Config {
	return &rest.Config{
		Host:            srv.URL,
		BearerToken:     "token",
		TLSClientConfig: rest.TLSClientConfig{CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})},
	}
}

// answerServer answers GET /readyz with code, content type and body, and
// checks that the probe carries the member's token.
func answerServer(t *testing.T, code int, contentType, body string) *httptest.Server {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		if got := r.Header.Get("Authorization"); got != "Bearer token" {
			t.Errorf("Authorization = %q", got)
		}
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		if code >= 300 && code < 400 {
			w.Header().Set("Location", "https://login.example/portal")
		}
		w.WriteHeader(code)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// apiStatus is the body a Kubernetes API server sends with an error.
func apiStatus(t *testing.T, code int32, reason metav1.StatusReason, message string) string {
	b, err := json.Marshal(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: metav1.StatusFailure, Message: message, Reason: reason, Code: code})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestProberClassification: only the member's API server can say "I am
// here" (200 "ok") or "leafsync is at fault" (a Kubernetes Status with
// 401/403/404). Anything else at its address — a load balancer's HTML
// 404, an empty 404, a proxy's 502 page, a redirect, a 200 that is not
// "ok" — is outage evidence (server), so a member whose API server is gone
// behind a front goes NotReady instead of staying cordoned and Ready.
func TestProberClassification(t *testing.T) {
	const html = "text/html; charset=utf-8"
	page := "<html><head><title>404 Not Found</title></head><body><center><h1>404 Not Found</h1></center><hr><center>nginx</center></body></html>"
	for _, tc := range []struct {
		name        string
		code        int
		contentType string
		body        string
		ok          bool
		class       hysteresis.Class
		detail      string // the detail names the answer
	}{
		{"ok", 200, "text/plain; charset=utf-8", "ok", true, 0, ""},
		{"ok with newline", 200, "text/plain", "ok\n", true, 0, ""},
		{"Status 401", 401, "application/json", apiStatus(t, 401, metav1.StatusReasonUnauthorized, "Unauthorized"), false, hysteresis.ClassAuth, "401 Unauthorized: Unauthorized"},
		{"Status 403", 403, "application/json", apiStatus(t, 403, metav1.StatusReasonForbidden, `forbidden: User "x" cannot get path "/readyz"`), false, hysteresis.ClassAuth, `cannot get path "/readyz"`},
		{"Status 404", 404, "application/json", apiStatus(t, 404, metav1.StatusReasonNotFound, "the server could not find the requested resource"), false, hysteresis.ClassConfig, "could not find the requested resource"},
		{"Status 500", 500, "application/json", apiStatus(t, 500, metav1.StatusReasonInternalError, "etcd down"), false, hysteresis.ClassServer, "etcd down"},
		{"text 503", 503, "text/plain", "[-]etcd failed: reason withheld", false, hysteresis.ClassServer, "etcd failed"},
		{"429", 429, "application/json", apiStatus(t, 429, metav1.StatusReasonTooManyRequests, "slow down"), false, hysteresis.ClassServer, "slow down"},
		{"HTML 404", 404, html, page, false, hysteresis.ClassServer, "not a Kubernetes API server (GET /readyz: 404 Not Found: <html>"},
		{"empty 404", 404, "", "", false, hysteresis.ClassServer, "404 Not Found, empty body"},
		{"text 404", 404, "text/plain; charset=utf-8", "404 page not found", false, hysteresis.ClassServer, "404 page not found"},
		{"HTML 401", 401, html, "<html><body>Sign in</body></html>", false, hysteresis.ClassServer, "Sign in"},
		{"HTML 403", 403, html, "<html><body>Access denied</body></html>", false, hysteresis.ClassServer, "Access denied"},
		{"JSON 404 not a Status", 404, "application/json", `{"error":"no route"}`, false, hysteresis.ClassServer, "no route"},
		{"HTML 502", 502, html, "<html><body>502 Bad Gateway</body></html>", false, hysteresis.ClassServer, "502 Bad Gateway"},
		{"302", 302, html, "", false, hysteresis.ClassServer, "302 Found to https://login.example/portal, not followed"},
		{"200 HTML", 200, html, "<html><body>Welcome to the guest network</body></html>", false, hysteresis.ClassServer, "200 OK: <html><body>Welcome"},
		{"200 empty", 200, "", "", false, hysteresis.ClassServer, "200 OK, empty body"},
		{"200 not ok", 200, "text/plain", "okay", false, hysteresis.ClassServer, "200 OK: okay"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := answerServer(t, tc.code, tc.contentType, tc.body)
			obs := probeOnce(t, tlsConfigFor(srv), nil)
			if obs.OK != tc.ok || obs.Class != tc.class {
				t.Fatalf("got ok=%v class=%v (%s), want ok=%v class=%v", obs.OK, obs.Class, obs.Detail, tc.ok, tc.class)
			}
			if obs.Time.IsZero() {
				t.Error("observation without time")
			}
			if !strings.Contains(obs.Detail, tc.detail) {
				t.Errorf("detail %q lacks %q", obs.Detail, tc.detail)
			}
		})
	}
}

// TestProberReadsABoundedBody: an endless answer is read only up to
// maxProbeBody, and the probe ends.
func TestProberReadsABoundedBody(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusNotFound)
		chunk := []byte(strings.Repeat("<p>lost</p>", 100))
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	obs := probeOnce(t, tlsConfigFor(srv), nil)
	if obs.OK || obs.Class != hysteresis.ClassServer || strings.Contains(obs.Detail, "no answer within") {
		t.Fatalf("got %+v, want a server failure read from the start of the answer", obs)
	}
}

func TestProberClosedPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	obs := probeOnce(t, &rest.Config{Host: "https://" + addr, BearerToken: "x"}, nil)
	if obs.OK || obs.Class != hysteresis.ClassNetwork {
		t.Fatalf("got %+v, want a network failure", obs)
	}
}

func TestProberUnknownCA(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	// No CA data: the test server's self-signed certificate is unknown.
	obs := probeOnce(t, &rest.Config{Host: srv.URL, BearerToken: "x"}, nil)
	if obs.OK || obs.Class != hysteresis.ClassConfig {
		t.Fatalf("got %+v, want a config failure", obs)
	}
	if !strings.Contains(obs.Detail, "certificate") {
		t.Errorf("detail %q does not mention the certificate", obs.Detail)
	}
}

func TestProberPlainHTTPServer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	obs := probeOnce(t, &rest.Config{Host: strings.Replace(srv.URL, "http://", "https://", 1), BearerToken: "x"}, nil)
	if obs.OK || obs.Class != hysteresis.ClassConfig {
		t.Fatalf("got %+v, want a config failure", obs)
	}
}

func TestProberClientCertRequired(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert}
	srv.StartTLS()
	defer srv.Close()
	obs := probeOnce(t, tlsConfigFor(srv), nil)
	if obs.OK || obs.Class != hysteresis.ClassAuth {
		t.Fatalf("got %+v, want an auth failure", obs)
	}
}

func TestProberTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	start := time.Now()
	obs := probeOnce(t, tlsConfigFor(srv), func(o *Options) { o.ProbeTimeout = 100 * time.Millisecond })
	if obs.OK || obs.Class != hysteresis.ClassNetwork {
		t.Fatalf("got %+v, want a network failure", obs)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("probe took %s despite a 100ms timeout", d)
	}
}

func TestProberDNS(t *testing.T) {
	obs := probeOnce(t, &rest.Config{Host: "https://leafsync-test.invalid:6443", BearerToken: "x"}, nil)
	if obs.OK || obs.Class != hysteresis.ClassNetwork {
		t.Fatalf("got %+v, want a network failure", obs)
	}
}

// The probe is the readiness signal: it has its own request path and never
// passes through the breaker, so calls the member refuses (a 500 from its
// admission on every pod create) cannot turn into failed probes, and a
// successful probe closes a breaker that the link opened.
func TestProberBypassesBreaker(t *testing.T) {
	var readyz, other atomic.Int64
	var otherCode atomic.Int32
	otherCode.Store(http.StatusServiceUnavailable)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			readyz.Add(1)
			_, _ = w.Write([]byte("ok"))
			return
		}
		other.Add(1)
		w.WriteHeader(int(otherCode.Load()))
	}))
	t.Cleanup(srv.Close)
	o := Options{Cluster: "east", RESTConfig: tlsConfigFor(srv), Logger: logr.Discard(),
		Breaker: BreakerSettings{ConsecutiveFailures: 2, OpenTimeout: time.Hour}}
	rt, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Stop()
	for i := 0; i < 2; i++ {
		_, _ = rt.Client().CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	}
	if rt.Breaker().State() != BreakerOpen {
		t.Fatalf("breaker %s after two 503s", rt.Breaker().State())
	}
	// Client calls fail fast, without a request.
	before := other.Load()
	_, err = rt.Client().CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	var open *BreakerOpenError
	if !errors.As(err, &open) || other.Load() != before {
		t.Fatalf("client call with the breaker open: err = %v, %d requests", err, other.Load()-before)
	}
	// The probe still reaches the member, succeeds, and closes the breaker.
	obs := rt.Prober().Probe(context.Background())
	if !obs.OK || readyz.Load() != 1 {
		t.Fatalf("probe with the breaker open: %+v (%d /readyz requests)", obs, readyz.Load())
	}
	if rt.Breaker().State() != BreakerClosed {
		t.Fatalf("breaker %s after a successful probe", rt.Breaker().State())
	}
	// A member that answers 500 to every other call keeps the breaker
	// closed and its probes OK.
	otherCode.Store(http.StatusInternalServerError)
	for i := 0; i < 10; i++ {
		_, _ = rt.Client().CoreV1().Pods("ns").Create(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}, metav1.CreateOptions{})
		if obs := rt.Prober().Probe(context.Background()); !obs.OK {
			t.Fatalf("probe %d after 500s on pod creates: %+v", i, obs)
		}
	}
	if rt.Breaker().State() != BreakerClosed {
		t.Errorf("breaker %s after 500s from the member", rt.Breaker().State())
	}
}

// TestProberRun: Run probes at once, then once per interval of its clock
// (never sooner), stamps outcomes with that clock, and returns when its
// context ends.
func TestProberRun(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) }))
	defer srv.Close()
	got := make(chan hysteresis.Observation, 10)
	clk := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	const interval = 10 * time.Second
	p := NewProber(ProberOptions{
		Cluster:  "east",
		Client:   srv.Client(),
		URL:      srv.URL + "/readyz",
		Timeout:  time.Second,
		Interval: interval,
		Observe:  func(o hysteresis.Observation) time.Duration { got <- o; return 0 },
		Clock:    clk,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	for i := 0; i < 3; i++ {
		select {
		case o := <-got:
			if !o.OK || !o.Time.Equal(clk.Now()) {
				t.Errorf("observation %d: %+v, want OK at %s", i, o, clk.Now())
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no observation %d", i)
		}
		waitForTimer(t, clk)
		stepNoSooner(t, clk, got, interval)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	if !p.Last().OK {
		t.Errorf("Last = %+v", p.Last())
	}
}

// TestProberTakesTheDecidedInterval: the interval Observe returns (the
// engine's decision) spaces the next probe; zero keeps the current one.
func TestProberTakesTheDecidedInterval(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) }))
	defer srv.Close()
	got := make(chan hysteresis.Observation, 10)
	clk := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	decided := []time.Duration{3 * time.Second, 0}
	p := NewProber(ProberOptions{
		Cluster: "east", Client: srv.Client(), URL: srv.URL + "/readyz", Timeout: time.Second,
		Interval: 10 * time.Second,
		Observe: func(o hysteresis.Observation) time.Duration {
			next := decided[0]
			if len(decided) > 1 {
				decided = decided[1:]
			}
			got <- o
			return next
		},
		Clock: clk,
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.Run(ctx)
	for i, want := range []time.Duration{3 * time.Second, 3 * time.Second} {
		select {
		case <-got:
		case <-time.After(10 * time.Second):
			t.Fatalf("no observation %d", i)
		}
		waitForTimer(t, clk)
		if p.Interval() != want {
			t.Errorf("after observation %d the interval is %s, want %s", i, p.Interval(), want)
		}
		stepNoSooner(t, clk, got, want)
	}
}

// stepNoSooner moves clk on by interval, and fails if a probe comes before
// the whole interval has passed.
func stepNoSooner(t *testing.T, clk *clocktesting.FakeClock, got <-chan hysteresis.Observation, interval time.Duration) {
	t.Helper()
	clk.Step(interval - time.Nanosecond)
	select {
	case o := <-got:
		t.Fatalf("a probe came before the interval (%s): %+v", interval, o)
	case <-time.After(50 * time.Millisecond):
	}
	clk.Step(time.Nanosecond)
}

// waitForTimer waits until a goroutine waits on clk.
func waitForTimer(t *testing.T, clk *clocktesting.FakeClock) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("Run does not wait on its clock")
		}
		time.Sleep(time.Millisecond)
	}
}
