package config

import "testing"

func TestParseHostAPIServer(t *testing.T) {
	for in, want := range map[string][2]string{
		"10.0.0.1:6443":           {"10.0.0.1", "6443"},
		"https://api.example:443": {"api.example", "443"},
		"[fd00::1]:6443":          {"fd00::1", "6443"},
	} {
		host, port, err := ParseHostAPIServer(in)
		if err != nil || host != want[0] || port != want[1] {
			t.Errorf("ParseHostAPIServer(%q) = %q, %q, %v; want %v", in, host, port, err, want)
		}
	}
	for _, bad := range []string{"api.example", "http://api.example:80", "https://api.example:443/path", ":6443"} {
		if _, _, err := ParseHostAPIServer(bad); err == nil {
			t.Errorf("ParseHostAPIServer(%q) accepted", bad)
		}
	}
}
