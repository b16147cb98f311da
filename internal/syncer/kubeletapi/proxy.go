package kubeletapi

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/proxy"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/rest"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/leafnode"
	"github.com/leafsync/leafsync/internal/syncer/clusters"
	"github.com/leafsync/leafsync/internal/syncer/member"
	"github.com/leafsync/leafsync/internal/syncer/metrics"
	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
)

// ServeHTTP authenticates, authorises, finds the member pod and proxies.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := h.s
	start := s.o.Clock.Now()
	rec := &statusRecorder{ResponseWriter: w}
	w = rec
	t, pathErr := parsePath(r.URL.Path)
	verbLabel := "unknown"
	if pathErr == nil {
		verbLabel = string(t.Verb)
	}
	defer func() { metrics.KubeletAPIRequestsVec.WithLabelValues(verbLabel, rec.answer()).Inc() }()
	resp, ok, err := h.authn.AuthenticateRequest(r)
	if err != nil || !ok {
		// One answer per connection to a stranger: it keeps no connection
		// open after it, nor a slot of the gate (authGate).
		w.Header().Set("Connection", "close")
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	authenticated(r.Context())
	if err := pathErr; err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	// As a kubelet: nodes/proxy on the node, "get" to read, "create" to
	// open a stream (whatever the method: WebSocket streams are GETs).
	verb := "create"
	if t.Verb == verbLogs {
		verb = "get"
	}
	// authorize answers 403 unless the user may proxy to node ("" is every
	// node), and says whether to go on.
	authorize := func(node string) bool {
		attrs := authorizer.AttributesRecord{
			User: resp.User, Verb: verb, Resource: "nodes", Subresource: "proxy",
			Name: node, ResourceRequest: true, Path: r.URL.Path,
		}
		decision, reason, err := h.authz.Authorize(r.Context(), attrs)
		if decision == authorizer.DecisionAllow {
			return true
		}
		msg := fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=nodes, subresource=proxy", resp.User.GetName(), verb)
		if node != "" {
			msg += ", name=" + node
		}
		msg += ")"
		if reason != "" {
			msg += ": " + reason
		}
		if err != nil {
			msg += ": " + err.Error()
		}
		http.Error(w, msg, http.StatusForbidden)
		return false
	}
	// notFound answers 404 to a user who may proxy to every node, 403 to
	// others: one address serves every leaf, so a user allowed on none of
	// them must not learn which pods exist or where they run.
	notFound := func(msg string) {
		if authorize("") {
			http.Error(w, msg, http.StatusNotFound)
		}
	}
	pod, err := s.o.Host.CoreV1().Pods(t.Namespace).Get(r.Context(), t.Pod, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		notFound(fmt.Sprintf("pod %s/%s not found", t.Namespace, t.Pod))
		return
	}
	if err != nil {
		http.Error(w, fmt.Sprintf("reading pod %s/%s in the host: %v", t.Namespace, t.Pod, err), http.StatusInternalServerError)
		return
	}
	var cluster string
	if pod.Spec.NodeName != "" {
		if leaf, err := s.o.Leaves.Get(pod.Spec.NodeName); err == nil {
			cluster = leaf.Labels[leafnode.LabelCluster]
		}
	}
	if cluster == "" {
		notFound(fmt.Sprintf("pod %s/%s is not on a leaf of leafsync", t.Namespace, t.Pod))
		return
	}
	if !authorize(pod.Spec.NodeName) {
		return
	}
	if t.UID != "" && t.UID != string(pod.UID) {
		http.Error(w, fmt.Sprintf("pod %s/%s has UID %s, not %s", t.Namespace, t.Pod, pod.UID, t.UID), http.StatusNotFound)
		return
	}
	if pod.Annotations[podmeta.AnnotationMemberUID] == "" {
		http.Error(w, fmt.Sprintf("pod %s/%s is not synced to member %s (yet)", t.Namespace, t.Pod, cluster), http.StatusNotFound)
		return
	}
	m, ok := s.o.Members.Member(cluster)
	if !ok || m.Runtime == nil {
		http.Error(w, fmt.Sprintf("member %s is not registered", cluster), http.StatusBadGateway)
		return
	}
	if msg := s.unreachable(cluster, m.Runtime); msg != "" {
		http.Error(w, msg, http.StatusBadGateway)
		return
	}
	mp, err := m.Runtime.PodLister().Pods(t.Namespace).Get(t.Pod)
	if err != nil || mp.Labels[podmeta.LabelHostUID] != string(pod.UID) {
		http.Error(w, fmt.Sprintf("pod %s/%s has no member pod of leafsync in %s", t.Namespace, t.Pod, cluster), http.StatusNotFound)
		return
	}
	p, err := s.memberProxy(m)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	// Authorised: the request is the user's now, and lasts as long as
	// they keep it (a followed log, a stream); only the member's side is
	// bounded (connectTimeout). Lifting the deadlines must come before a
	// hijack, which keeps them on the connection.
	if err := liftDeadlines(w); err != nil {
		http.Error(w, fmt.Sprintf("lifting the request timeout: %v", err), http.StatusInternalServerError)
		return
	}
	p.serve(rec, r, t, mp)
	s.log.V(1).Info("served", "verb", t.Verb, "pod", t.Namespace+"/"+t.Pod, "cluster", cluster, "user", resp.User.GetName(), "took", s.o.Clock.Since(start).String())
}

