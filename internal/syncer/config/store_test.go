package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestStoreDefaults(t *testing.T) {
	s := Default().Store
	if s.Backend != StoreKube || s.Kube.Prefix != "leafsync-state-" || s.CheckpointInterval.Duration != 10*time.Second {
		t.Fatalf("defaults: %+v", s)
	}
	if err := Default().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestStoreValidationNamesBadFields(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Store)
		want   []string
	}{
		{"backend", func(s *Store) { s.Backend = "redis" }, []string{`store.backend "redis"`}},
		{"durations", func(s *Store) { s.CheckpointInterval.Duration = 0; s.CallTimeout.Duration = -1 }, []string{"store.checkpointInterval", "store.callTimeout"}},
		{"kube prefix", func(s *Store) { s.Kube.Prefix = "State_" }, []string{"store.kube.prefix"}},
		{"kube prefix too long", func(s *Store) { s.Kube.Prefix = strings.Repeat("a", 200) }, []string{"store.kube.prefix"}},
		{"etcd without endpoints", func(s *Store) { s.Backend = StoreEtcd }, []string{"store.etcd.endpoints"}},
		{"etcd endpoint", func(s *Store) {
			s.Backend, s.Etcd.Endpoints = StoreEtcd, []string{"https://etcd-0:2379", "etcd-1:2379"}
		}, []string{"store.etcd.endpoints[1]"}},
		{"etcd http with tls", func(s *Store) {
			s.Backend, s.Etcd.Endpoints, s.Etcd.CAFile = StoreEtcd, []string{"http://etcd-0:2379"}, "/ca.crt"
		}, []string{"store.etcd.endpoints[0]", "https://"}},
		{"etcd cert without key", func(s *Store) {
			s.Backend, s.Etcd.Endpoints, s.Etcd.CertFile = StoreEtcd, []string{"https://etcd-0:2379"}, "/tls.crt"
		}, []string{"store.etcd.certFile and store.etcd.keyFile"}},
		{"etcd auth", func(s *Store) {
			s.Backend, s.Etcd.Endpoints, s.Etcd.Username = StoreEtcd, []string{"https://etcd-0:2379"}, "leafsync"
		}, []string{"store.etcd.username needs"}},
		{"etcd password twice", func(s *Store) {
			s.Backend, s.Etcd.Endpoints = StoreEtcd, []string{"https://etcd-0:2379"}
			s.Etcd.Username, s.Etcd.Password, s.Etcd.PasswordFile = "u", "p", "/pw"
		}, []string{"exclusive"}},
		{"etcd prefix and dial timeout", func(s *Store) {
			s.Backend, s.Etcd.Endpoints, s.Etcd.Prefix, s.Etcd.DialTimeout.Duration = StoreEtcd, []string{"https://e:2379"}, "", 0
		}, []string{"store.etcd.prefix", "store.etcd.dialTimeout"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			tc.mutate(&c.Store)
			err := c.Validate()
			if err == nil {
				t.Fatal("valid")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestStoreFromFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	data := `
store:
  backend: etcd
  checkpointInterval: 5s
  etcd:
    endpoints: [https://etcd-0:2379, https://etcd-1:2379]
    caFile: /etc/leafsync/etcd/ca.crt
    certFile: /etc/leafsync/etcd/tls.crt
    keyFile: /etc/leafsync/etcd/tls.key
    username: leafsync
    passwordFile: /etc/leafsync/etcd/password
`
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	s := c.Store
	if s.Backend != StoreEtcd || len(s.Etcd.Endpoints) != 2 || s.CheckpointInterval.Duration != 5*time.Second ||
		s.Etcd.Prefix != "/leafsync/" || s.Etcd.DialTimeout.Duration != 5*time.Second || s.Kube.Prefix != "leafsync-state-" {
		t.Fatalf("loaded %+v", s)
	}
}
