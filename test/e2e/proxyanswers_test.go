//go:build e2e

package e2e

import (
	"context"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/leafnode"
	"github.com/leafsync/leafsync/internal/syncer/member"
	"github.com/leafsync/leafsync/test/harness"
)

// TestMemberBehindProxyAnswering404: a member registered through a load
// balancer (TLS of its own, forwarding to the member's API server) that
// answers 404 with an HTML page once the API server behind it is gone. Only
// the API server can say "leafsync is at fault", so the page is outage
// evidence: the leaf is cordoned as ServerFailure, never ConfigFailure or
// AuthFailure, and goes NotReady within the documented bound
// (notReadyAfter + 2×probeInterval + probeTimeout, plus the write path).
// (Before, any 404 was a config failure: cordoned, Ready for ever.) The
// real API server's own 401 is still an auth failure.
func TestMemberBehindProxyAnswering404(t *testing.T) {
	const (
		probeInterval = time.Second // testConfig
		probeTimeout  = time.Second
		notReadyAfter = 10 * time.Second
		leaf          = "leaf-member-a"
	)
	f := newFleet(t, harness.HostOptions{}, harness.MemberOptions{Name: "member-a", Nodes: 1})
	m := f.members["member-a"]

	// The real API server blames leafsync with a Kubernetes Status, which
	// the prober recognises: a token it did not issue is an auth failure.
	cfg := m.RESTConfig()
	cfg.CertData, cfg.KeyData, cfg.BearerToken = nil, nil, "bogus-token-that-no-member-issued"
	rt, err := member.New(member.Options{Cluster: "member-a", RESTConfig: cfg, ProbeTimeout: 5 * time.Second, Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	obs := rt.Prober().Probe(context.Background())
	rt.Stop()
	if obs.OK || obs.Class != hysteresis.ClassAuth {
		t.Errorf("probe of the member's API server with a token it did not issue: %+v, want an auth failure", obs)
	}

	// The load balancer authenticates to the member's API server (through
	// the member's fault proxy) as the member's admin, as an authenticating
	// front does; with no upstream it answers its own HTML 404.
	upstream, err := url.Parse("https://" + m.proxy.Addr())
	if err != nil {
		t.Fatal(err)
	}
	upCfg := m.RESTConfig()
	upCfg.Host = upstream.String()
	upTransport, err := rest.TransportFor(upCfg)
	if err != nil {
		t.Fatal(err)
	}
	const page = "<html><head><title>404 Not Found</title></head><body><center><h1>404 Not Found</h1></center><hr><center>nginx</center></body></html>\n"
	lb := httptest.NewTLSServer(&httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(upstream)
			r.Out.Header.Del("Authorization") // the front's own credentials go upstream
		},
		Transport:     upTransport,
		FlushInterval: -1, // watches
		ErrorLog:      log.New(io.Discard, "", 0),
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, page)
		},
	})
	defer lb.Close()
	kc, err := clientcmd.Write(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"m": {Server: lb.URL, CertificateAuthorityData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: lb.Certificate().Raw})}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"m": {Token: "token-for-the-front"}},
		Contexts:       map[string]*clientcmdapi.Context{"m": {Cluster: "m", AuthInfo: "m"}},
		CurrentContext: "m",
	})
	if err != nil {
		t.Fatal(err)
	}
	f.startLeafsync(t, "leafsync")
	if _, err := f.host.Client().CoreV1().Secrets(leafsyncNamespace).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "member-member-a", Namespace: leafsyncNamespace, Labels: map[string]string{labelCluster: "member-a"}},
		Data:       map[string][]byte{"kubeconfig": kc},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitLeafReady(t, leaf, time.Minute)
	rec := recordNode(t, f.host, leaf)

	// The API server behind the front is gone; the front answers 404.
	m.proxy.Cut()
	cut := time.Now()
	bound := notReadyAfter + 2*probeInterval + probeTimeout
	f.waitLeafNotReady(t, leaf, bound+writeSlack+30*time.Second)
	s := waitStatus(t, f, "member-member-a", "Unreachable", "MemberServerError", 10*time.Second)
	seen := rec.observations(t)
	took := firstNotReady(seen).Sub(cut)
	t.Logf("leaf NotReady %s after the API server behind the front went away (bound notReadyAfter %s + 2×probe interval %s + probe timeout %s = %s); registration: %s",
		took.Round(time.Millisecond), notReadyAfter, probeInterval, probeTimeout, bound, s.Annotations[annStatusMessage])
	if took < notReadyAfter {
		t.Errorf("NotReady %s after the cut, before notReadyAfter", took)
	}
	if took > bound+writeSlack {
		t.Errorf("NotReady %s after the cut, later than the bound %s (+%s to write)", took, bound, writeSlack)
	}
	serverCordon := false
	for _, o := range seen {
		for _, taint := range o.node.Spec.Taints {
			if taint.Key != leafnode.TaintUnreachable {
				continue
			}
			switch taint.Value {
			case hysteresis.ReasonConfigFailure, hysteresis.ReasonAuthFailure:
				t.Errorf("at %s the leaf was cordoned as %s: the front's 404 page blamed leafsync", o.at.Sub(cut).Round(time.Millisecond), taint.Value)
			case hysteresis.ReasonServerFailure:
				serverCordon = true
			}
		}
	}
	if !serverCordon {
		t.Errorf("no watched version of the leaf was cordoned as %s", hysteresis.ReasonServerFailure)
	}
}
