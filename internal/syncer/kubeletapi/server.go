package kubeletapi

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/utils/clock"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/syncer/clusters"
)

// Where a kubelet, and so leafsync, finds the host's client CA: the
// ConfigMap every API server publishes for delegated authentication.
const (
	authNamespace = "kube-system"
	authConfigMap = "extension-apiserver-authentication"
	clientCAKey   = "client-ca-file"
)

// Members is what the server needs of the registry: a member's runtime
// and its readiness decision. *clusters.Registry implements it.
type Members interface {
	Member(cluster string) (clusters.Member, bool)
	Hysteresis(cluster string) (hysteresis.Status, bool)
}

var _ Members = (*clusters.Registry)(nil)

// Options configure the server.
type Options struct {
	// Host is a host client: host pods, the client CA ConfigMap,
	// TokenReviews and SubjectAccessReviews.
	Host kubernetes.Interface
	// Leaves lists the host's leaf Nodes (label leafsync.io/cluster).
	Leaves corelisters.NodeLister
	// Members finds a leaf's member.
	Members Members
	// BindAddress is where the HTTPS server listens (":10250").
	BindAddress string
	// CertFile and KeyFile are the serving certificate, reloaded when the
	// files change (a cert-manager Certificate's Secret, mounted). Empty:
	// a self-signed certificate for Hosts, made at start.
	CertFile, KeyFile string
	// Hosts are the names and IPs of a self-signed certificate.
	Hosts []string
	// ConnectTimeout bounds reaching a member: a stream's dial, TLS
	// handshake and the member's answer to the upgrade, a log read's first
	// answer (config.KubeletAPI).
	ConnectTimeout time.Duration
	// HandshakeTimeout bounds a connection's TLS handshake and each
	// request's headers; RequestTimeout a request's reading and its
	// answer's writing until it is proxied (config.KubeletAPI); IdleTimeout
	// a kept-alive connection without a request.
	HandshakeTimeout, RequestTimeout, IdleTimeout time.Duration
	// MaxUnauthenticatedConnections caps the connections open at once
	// that have not sent an authenticated request yet.
	MaxUnauthenticatedConnections int
	Logger                        logr.Logger
	// Clock times the requests for the log (real when nil).
	Clock clock.PassiveClock
	// Sharded: members are sharded across replicas, and every replica
	// serves the leaves of the members it acts on (they advertise it).
	Sharded bool
}

// Server is leafsync's kubelet API for its leaves. It runs only on the
// leader: its address is the one the leader advertises on the leaves.
type Server struct {
	o     Options
	log   logr.Logger
	mu    sync.Mutex
	proxy map[string]*memberProxy // by cluster
}

// New checks the options; Start serves.
func New(o Options) (*Server, error) {
	if o.Host == nil || o.Leaves == nil || o.Members == nil || o.BindAddress == "" {
		return nil, errors.New("kubeletapi: Host, Leaves, Members and BindAddress are required")
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		return nil, errors.New("kubeletapi: certFile and keyFile go together")
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 5 * time.Second
	}
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = 10 * time.Second
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = time.Minute
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 90 * time.Second
	}
	if o.MaxUnauthenticatedConnections <= 0 {
		o.MaxUnauthenticatedConnections = 512
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return &Server{o: o, log: o.Logger.WithName("kubeletapi"), proxy: map[string]*memberProxy{}}, nil
}

// NeedLeaderElection: only the leader serves (manager.LeaderElectionRunnable);
// sharded, every replica does.
func (s *Server) NeedLeaderElection() bool { return !s.o.Sharded }

