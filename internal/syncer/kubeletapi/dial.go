package kubeletapi

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"golang.org/x/net/proxy"
)

type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// viaProxy dials the member through the proxy that proxier names for it
// (the kubeconfig's proxy-url, or $HTTPS_PROXY and $NO_PROXY when it has
// none), as the member's transport does for log reads: an HTTP CONNECT
// tunnel through an http or https proxy, or SOCKS5. The upgrade handler
// (proxy.DialURL) only dials and then speaks TLS over what it got, so the
// tunnel is the dialer. tlsCfg is the member's, used towards an https
// proxy as net/http does.
func viaProxy(direct dialFunc, scheme string, proxier func(*http.Request) (*url.URL, error), tlsCfg *tls.Config) dialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		target := &http.Request{URL: &url.URL{Scheme: scheme, Host: addr}, Header: http.Header{}}
		proxyURL, err := proxier(target)
		if err != nil {
			return nil, fmt.Errorf("choosing a proxy for %s: %w", addr, err)
		}
		if proxyURL == nil {
			return direct(ctx, network, addr)
		}
		switch proxyURL.Scheme {
		case "http", "https", "":
			return connectTunnel(ctx, direct, proxyURL, tlsCfg, addr)
		case "socks5", "socks5h":
			var auth *proxy.Auth
			if u := proxyURL.User; u != nil {
				pass, _ := u.Password()
				auth = &proxy.Auth{User: u.Username(), Password: pass}
			}
			d, err := proxy.SOCKS5("tcp", hostPort(proxyURL), auth, contextDialer(direct))
			if err != nil {
				return nil, err
			}
			return d.(proxy.ContextDialer).DialContext(ctx, network, addr)
		}
		return nil, fmt.Errorf("proxy %s: scheme %q is not supported", proxyURL.Redacted(), proxyURL.Scheme)
	}
}

// connectTunnel opens an HTTP CONNECT tunnel to addr through the proxy,
// within ctx.
func connectTunnel(ctx context.Context, direct dialFunc, proxyURL *url.URL, tlsCfg *tls.Config, addr string) (net.Conn, error) {
	conn, err := direct(ctx, "tcp", hostPort(proxyURL))
	if err != nil {
		return nil, err
	}
	// ctx bounds the handshake and the proxy's answer too.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	fail := func(err error) (net.Conn, error) {
		stop()
		conn.Close()
		return nil, fmt.Errorf("proxy %s: %w", proxyURL.Redacted(), err)
	}
	if proxyURL.Scheme == "https" {
		cfg := &tls.Config{}
		if tlsCfg != nil {
			cfg = tlsCfg.Clone()
		}
		cfg.ServerName, cfg.NextProtos = proxyURL.Hostname(), nil
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			return fail(err)
		}
		conn = tc
	}
	req := &http.Request{Method: http.MethodConnect, URL: &url.URL{Opaque: addr}, Host: addr, Header: http.Header{}}
	if u := proxyURL.User; u != nil {
		pass, _ := u.Password()
		req.Header.Set("Proxy-Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(u.Username()+":"+pass)))
	}
	if err := req.Write(conn); err != nil {
		return fail(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return fail(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fail(fmt.Errorf("CONNECT %s: %s", addr, resp.Status))
	}
	if !stop() {
		return fail(ctx.Err())
	}
	if br.Buffered() > 0 { // the member spoke first: keep what was read
		return &bufferedConn{Conn: conn, r: br}, nil
	}
	return conn, nil
}

type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// hostPort is the proxy's address, with its scheme's default port.
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	port := map[string]string{"https": "443", "socks5": "1080", "socks5h": "1080"}[u.Scheme]
	if port == "" {
		port = "80"
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// contextDialer adapts a dialFunc to golang.org/x/net/proxy.
type contextDialer dialFunc

func (d contextDialer) Dial(network, addr string) (net.Conn, error) {
	return d(context.Background(), network, addr)
}

func (d contextDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return d(ctx, network, addr)
}