// liftDeadlines clears the connection's read and write deadlines (a
// writer without any, as in tests, has none to lift).
func liftDeadlines(w http.ResponseWriter) error {
	rc := http.NewResponseController(w)
	err := errors.Join(rc.SetReadDeadline(time.Time{}), rc.SetWriteDeadline(time.Time{}))
	if errors.Is(err, http.ErrNotSupported) {
		return nil
	}
	return err
}

// unreachable says why a request to the member would fail now, or "".
// The readiness decision and the member's breaker both fail a request at
// once, instead of letting it wait for a member that is known to be down.
func (s *Server) unreachable(cluster string, rt *member.Runtime) string {
	if st, ok := s.o.Members.Hysteresis(cluster); ok && st.State == hysteresis.NotReady {
		msg := fmt.Sprintf("member cluster %s is unreachable (%s since %s)", cluster, st.State, st.Since.UTC().Format(time.RFC3339))
		if st.Detail != "" {
			msg += ": " + st.Detail
		}
		return msg
	}
	if b := rt.Breaker(); b != nil && b.State() == member.BreakerOpen {
		return (&member.BreakerOpenError{Cluster: cluster, State: b.State()}).Error()
	}
	return ""
}

// memberProxy holds the transports to one member runtime.
type memberProxy struct {
	runtime *member.Runtime
	base    *url.URL
	// plain is the member's breaker-wrapped transport (logs).
	plain http.RoundTripper
	// upgrade dials the member and writes the member's credentials on an
	// upgrade request (exec, attach, portforward).
	upgrade proxy.UpgradeRequestRoundTripper
	timeout time.Duration
}

func (s *Server) memberProxy(m clusters.Member) (*memberProxy, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.proxy[m.Cluster()]; p != nil && p.runtime == m.Runtime {
		return p, nil
	}
	cfg := m.Runtime.RESTConfig()
	base, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("member %s: %w", m.Cluster(), err)
	}
	plain, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("member %s: transport: %w", m.Cluster(), err)
	}
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("member %s: TLS: %w", m.Cluster(), err)
	}
	if tlsCfg == nil {
		tlsCfg = &tls.Config{}
	}
	tlsCfg = tlsCfg.Clone()
	tlsCfg.NextProtos = []string{"http/1.1"} // upgrades need HTTP/1.1
	// The proxy the member's transport uses for log reads (client-go's
	// choice): the kubeconfig's proxy-url, or the environment's.
	proxier := cfg.Proxy
	if proxier == nil {
		proxier = utilnet.NewProxierWithNoProxyCIDR(http.ProxyFromEnvironment)
	}
	dialer := &net.Dialer{Timeout: s.o.ConnectTimeout, KeepAlive: 30 * time.Second}
	dial := viaProxy(dialer.DialContext, base.Scheme, proxier, tlsCfg)
	conn := &http.Transport{DialContext: answerDeadline(dial, s.o.ConnectTimeout), TLSClientConfig: tlsCfg, TLSHandshakeTimeout: s.o.ConnectTimeout}
	withAuth, err := rest.HTTPWrappersForConfig(cfg, proxy.MirrorRequest)
	if err != nil {
		return nil, fmt.Errorf("member %s: credentials: %w", m.Cluster(), err)
	}
	p := &memberProxy{runtime: m.Runtime, base: base, plain: &firstAnswerTimeout{next: plain, d: s.o.ConnectTimeout},
		upgrade: proxy.NewUpgradeRequestRoundTripper(conn, withAuth), timeout: s.o.ConnectTimeout}
	s.proxy[m.Cluster()] = p
	return p, nil
}

