package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leafsync/leafsync/internal/syncer/verify/canary"
)

type fakeResolver struct {
	addrs []string
	err   error
	asked []string
}

func (r *fakeResolver) LookupHost(_ context.Context, host string) ([]string, error) {
	r.asked = append(r.asked, host)
	return r.addrs, r.err
}

// apiServer answers /version like kube-apiserver: 200 to the pod's token,
// and anonStatus to a request without one.
func apiServer(t *testing.T, anonStatus int) *httptest.Server {
	s := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path != "/version":
			http.NotFound(w, r)
		case r.Header.Get("Authorization") == "Bearer pod-token" || anonStatus == http.StatusOK:
			_, _ = w.Write([]byte(`{"gitVersion":"v1.36.3"}`))
		default:
			w.WriteHeader(anonStatus)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// podFiles writes what the kubelet mounts: the token and CA (when token is
// set), resolv.conf and the termination log.
func podFiles(t *testing.T, s *httptest.Server, token, resolvConf string) (sa, resolv, termLog string) {
	dir := t.TempDir()
	sa = filepath.Join(dir, "sa")
	if err := os.MkdirAll(sa, 0o755); err != nil {
		t.Fatal(err)
	}
	if token != "" {
		ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
		if err := os.WriteFile(filepath.Join(sa, "ca.crt"), ca, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sa, "token"), []byte(token), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	resolv = filepath.Join(dir, "resolv.conf")
	termLog = filepath.Join(dir, "termination-log")
	for p, content := range map[string]string{resolv: resolvConf, termLog: ""} {
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return sa, resolv, termLog
}

const (
	clusterResolv = "search leafsync-system.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n"
	hostResolv    = "search example.internal\nnameserver 192.0.2.53\n"
)

func TestVerify(t *testing.T) {
	for _, tc := range []struct {
		name       string
		token      string
		anonStatus int
		resolv     string
		resolver   *fakeResolver
		passed     bool
		api, dns   string // outcome
		says       []string
	}{
		{name: "token and cluster DNS", token: "pod-token", resolv: clusterResolv, resolver: &fakeResolver{addrs: []string{"10.96.0.1"}},
			passed: true, api: canary.OutcomePassed, dns: canary.OutcomePassed, says: []string{"with the pod's ServiceAccount token", "v1.36.3", "10.96.0.1", "svc.cluster.local"}},
		{name: "anonymous refused is reachable; no cluster DNS skips", anonStatus: http.StatusUnauthorized, resolv: hostResolv, resolver: &fakeResolver{},
			passed: true, api: canary.OutcomePassed, dns: canary.OutcomeSkipped, says: []string{"anonymously", "401", "skipped: no cluster DNS"}},
		{name: "DNS fails", token: "pod-token", resolv: clusterResolv, resolver: &fakeResolver{err: errors.New("lookup kubernetes.default: i/o timeout")},
			api: canary.OutcomePassed, dns: canary.OutcomeFailed, says: []string{"i/o timeout"}},
		{name: "token refused", token: "stale-token", anonStatus: http.StatusUnauthorized, resolv: hostResolv, resolver: &fakeResolver{},
			api: canary.OutcomeFailed, dns: canary.OutcomeSkipped, says: []string{"401"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := apiServer(t, tc.anonStatus)
			sa, resolv, termLog := podFiles(t, s, tc.token, tc.resolv)
			env := verifyEnv{apiServer: strings.TrimPrefix(s.URL, "https://"), saDir: sa, resolvConf: resolv, resolver: tc.resolver, timeout: 5 * time.Second}
			var out bytes.Buffer
			err := runVerify(context.Background(), env, &out, termLog)
			if (err == nil) != tc.passed {
				t.Errorf("err %v, want passed %v (exit code)", err, tc.passed)
			}
			if strings.Count(out.String(), "\n") != 1 {
				t.Errorf("want one JSON line, got %q", out.String())
			}
			var rep canary.Report
			if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
				t.Fatal(err)
			}
			written, _ := os.ReadFile(termLog)
			if strings.TrimSpace(string(written)) != strings.TrimSpace(out.String()) {
				t.Errorf("termination log %q, want the printed line", written)
			}
			outcome := map[string]string{}
			for _, c := range rep.Checks {
				outcome[c.Name] = c.Outcome
			}
			if rep.Passed != tc.passed || outcome[canary.CheckAPI] != tc.api || outcome[canary.CheckDNS] != tc.dns {
				t.Errorf("report %s, want passed %v api %s dns %s", out.String(), tc.passed, tc.api, tc.dns)
			}
			for _, w := range tc.says {
				if !strings.Contains(out.String(), w) {
					t.Errorf("report %s does not say %q", out.String(), w)
				}
			}
			if tc.dns == canary.OutcomeSkipped && len(tc.resolver.asked) > 0 {
				t.Errorf("resolved %v without cluster DNS", tc.resolver.asked)
			}
		})
	}
}

// TestVerifyOutsideAPod: no kubernetes Service is a failed API check, and
// no termination log is created where the kubelet mounted none.
func TestVerifyOutsideAPod(t *testing.T) {
	dir := t.TempDir()
	termLog := filepath.Join(dir, "termination-log")
	var out bytes.Buffer
	err := runVerify(context.Background(), verifyEnv{saDir: dir, resolvConf: filepath.Join(dir, "missing"), resolver: &fakeResolver{}, timeout: time.Second}, &out, termLog)
	if !errors.Is(err, errVerifyFailed) || !strings.Contains(out.String(), "KUBERNETES_SERVICE_HOST") {
		t.Errorf("err %v, output %s", err, out.String())
	}
	if _, err := os.Stat(termLog); !os.IsNotExist(err) {
		t.Errorf("termination log created outside a pod: %v", err)
	}
}
