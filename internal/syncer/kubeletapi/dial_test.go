package kubeletapi

import (
	"bufio"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/leafsync/leafsync/internal/syncer/clusters"
	"github.com/leafsync/leafsync/internal/syncer/member"
	"github.com/leafsync/leafsync/internal/syncer/registration"
)

// tunnelProxy is a proxy in a test that records the targets of the
// tunnels it opens.
type tunnelProxy struct {
	URL     string
	mu      sync.Mutex
	tunnels []string
}

func (p *tunnelProxy) opened(target string) {
	p.mu.Lock()
	p.tunnels = append(p.tunnels, target)
	p.mu.Unlock()
}

func (p *tunnelProxy) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.tunnels)
}

// splice copies both ways until one side ends.
func splice(a, b net.Conn) {
	go func() { _, _ = io.Copy(a, b); a.Close() }()
	_, _ = io.Copy(b, a)
	b.Close()
}

// newConnectProxy is an HTTP (or, overTLS, HTTPS) proxy that tunnels
// CONNECT requests.
func newConnectProxy(t *testing.T, overTLS bool) *tunnelProxy {
	p := &tunnelProxy{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
			return
		}
		p.opened(r.Host)
		upstream, err := net.Dial("tcp", r.Host)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		client, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			upstream.Close()
			return
		}
		_, _ = io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n")
		splice(client, upstream)
	}))
	if overTLS {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

// newSOCKS5Proxy is a SOCKS5 proxy (no authentication, CONNECT to an
// IPv4 address: what the test needs of RFC 1928).
func newSOCKS5Proxy(t *testing.T) *tunnelProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	p := &tunnelProxy{URL: "socks5://" + ln.Addr().String()}
	serve := func(c net.Conn) {
		defer c.Close()
		hello := make([]byte, 2)
		if _, err := io.ReadFull(c, hello); err != nil || hello[0] != 5 {
			return
		}
		if _, err := io.ReadFull(c, make([]byte, hello[1])); err != nil {
			return
		}
		_, _ = c.Write([]byte{5, 0}) // no authentication
		req := make([]byte, 10)      // ver, cmd, rsv, atyp=1, 4 bytes IPv4, 2 bytes port
		if _, err := io.ReadFull(c, req); err != nil || req[1] != 1 || req[3] != 1 {
			return
		}
		target := net.JoinHostPort(net.IP(req[4:8]).String(), strconv.Itoa(int(req[8])<<8|int(req[9])))
		p.opened(target)
		upstream, err := net.Dial("tcp", target)
		if err != nil {
			_, _ = c.Write([]byte{5, 5, 0, 1, 0, 0, 0, 0, 0, 0})
			return
		}
		_, _ = c.Write([]byte{5, 0, 0, 1, 0, 0, 0, 0, 0, 0})
		splice(c, upstream)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(c)
		}
	}()
	return p
}

// TestStreamsHonourProxyURL: with a proxy-url in the member's kubeconfig
// (rest.Config.Proxy), an exec (an upgrade) reaches the member through
// that proxy, as a log read does, with the member's credentials; through
// an http, https and socks5 proxy.
func TestStreamsHonourProxyURL(t *testing.T) {
	for _, kind := range []string{"http", "https", "socks5"} {
		t.Run(kind+" proxy", func(t *testing.T) {
			// (httptest's TLS servers share one certificate: the member's
			// CA trusts an https proxy too.)
			var p *tunnelProxy
			switch kind {
			case "socks5":
				p = newSOCKS5Proxy(t)
			default:
				p = newConnectProxy(t, kind == "https")
			}
			testStreamsThroughProxy(t, p)
		})
	}
}