// serve proxies one request to the member pod's subresource.
func (p *memberProxy) serve(w *statusRecorder, r *http.Request, t target, mp *corev1.Pod) {
	path, query := memberRequest(t, r.URL.Query())
	loc := *p.base
	loc.Path = singleJoin(p.base.Path, path)
	loc.RawQuery = query.Encode()
	h := proxy.NewUpgradeAwareHandler(&loc, p.plain, false, t.Streaming(), responder{})
	h.UpgradeTransport = p.upgrade
	h.UseLocationHost = true
	h.RejectForwardingRedirects = true
	// The kubelet-facing request carries the host API server's
	// credentials; none of it goes to the member. (A plain request is
	// sent with its own query: it must be the member's.)
	ctx := r.Context()
	if t.Streaming() {
		// Bounds the dial and TLS handshake (proxy.DialURL uses the
		// request's context for both, and nothing after them).
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.timeout)
		defer cancel()
		// The member's answer is bounded by answerDeadline, lifted when
		// the handler hijacks the client's connection: it does so only
		// once the member has answered 101.
		held := &heldConn{}
		ctx = context.WithValue(ctx, heldConnKey{}, held)
		w.onHijack = held.liftDeadline
	}
	out := r.Clone(ctx)
	out.URL.Path, out.URL.RawQuery = loc.Path, loc.RawQuery
	out.Header.Del("Authorization")
	for k := range out.Header {
		if strings.HasPrefix(k, "Impersonate-") {
			out.Header.Del(k)
		}
	}
	if !t.Streaming() {
		out.Method = http.MethodGet
	}
	h.ServeHTTP(w, out)
}

// statusRecorder remembers how a request was answered, for the metric,
// and calls onHijack (when set) before it hands the client's connection
// over for a stream.
type statusRecorder struct {
	http.ResponseWriter
	code int
	// upgraded: the connection went to the member's answer (a stream).
	upgraded bool
	onHijack func()
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Flush passes a followed log's lines on as they come.
func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := r.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, fmt.Errorf("the connection cannot be hijacked for an upgrade")
	}
	r.upgraded = true
	if r.onHijack != nil {
		r.onHijack()
	}
	return hj.Hijack()
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *statusRecorder) answer() string {
	switch {
	case r.upgraded:
		return "upgraded"
	case r.code == 0:
		return strconv.Itoa(http.StatusOK)
	}
	return strconv.Itoa(r.code)
}

// answerDeadline wraps an upgrade dialer: the member must answer (the TLS
// handshake, then the upgrade's response) within d of the dial, so that a
// member that accepts connections and then says nothing fails the request
// instead of holding it for ever. serve lifts the deadline once the
// stream has begun: an idle exec or port-forward may last any time.
func answerDeadline(dial func(ctx context.Context, network, addr string) (net.Conn, error), d time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if err := c.SetReadDeadline(time.Now().Add(d)); err != nil {
			c.Close()
			return nil, err
		}
		if h, ok := ctx.Value(heldConnKey{}).(*heldConn); ok {
			h.set(c)
		}
		return c, nil
	}
}

type heldConnKey struct{}

// heldConn is the member connection of one upgrade request.
type heldConn struct {
	mu sync.Mutex
	c  net.Conn
}

func (h *heldConn) set(c net.Conn) {
	h.mu.Lock()
	h.c = c
	h.mu.Unlock()
}

func (h *heldConn) liftDeadline() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.c != nil {
		_ = h.c.SetReadDeadline(time.Time{})
	}
}

// firstAnswerTimeout fails a request whose response headers do not come
// within d; the body (a followed log) may then stream for as long as it
// lasts.
type firstAnswerTimeout struct {
	next http.RoundTripper
	d    time.Duration
}

func (f *firstAnswerTimeout) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	timer := time.AfterFunc(f.d, cancel)
	resp, err := f.next.RoundTrip(req.WithContext(ctx))
	if !timer.Stop() {
		if err == nil {
			resp.Body.Close()
		}
		cancel()
		return nil, fmt.Errorf("the member's API server did not answer within %s", f.d)
	}
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

func singleJoin(a, b string) string {
	for len(a) > 0 && a[len(a)-1] == '/' {
		a = a[:len(a)-1]
	}
	return a + b
}

// responder writes a proxy error as a plain message. Every "the member
// cannot be reached" answer is a 502: the host API server passes a 5xx
// kubelet answer's text on to the client (an error on the server
// ("...")), except for 503 and 504, which it replaces with a generic
// sentence.
type responder struct{}

func (responder) Error(w http.ResponseWriter, _ *http.Request, err error) {
	http.Error(w, "member cluster unreachable: "+err.Error(), http.StatusBadGateway)
}
