package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/leafsync/leafsync/hysteresis"
)

// KubeletAPI configures the kubelet API leafsync serves for its leaves
// (kubectl logs, exec, attach, port-forward; docs/kubelet-api.md).
type KubeletAPI struct {
	// Enabled serves it and advertises it on every leaf.
	Enabled bool `json:"enabled"`
	// Port is where it listens (on every interface) and what the leaves
	// advertise as their kubelet port.
	Port int32 `json:"port"`
	// AdvertiseAddress is the IP the leaves advertise (InternalIP). Empty:
	// $POD_IP (the chart sets it from the downward API), so that the
	// leader advertises its own pod.
	AdvertiseAddress string `json:"advertiseAddress"`
	// CertFile and KeyFile are the serving certificate, reloaded when they
	// change (e.g. a cert-manager Certificate's Secret, mounted). Empty: a
	// self-signed certificate, made at every start.
	CertFile string `json:"certFile"`
	KeyFile  string `json:"keyFile"`
	// ConnectTimeout bounds reaching a member for one request: the dial, TLS
	// handshake and upgrade answer of a stream (exec, attach, port-forward),
	// and the member's first answer to a log read. A member that does not answer
	// within it gets a 502, instead of a request that hangs.
	ConnectTimeout hysteresis.Duration `json:"connectTimeout"`
	// HandshakeTimeout bounds a new connection's TLS handshake and the
	// headers of each request on it. A client that connects and says
	// nothing is disconnected after it.
	HandshakeTimeout hysteresis.Duration `json:"handshakeTimeout"`
	// RequestTimeout bounds reading a request and writing its answer, until
	// leafsync starts proxying it to the member: a request that has been
	// authenticated and authorised (a followed log, an exec, attach or
	// port-forward stream) then lasts as long as its user keeps it.
	RequestTimeout hysteresis.Duration `json:"requestTimeout"`
	// IdleTimeout closes a kept-alive connection with no request for that
	// long (the kubelet's 90s).
	IdleTimeout hysteresis.Duration `json:"idleTimeout"`
	// MaxUnauthenticatedConnections caps the connections open at once that
	// have not yet sent an authenticated request; beyond it, new
	// connections wait to be accepted. An authenticated connection (every
	// stream is one) no longer counts, so no number of idle strangers
	// starves the host API server's streams, nor leafsync of memory.
	MaxUnauthenticatedConnections int32 `json:"maxUnauthenticatedConnections"`
}

// defaultKubeletAPI is off, on the kubelet's port.
func defaultKubeletAPI() KubeletAPI {
	return KubeletAPI{
		Port:                          10250,
		ConnectTimeout:                hysteresis.Duration{Duration: 5 * time.Second},
		HandshakeTimeout:              hysteresis.Duration{Duration: 10 * time.Second},
		RequestTimeout:                hysteresis.Duration{Duration: time.Minute},
		IdleTimeout:                   hysteresis.Duration{Duration: 90 * time.Second},
		MaxUnauthenticatedConnections: 512,
	}
}

// Address is the advertised address: AdvertiseAddress or $POD_IP.
func (k KubeletAPI) Address() string {
	if k.AdvertiseAddress != "" {
		return k.AdvertiseAddress
	}
	return os.Getenv("POD_IP")
}

func (k KubeletAPI) validate() error {
	var errs []error
	if k.Port < 1 || k.Port > 65535 {
		errs = append(errs, fmt.Errorf("kubeletAPI.port (%d) must be between 1 and 65535", k.Port))
	}
	if k.AdvertiseAddress != "" && net.ParseIP(k.AdvertiseAddress) == nil {
		errs = append(errs, fmt.Errorf("kubeletAPI.advertiseAddress %q must be an IP address", k.AdvertiseAddress))
	}
	if k.Enabled && k.Address() == "" {
		errs = append(errs, errors.New("kubeletAPI.advertiseAddress is required when kubeletAPI is enabled and $POD_IP is not set"))
	}
	if (k.CertFile == "") != (k.KeyFile == "") {
		errs = append(errs, errors.New("kubeletAPI.certFile and kubeletAPI.keyFile go together"))
	}
	if k.ConnectTimeout.Duration <= 0 {
		errs = append(errs, fmt.Errorf("kubeletAPI.connectTimeout (%s) must be positive", k.ConnectTimeout))
	}
	for _, d := range []struct {
		name string
		d    hysteresis.Duration
	}{{"handshakeTimeout", k.HandshakeTimeout}, {"requestTimeout", k.RequestTimeout}, {"idleTimeout", k.IdleTimeout}} {
		if d.d.Duration <= 0 {
			errs = append(errs, fmt.Errorf("kubeletAPI.%s (%s) must be positive", d.name, d.d))
		}
	}
	if k.RequestTimeout.Duration > 0 && k.RequestTimeout.Duration < k.HandshakeTimeout.Duration {
		errs = append(errs, fmt.Errorf("kubeletAPI.requestTimeout (%s) must be at least handshakeTimeout (%s): it bounds the headers too", k.RequestTimeout, k.HandshakeTimeout))
	}
	if k.MaxUnauthenticatedConnections < 1 {
		errs = append(errs, fmt.Errorf("kubeletAPI.maxUnauthenticatedConnections (%d) must be at least 1", k.MaxUnauthenticatedConnections))
	}
	return errors.Join(errs...)
}