func testStreamsThroughProxy(t *testing.T, proxySrv *tunnelProxy) {
	memberSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer token" {
			http.Error(w, "no credentials", http.StatusUnauthorized)
			return
		}
		if !strings.HasSuffix(r.URL.Path, "/exec") {
			_, _ = io.WriteString(w, "a log line")
			return
		}
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\nstream output")
	}))
	defer memberSrv.Close()
	proxyURL, _ := url.Parse(proxySrv.URL)
	memberHost := strings.TrimPrefix(memberSrv.URL, "https://")

	rt, err := member.New(member.Options{Cluster: "a", Logger: logr.Discard(), RESTConfig: &rest.Config{
		Host:            memberSrv.URL,
		BearerToken:     "token",
		TLSClientConfig: rest.TLSClientConfig{CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: memberSrv.Certificate().Raw})},
		Proxy:           http.ProxyURL(proxyURL), // what clientcmd makes of proxy-url
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Stop()
	s, err := New(Options{Host: fake.NewClientset(), Leaves: corelisters.NewNodeLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})),
		Members: fakeMembers{}, BindAddress: ":0", ConnectTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.memberProxy(clusters.Member{Spec: &registration.Spec{Cluster: "a"}, Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		verb := verbLogs
		if strings.HasPrefix(r.URL.Path, "/exec") {
			verb = verbExec
		}
		p.serve(&statusRecorder{ResponseWriter: w}, r, target{Verb: verb, Namespace: "ns", Pod: "p", Container: "c"}, nil)
	}))
	defer front.Close()

	resp, err := http.Get(front.URL + "/containerLogs/ns/p/c")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "a log line" {
		t.Fatalf("logs: %d %q", resp.StatusCode, body)
	}
	if n := proxySrv.count(); n != 1 {
		t.Fatalf("logs: %d tunnels through the proxy, want 1", n)
	}

	conn, err := net.Dial("tcp", strings.TrimPrefix(front.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = io.WriteString(conn, "POST /exec/ns/p/c?command=true HTTP/1.1\r\nHost: front\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n")
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second)) // liveness
	br := bufio.NewReader(conn)
	up, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if up.StatusCode != http.StatusSwitchingProtocols {
		b, _ := io.ReadAll(up.Body)
		t.Fatalf("exec: %d %s", up.StatusCode, b)
	}
	if rest, _ := io.ReadAll(br); string(rest) != "stream output" {
		t.Fatalf("exec stream: %q", rest)
	}
	proxySrv.mu.Lock()
	defer proxySrv.mu.Unlock()
	if len(proxySrv.tunnels) != 2 || proxySrv.tunnels[1] != memberHost {
		t.Errorf("tunnels through the proxy: %v; want the log read's and the exec's, both to %s", proxySrv.tunnels, memberHost)
	}
}

// TestStreamsOutlastRequestTimeout: once a request is proxied, the
// server's read and write timeouts no longer apply: a followed log and an
// exec stream that stay quiet for longer than them go on (the handler
// lifts the deadlines, as ServeHTTP does, before the stream is hijacked).
func TestStreamsOutlastRequestTimeout(t *testing.T) {
	t.Parallel() // real network deadlines: independent, each on its own listeners
	const timeout = 300 * time.Millisecond
	memberSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/exec") {
			_, _ = io.WriteString(w, "first line\n")
			w.(http.Flusher).Flush()
			time.Sleep(3 * timeout)
			_, _ = io.WriteString(w, "late line\n")
			return
		}
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n")
		time.Sleep(3 * timeout)
		_, _ = io.WriteString(conn, "late output")
	}))
	t.Cleanup(memberSrv.Close)
	rt, err := member.New(member.Options{Cluster: "a", Logger: logr.Discard(), RESTConfig: &rest.Config{
		Host:            memberSrv.URL,
		TLSClientConfig: rest.TLSClientConfig{CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: memberSrv.Certificate().Raw})},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Stop)
	s, err := New(Options{Host: fake.NewClientset(), Leaves: corelisters.NewNodeLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})),
		Members: fakeMembers{}, BindAddress: ":0", ConnectTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.memberProxy(clusters.Member{Spec: &registration.Spec{Cluster: "a"}, Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		if err := liftDeadlines(rec); err != nil {
			t.Errorf("lifting the deadlines: %v", err)
		}
		verb := verbLogs
		if strings.HasPrefix(r.URL.Path, "/exec") {
			verb = verbExec
		}
		p.serve(rec, r, target{Verb: verb, Namespace: "ns", Pod: "p", Container: "c"}, nil)
	}))
	front.Config.ReadTimeout, front.Config.WriteTimeout = timeout, timeout
	front.Start()
	t.Cleanup(front.Close)

	// The two streams wait out the timeout side by side.
	t.Run("followed log", func(t *testing.T) {
		t.Parallel()
		resp, err := http.Get(front.URL + "/containerLogs/ns/p/c?follow=true")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != "first line\nlate line\n" {
			t.Errorf("followed log: %q, %v; want both lines", body, err)
		}
	})
	t.Run("exec", func(t *testing.T) {
		t.Parallel()
		conn, err := net.Dial("tcp", strings.TrimPrefix(front.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_, _ = io.WriteString(conn, "POST /exec/ns/p/c?command=true HTTP/1.1\r\nHost: front\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n")
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second)) // liveness
		br := bufio.NewReader(conn)
		up, err := http.ReadResponse(br, nil)
		if err != nil || up.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("exec: %v, %v", up, err)
		}
		if rest, err := io.ReadAll(br); string(rest) != "late output" {
			t.Errorf("exec stream: %q, %v; want the output that came after the timeout", rest, err)
		}
	})
}
