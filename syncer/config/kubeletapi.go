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
}

// DefaultKubeletAPI is off, on the kubelet's port.
func DefaultKubeletAPI() KubeletAPI {
	return KubeletAPI{Port: 10250, ConnectTimeout: hysteresis.Duration{Duration: 5 * time.Second}}
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
	return errors.Join(errs...)
}
