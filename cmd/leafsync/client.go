package main

import (
	"net/http"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// newClient is a clientset that follows no redirect. client-go adds the
// credentials (a bearer token, a client certificate) to every request it
// sends, so a redirect followed would carry them to whatever server the
// redirect names; the syncer's member clients refuse redirects for the
// same reason (internal/syncer/member).
func newClient(cfg *rest.Config) (kubernetes.Interface, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return kubernetes.NewForConfigAndClient(cfg, hc)
}