// Start serves until ctx ends (manager.Runnable).
func (s *Server) Start(ctx context.Context) error {
	clientCA, err := dynamiccertificates.NewDynamicCAFromConfigMapController("client-ca", authNamespace, authConfigMap, clientCAKey, s.o.Host)
	if err != nil {
		return fmt.Errorf("kubeletapi: client CA: %w", err)
	}
	if err := clientCA.RunOnce(ctx); err != nil {
		return fmt.Errorf("kubeletapi: reading %s/%s: %w", authNamespace, authConfigMap, err)
	}
	go clientCA.Run(ctx, 1)

	serving, err := s.servingCert(ctx)
	if err != nil {
		return err
	}
	backoff := wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
	authn, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		TokenAccessReviewClient:            s.o.Host.AuthenticationV1(),
		TokenAccessReviewTimeout:           10 * time.Second,
		WebhookRetryBackoff:                &backoff,
		CacheTTL:                           2 * time.Minute,
		ClientCertificateCAContentProvider: clientCA,
	}.New()
	if err != nil {
		return fmt.Errorf("kubeletapi: authenticator: %w", err)
	}
	// The kubelet's defaults (--authorization-webhook-cache-*-ttl).
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: s.o.Host.AuthorizationV1(),
		AllowCacheTTL:             5 * time.Minute,
		DenyCacheTTL:              30 * time.Second,
		WebhookRetryBackoff:       &backoff,
	}.New()
	if err != nil {
		return fmt.Errorf("kubeletapi: authorizer: %w", err)
	}

	tlsCtl := dynamiccertificates.NewDynamicServingCertificateController(
		&tls.Config{MinVersion: tls.VersionTLS12, ClientAuth: tls.RequestClientCert, NextProtos: []string{"http/1.1"}},
		clientCA, serving, nil, nil)
	clientCA.AddListener(tlsCtl)
	if l, ok := serving.(interface {
		AddListener(dynamiccertificates.Listener)
	}); ok {
		l.AddListener(tlsCtl)
	}
	if err := tlsCtl.RunOnce(); err != nil {
		return fmt.Errorf("kubeletapi: TLS: %w", err)
	}
	go tlsCtl.Run(1, ctx.Done())

	// Every connection is bounded until it is proxied: net/http gives the
	// TLS handshake the shortest of these timeouts (HandshakeTimeout),
	// then each request's headers HandshakeTimeout and the whole exchange
	// RequestTimeout; the handler lifts the read and write deadlines only
	// once a request is authorised and proxied (a stream lasts as long as
	// its user keeps it).
	srv := &http.Server{
		Addr:              s.o.BindAddress,
		Handler:           &handler{s: s, authn: authn, authz: authz},
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, GetConfigForClient: tlsCtl.GetConfigForClient},
		ReadHeaderTimeout: s.o.HandshakeTimeout,
		ReadTimeout:       s.o.RequestTimeout,
		WriteTimeout:      s.o.RequestTimeout,
		IdleTimeout:       s.o.IdleTimeout,
		ConnContext:       withConn,
		ErrorLog:          log.New(serverLog{s.log}, "", 0),
	}
	tcp, err := net.Listen("tcp", s.o.BindAddress)
	if err != nil {
		return fmt.Errorf("kubeletapi: listen: %w", err)
	}
	ln := newAuthGate(tcp, s.o.MaxUnauthenticatedConnections)
	s.log.Info("serving the kubelet API of the leaves", "address", ln.Addr().String(),
		"maxUnauthenticatedConnections", s.o.MaxUnauthenticatedConnections)
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTLS(ln, "", "") }()
	select {
	case err := <-errc:
		return fmt.Errorf("kubeletapi: %w", err)
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		return nil
	}
}

// servingCert is the configured certificate files (watched and reloaded),
// or a self-signed certificate made now.
func (s *Server) servingCert(ctx context.Context) (dynamiccertificates.CertKeyContentProvider, error) {
	if s.o.CertFile != "" {
		c, err := dynamiccertificates.NewDynamicServingContentFromFiles("serving-cert", s.o.CertFile, s.o.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("kubeletapi: serving certificate: %w", err)
		}
		go c.Run(ctx, 1)
		return c, nil
	}
	host, alt := "leafsync", []string{}
	var ips []net.IP
	for _, h := range s.o.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			ips = append(ips, ip)
		} else if h != "" {
			alt = append(alt, h)
		}
	}
	cert, key, err := certutil.GenerateSelfSignedCertKey(host, ips, alt)
	if err != nil {
		return nil, fmt.Errorf("kubeletapi: self-signed certificate: %w", err)
	}
	return dynamiccertificates.NewStaticCertKeyContent("self-signed", cert, key)
}

type handler struct {
	s     *Server
	authn authenticator.Request
	authz authorizer.Authorizer
}

// serverLog takes net/http's error lines into leafsync's log, at debug
// level. A failed TLS handshake, which every stranger that connects and
// says nothing ends in, is below even that: thousands of them must not
// become thousands of log lines.
type serverLog struct{ log logr.Logger }

func (l serverLog) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	v := 1
	if strings.Contains(msg, "TLS handshake error") {
		v = 2
	}
	l.log.V(v).Info("http server", "error", msg)
	return len(p), nil
}
