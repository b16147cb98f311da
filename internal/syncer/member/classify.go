package member

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leafsync/leafsync/hysteresis"
)

// classifyAnswer classifies an HTTP answer of a member. fromAPIServer says
// that its body is a Kubernetes Status object (isAPIStatus), which a
// Kubernetes API server sends with every error. 2xx is no failure
// (failed=false); 5xx and 429 are server. Only the member's API server can
// say that leafsync is at fault: its 401/403 is auth, its other 4xx config
// (the request leafsync built is wrong for this server). Any other answer —
// a 3xx, or a 4xx that is not a Status (an HTML page, a load balancer's or
// proxy's own 404, an empty body) — is server: something other than the
// API server answers at its address (a front whose backend is gone, a
// captive portal), so it is outage evidence like a proxy's 502. It is
// server rather than network because the member's address did answer.
// leafsync follows no redirect: the member's credentials would go with it.
func classifyAnswer(code int, fromAPIServer bool) (class hysteresis.Class, failed bool) {
	switch {
	case code >= 200 && code < 300:
		return 0, false
	case code == http.StatusTooManyRequests || code >= 500:
		return hysteresis.ClassServer, true
	case fromAPIServer && (code == http.StatusUnauthorized || code == http.StatusForbidden):
		return hysteresis.ClassAuth, true
	case fromAPIServer && code >= 400:
		return hysteresis.ClassConfig, true
	default:
		return hysteresis.ClassServer, true
	}
}

// isAPIStatus reports whether body is a Kubernetes Status object (kind
// Status, apiVersion v1), the body of every error a Kubernetes API server
// answers.
func isAPIStatus(body []byte) bool {
	var tm metav1.TypeMeta
	return json.Unmarshal(body, &tm) == nil && tm.Kind == "Status" && tm.APIVersion == "v1"
}

// fromAPIServer reports whether a client-go error carries a Status the
// server sent: client-go marks an error it made up from another body (HTML,
// text, empty) with a cause of type UnexpectedServerResponse.
func fromAPIServer(status metav1.Status) bool {
	if status.Details == nil {
		return true
	}
	for _, c := range status.Details.Causes {
		if c.Type == metav1.CauseTypeUnexpectedServerResponse {
			return false
		}
	}
	return true
}

// Classify returns the failure class of an error from a call to a member:
// network (timeout, refused, reset, DNS, breaker open after network
// failures), server (5xx, 429, an answer that is not the API server's: see
// classifyAnswer), auth (the API server's 401/403, client certificate
// rejected in the TLS handshake), config (server certificate not trusted,
// bad URL, a server that does not speak TLS, the API server's other 4xx). Errors it does not recognise
// are network: an unknown failure is most likely the link, and treating it
// as such keeps the leaf's readiness decision with the hysteresis.
func Classify(err error) hysteresis.Class {
	if err == nil {
		return 0
	}
	var open *BreakerOpenError
	if errors.As(err, &open) {
		if open.Class != 0 {
			return open.Class
		}
		return hysteresis.ClassNetwork
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Code != 0 {
		if class, failed := classifyAnswer(int(status.Status().Code), fromAPIServer(status.Status())); failed {
			return class
		}
	}
	if isTLSConfigError(err) {
		return hysteresis.ClassConfig
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "remote error" && op.Err != nil {
		// A TLS alert from the server: either it refused leafsync's client
		// certificate (auth) or the TLS settings do not match (config).
		if isClientCertAlert(op.Err.Error()) {
			return hysteresis.ClassAuth
		}
		return hysteresis.ClassConfig
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		msg := urlErr.Err.Error()
		if strings.Contains(msg, "unsupported protocol scheme") || strings.Contains(msg, "no Host in request URL") ||
			strings.Contains(msg, "invalid URL") {
			return hysteresis.ClassConfig
		}
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return hysteresis.ClassNetwork
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return hysteresis.ClassNetwork
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return hysteresis.ClassNetwork
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return hysteresis.ClassNetwork
	}
	return hysteresis.ClassNetwork
}

// isTLSConfigError reports a server certificate leafsync cannot trust, or a
// server that does not speak TLS: nothing that waiting fixes.
func isTLSConfigError(err error) bool {
	var (
		unknownAuthority x509.UnknownAuthorityError
		invalid          x509.CertificateInvalidError
		hostname         x509.HostnameError
		verification     *tls.CertificateVerificationError
		record           tls.RecordHeaderError
		systemRoots      x509.SystemRootsError
		insecureAlg      x509.InsecureAlgorithmError
		constraint       x509.ConstraintViolationError
	)
	if errors.As(err, &unknownAuthority) || errors.As(err, &invalid) || errors.As(err, &hostname) ||
		errors.As(err, &verification) || errors.As(err, &record) || errors.As(err, &systemRoots) ||
		errors.As(err, &insecureAlg) || errors.As(err, &constraint) {
		return true
	}
	// http.Transport reports a plain-HTTP answer to a TLS handshake this way.
	return strings.Contains(err.Error(), "server gave HTTP response to HTTPS client")
}

// isClientCertAlert: the server refused leafsync's client certificate
// (the alert descriptions of crypto/tls).
func isClientCertAlert(alert string) bool {
	for _, d := range []string{"bad certificate", "unsupported certificate", "revoked certificate",
		"expired certificate", "unknown certificate", "certificate required"} {
		if strings.Contains(alert, d) {
			return true
		}
	}
	return false
}

// countsForBreaker reports whether a call outcome is a breaker failure:
// only network and server failures are. 4xx answers (the member is
// reachable) and TLS configuration errors (waiting will not help, and
// failing fast would hide the real error) are not.
func countsForBreaker(class hysteresis.Class) bool {
	return class == hysteresis.ClassNetwork || class == hysteresis.ClassServer
}
