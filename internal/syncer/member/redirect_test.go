package member

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leafsync/leafsync/hysteresis"
)

// TestNoRedirectCarriesCredentials: a member whose API server redirects
// every request (/readyz, a LIST, the informers' LIST) to another server
// sends that server nothing: neither the prober nor the clients follow,
// so the member's token stays home. What redirects is not an API server
// (an API server does not redirect its own paths): the probe is outage
// evidence (server) that says why, and so is the LIST's error.
func TestNoRedirectCarriesCredentials(t *testing.T) {
	var mu sync.Mutex
	var leaked []string // what the other server received
	elsewhere := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		leaked = append(leaked, r.URL.Path+" Authorization="+r.Header.Get("Authorization"))
		mu.Unlock()
		_, _ = w.Write([]byte("ok"))
	}))
	defer elsewhere.Close()
	asked := map[string]bool{}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked[r.URL.Path] = true
		mu.Unlock()
		http.Redirect(w, r, elsewhere.URL+r.URL.Path, http.StatusFound)
	}))
	defer srv.Close()
	// httptest's TLS servers share one certificate: the member's CA trusts
	// the other server too, so only the redirect policy keeps the token.
	cfg := tlsConfigFor(srv)

	obs := probeOnce(t, cfg, nil)
	if obs.OK || obs.Class != hysteresis.ClassServer || !strings.Contains(obs.Detail, "302 Found to "+elsewhere.URL+"/readyz, not followed") {
		t.Errorf("probe of a redirecting /readyz: %+v; want a server failure naming the redirect", obs)
	} else {
		t.Logf("probe: %s", obs.Detail)
	}

	rt, err := New(Options{Cluster: "east", RESTConfig: cfg, Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Stop()
	_, err = rt.Client().CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
	if err == nil || Classify(err) != hysteresis.ClassServer {
		t.Errorf("LIST answered by a redirect: %v (class %v); want an error of class server", err, Classify(err))
	}
	// The informers LIST with a client of their own.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rt.Start(ctx)
	deadline := time.Now().Add(10 * time.Second) // liveness
	for {
		mu.Lock()
		both := asked["/api/v1/nodes"] && asked["/api/v1/pods"]
		mu.Unlock()
		if both {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the informers did not LIST within 10s: %v", asked)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	rt.Stop()

	mu.Lock()
	defer mu.Unlock()
	if len(leaked) > 0 {
		t.Errorf("the server a redirect pointed at received %d requests: %v", len(leaked), leaked)
	}
}
