package member

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/leafsync/leafsync/hysteresis"
)

func TestClassify(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	for _, tc := range []struct {
		name string
		err  error
		want hysteresis.Class
	}{
		{"refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, hysteresis.ClassNetwork},
		{"reset", &url.Error{Op: "Get", URL: "https://x", Err: syscall.ECONNRESET}, hysteresis.ClassNetwork},
		{"dns", &net.DNSError{Err: "no such host", Name: "x", IsNotFound: true}, hysteresis.ClassNetwork},
		{"timeout", fmt.Errorf("wrapped: %w", context.DeadlineExceeded), hysteresis.ClassNetwork},
		{"eof", io.ErrUnexpectedEOF, hysteresis.ClassNetwork},
		{"unknown error", errors.New("something odd"), hysteresis.ClassNetwork},
		{"500", apierrors.NewInternalError(errors.New("x")), hysteresis.ClassServer},
		{"429", apierrors.NewTooManyRequests("x", 1), hysteresis.ClassServer},
		{"401", apierrors.NewUnauthorized("x"), hysteresis.ClassAuth},
		{"403", apierrors.NewForbidden(gr, "p", errors.New("x")), hysteresis.ClassAuth},
		{"404", apierrors.NewNotFound(gr, "p"), hysteresis.ClassConfig},
		// client-go makes these up from an answer that is not a Status
		// (HTML, text, empty): not the API server, so outage evidence.
		{"404 not a Status", apierrors.NewGenericServerResponse(404, "GET", gr, "", "<html>404</html>", 0, true), hysteresis.ClassServer},
		{"401 not a Status", apierrors.NewGenericServerResponse(401, "GET", gr, "", "", 0, true), hysteresis.ClassServer},
		{"403 not a Status", apierrors.NewGenericServerResponse(403, "GET", gr, "", "Access denied", 0, true), hysteresis.ClassServer},
		{"302", apierrors.NewGenericServerResponse(302, "GET", gr, "", "", 0, true), hysteresis.ClassServer},
		{"502 not a Status", apierrors.NewGenericServerResponse(502, "GET", gr, "", "<html>Bad Gateway</html>", 0, true), hysteresis.ClassServer},
		{"unknown CA", &url.Error{Op: "Get", URL: "https://x", Err: &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}}, hysteresis.ClassConfig},
		{"hostname", x509.HostnameError{Certificate: &x509.Certificate{}, Host: "x"}, hysteresis.ClassConfig},
		{"not TLS", tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, hysteresis.ClassConfig},
		{"client cert rejected", &net.OpError{Op: "remote error", Err: errors.New("tls: certificate required")}, hysteresis.ClassAuth},
		{"handshake failure", &net.OpError{Op: "remote error", Err: errors.New("tls: handshake failure")}, hysteresis.ClassConfig},
		{"bad scheme", &url.Error{Op: "Get", URL: "ftp://x", Err: errors.New(`unsupported protocol scheme "ftp"`)}, hysteresis.ClassConfig},
		{"breaker open (server)", &BreakerOpenError{Class: hysteresis.ClassServer}, hysteresis.ClassServer},
		{"breaker open", &BreakerOpenError{}, hysteresis.ClassNetwork},
	} {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("%s: Classify(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
	if Classify(nil) != 0 {
		t.Error("Classify(nil) != 0")
	}
}
