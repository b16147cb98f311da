package config

import (
	"strings"
	"testing"
)

// TestKubeletAPIBoundsValidation: every connection bound must be set,
// and a request's bound covers its headers.
func TestKubeletAPIBoundsValidation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*KubeletAPI)
		want   []string
	}{
		{"no timeouts", func(k *KubeletAPI) {
			k.HandshakeTimeout.Duration, k.RequestTimeout.Duration, k.IdleTimeout.Duration = 0, 0, -1
		}, []string{"kubeletAPI.handshakeTimeout", "kubeletAPI.requestTimeout", "kubeletAPI.idleTimeout"}},
		{"request shorter than handshake", func(k *KubeletAPI) { k.RequestTimeout.Duration = k.HandshakeTimeout.Duration / 2 }, []string{"kubeletAPI.requestTimeout (5s) must be at least handshakeTimeout (10s)"}},
		{"no connections", func(k *KubeletAPI) { k.MaxUnauthenticatedConnections = 0 }, []string{"kubeletAPI.maxUnauthenticatedConnections (0)"}},
	} {
		k := defaultKubeletAPI()
		tc.mutate(&k)
		err := k.validate()
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v; want it to name %q", tc.name, err, w)
			}
		}
	}
	if err := defaultKubeletAPI().validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}
