//go:build e2e

package e2e

import (
	"context"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/leafsync/leafsync/test/harness"
)

// TestMemberRedirectCarriesNoToken: a registered member whose API server
// answers every request (its /readyz, the informers' LISTs) with a
// redirect to another server: leafsync follows none, so that server
// receives nothing. What redirects is not the member's API server, so the
// registration says the member is unreachable (outage evidence, not
// leafsync's configuration).
func TestMemberRedirectCarriesNoToken(t *testing.T) {
	var mu sync.Mutex
	var leaked []string
	asked := map[string]int{}
	elsewhere := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		leaked = append(leaked, r.URL.Path+" Authorization="+r.Header.Get("Authorization"))
		mu.Unlock()
		_, _ = w.Write([]byte("ok"))
	}))
	defer elsewhere.Close()
	redirecting := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked[r.URL.Path]++
		mu.Unlock()
		http.Redirect(w, r, elsewhere.URL+r.URL.Path, http.StatusFound)
	}))
	defer redirecting.Close()

	f := newFleet(t, harness.HostOptions{})
	// httptest's TLS servers share one certificate: the member's CA trusts
	// the other server too, so only the redirect policy keeps the token.
	kc, err := clientcmd.Write(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"m": {Server: redirecting.URL, CertificateAuthorityData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: redirecting.Certificate().Raw})}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"m": {Token: "member-token"}},
		Contexts:       map[string]*clientcmdapi.Context{"m": {Cluster: "m", AuthInfo: "m"}},
		CurrentContext: "m",
	})
	if err != nil {
		t.Fatal(err)
	}
	f.startLeafsync(t, "leafsync")
	const secret = "member-redirecting"
	if _, err := f.host.Client().CoreV1().Secrets(leafsyncNamespace).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secret, Namespace: leafsyncNamespace, Labels: map[string]string{labelCluster: "redirecting"}},
		Data:       map[string][]byte{"kubeconfig": kc},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Probes every second (testConfig): wait for a few of them.
	harness.Eventually(t, time.Minute, "leafsync probes the member", func() error {
		mu.Lock()
		defer mu.Unlock()
		if asked["/readyz"] < 5 {
			return fmt.Errorf("asked %v", asked)
		}
		return nil
	})
	mu.Lock()
	if len(leaked) > 0 {
		t.Errorf("the server the member's redirects pointed at received %d requests: %v", len(leaked), leaked)
	}
	mu.Unlock()
	// The redirect is not the API server's answer, of class server: the
	// registration says so.
	s := waitStatus(t, f, secret, "Unreachable", "MemberServerError", 30*time.Second)
	mu.Lock()
	defer mu.Unlock()
	t.Logf("the member was asked %v; registration status %s/%s: %s", asked, s.Annotations[annStatus], s.Annotations[annStatusReason], s.Annotations[annStatusMessage])
	if len(leaked) > 0 {
		t.Errorf("later, the other server received %d requests: %v", len(leaked), leaked)
	}
}
