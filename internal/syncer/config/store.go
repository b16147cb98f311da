package config

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/leafsync/leafsync/hysteresis"
)

// Store backends.
const (
	StoreKube   = "kube"
	StoreEtcd   = "etcd"
	StoreMemory = "memory"
)

// StoreBackends are the accepted values of store.backend.
var StoreBackends = []string{StoreKube, StoreEtcd, StoreMemory}

// Store configures where leafsync keeps the state that must survive a
// restart or a change of leader (see docs/state-store.md).
type Store struct {
	// Backend is kube (default: ConfigMaps in leafsync's namespace of the
	// host), etcd (an etcd cluster of its own), or memory (nothing
	// survives a restart; for tests).
	Backend string `json:"backend"`
	// CheckpointInterval is the least time between two writes of a
	// member's readiness state while a failure or recovery is in progress.
	// A restart mid-outage loses at most this much of the outage clock
	// (plus the restart's own gap beyond 1.5×probeInterval).
	CheckpointInterval hysteresis.Duration `json:"checkpointInterval"`
	// RestoreTimeout is how long a new leader waits for an unavailable
	// store before starting members without their saved state.
	RestoreTimeout hysteresis.Duration `json:"restoreTimeout"`
	// CallTimeout bounds one read or write of the store.
	CallTimeout hysteresis.Duration `json:"callTimeout"`
	// Kube configures the kube backend.
	Kube KubeStore `json:"kube"`
	// Etcd configures the etcd backend.
	Etcd EtcdStore `json:"etcd"`
}

// KubeStore configures the kube backend.
type KubeStore struct {
	// Prefix of the ConfigMap names: <prefix><cluster>.
	Prefix string `json:"prefix"`
}

// EtcdStore configures the etcd backend.
type EtcdStore struct {
	// Endpoints are etcd client URLs (https://etcd-0:2379).
	Endpoints []string `json:"endpoints"`
	// Prefix of every key.
	Prefix string `json:"prefix"`
	// DialTimeout bounds connecting to etcd.
	DialTimeout hysteresis.Duration `json:"dialTimeout"`
	// CAFile verifies etcd's certificate; CertFile and KeyFile are the
	// client certificate. Paths inside leafsync's pod (a mounted Secret).
	CAFile   string `json:"caFile"`
	CertFile string `json:"certFile"`
	KeyFile  string `json:"keyFile"`
	// Username and Password (or PasswordFile, a mounted Secret) for
	// etcd's authentication.
	Username     string `json:"username"`
	Password     string `json:"password"`
	PasswordFile string `json:"passwordFile"`
}

// defaultStore is the store configuration when nothing is set.
func defaultStore() Store {
	return Store{
		Backend:            StoreKube,
		CheckpointInterval: hysteresis.Duration{Duration: 10 * time.Second},
		RestoreTimeout:     hysteresis.Duration{Duration: 10 * time.Second},
		CallTimeout:        hysteresis.Duration{Duration: 10 * time.Second},
		Kube:               KubeStore{Prefix: "leafsync-state-"},
		Etcd: EtcdStore{
			Prefix:      "/leafsync/",
			DialTimeout: hysteresis.Duration{Duration: 5 * time.Second},
		},
	}
}

func (s Store) validate() error {
	var errs []error
	if !contains(StoreBackends, s.Backend) {
		errs = append(errs, fmt.Errorf("store.backend %q must be one of %v", s.Backend, StoreBackends))
	}
	for name, d := range map[string]hysteresis.Duration{
		"store.checkpointInterval": s.CheckpointInterval, "store.restoreTimeout": s.RestoreTimeout,
		"store.callTimeout": s.CallTimeout,
	} {
		if d.Duration <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %s", name, d))
		}
	}
	switch s.Backend {
	case StoreKube:
		p := s.Kube.Prefix
		if msgs := validation.IsDNS1123Subdomain(p + strings.Repeat("a", validation.DNS1123LabelMaxLength)); p == "" || len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("store.kube.prefix %q must make valid ConfigMap names with any cluster name appended (lower-case letters, digits, '-' and '.', at most %d characters): %v",
				p, validation.DNS1123SubdomainMaxLength-validation.DNS1123LabelMaxLength, msgs))
		}
	case StoreEtcd:
		errs = append(errs, s.Etcd.validate())
	}
	return errors.Join(errs...)
}

func (e EtcdStore) validate() error {
	var errs []error
	if len(e.Endpoints) == 0 {
		errs = append(errs, errors.New("store.etcd.endpoints must list at least one etcd client URL when store.backend is etcd"))
	}
	tls := e.CAFile != "" || e.CertFile != ""
	for i, ep := range e.Endpoints {
		u, err := url.Parse(ep)
		switch {
		case err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https"):
			errs = append(errs, fmt.Errorf("store.etcd.endpoints[%d] %q must be a URL like https://etcd-0:2379", i, ep))
		case u.Scheme == "http" && tls:
			errs = append(errs, fmt.Errorf("store.etcd.endpoints[%d] %q is http:// but TLS files are set; use https://", i, ep))
		}
	}
	if e.Prefix == "" {
		errs = append(errs, errors.New("store.etcd.prefix must not be empty"))
	}
	if e.DialTimeout.Duration <= 0 {
		errs = append(errs, fmt.Errorf("store.etcd.dialTimeout must be positive, got %s", e.DialTimeout))
	}
	if (e.CertFile == "") != (e.KeyFile == "") {
		errs = append(errs, errors.New("store.etcd.certFile and store.etcd.keyFile must be set together"))
	}
	if e.Password != "" && e.PasswordFile != "" {
		errs = append(errs, errors.New("store.etcd.password and store.etcd.passwordFile are exclusive"))
	}
	if e.Username == "" && (e.Password != "" || e.PasswordFile != "") {
		errs = append(errs, errors.New("store.etcd.password needs store.etcd.username"))
	}
	if e.Username != "" && e.Password == "" && e.PasswordFile == "" {
		errs = append(errs, errors.New("store.etcd.username needs store.etcd.password or store.etcd.passwordFile"))
	}
	return errors.Join(errs...)
}
