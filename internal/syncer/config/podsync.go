package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/leafsync/leafsync/hysteresis"
)

// PodSync configures the sync of pods bound to leaves and the guard on
// their deletion (docs/pod-sync.md).
type PodSync struct {
	// StaleEvictionPolicy is what happens to a member pod whose host pod
	// was evicted (taint manager, pod GC) by a cause that no longer holds:
	// DeferUntilReplaced (keep it until the host's replacement is Ready,
	// at most maxDeferral), Retain (keep it, report it as an orphan) or
	// Forward (delete it, the naive behaviour). Per member, the
	// registration annotation leafsync.io/stale-eviction-policy overrides it.
	StaleEvictionPolicy string `json:"staleEvictionPolicy"`
	// MaxDeferral bounds how long DeferUntilReplaced keeps a member pod
	// whose replacement is not Ready.
	MaxDeferral hysteresis.Duration `json:"maxDeferral"`
	// ReapAfter: a host pod Terminating this long on a leaf whose member
	// is confirmed NotReady is finished in the host (its member pod's
	// delete is owed), so that StatefulSets can fail over.
	ReapAfter hysteresis.Duration `json:"reapAfter"`
	// Workers is how many pods of one member are reconciled in parallel.
	// Every member has its own queue and workers: a slow or unreachable
	// member never delays another member's pod sync, deletes or reaping.
	Workers int `json:"workers"`
	// Resync: every synced pod is looked at again, and the ConfigMaps and
	// Secrets copied into members refreshed and garbage-collected, at
	// least this often.
	Resync hysteresis.Duration `json:"resync"`
	// MemberPodSecurity is the Pod Security level (privileged, baseline or
	// restricted) at which leafsync evaluates every member pod with the
	// upstream Pod Security checks before creating it; a pod that fails is
	// not created. Per member, the registration annotation
	// leafsync.io/pod-security overrides it. The level is also enforced,
	// by label, on the namespaces leafsync creates in members, as a second
	// layer.
	MemberPodSecurity string `json:"memberPodSecurity"`
	// HostAPIServer is the host API server's address as members reach it
	// ("host:port" or "https://host:port"). With it, a pod on a leaf that
	// mounts a ServiceAccount token gets a token of its host
	// ServiceAccount, the host's CA and this address
	// (KUBERNETES_SERVICE_HOST/PORT); without it, no token. Per member,
	// the registration annotation leafsync.io/host-api-server overrides it.
	HostAPIServer string `json:"hostAPIServer"`
}

// ParseHostAPIServer splits a host API server address ("host:port" or
// "https://host:port") into its host and port.
func ParseHostAPIServer(s string) (host, port string, err error) {
	hp := s
	if strings.Contains(s, "://") {
		u, err := url.Parse(s)
		if err != nil || u.Scheme != "https" || u.Path != "" && u.Path != "/" {
			return "", "", fmt.Errorf("%q: want host:port or https://host:port", s)
		}
		hp = u.Host
	}
	host, port, err = net.SplitHostPort(hp)
	if err != nil || host == "" || port == "" {
		return "", "", fmt.Errorf("%q: want host:port or https://host:port", s)
	}
	return host, port, nil
}

// PodSecurityLevels are the accepted values of podSync.memberPodSecurity.
var PodSecurityLevels = []string{"privileged", "baseline", "restricted"}

// StaleEvictionPolicies are the accepted values of podSync.staleEvictionPolicy.
var StaleEvictionPolicies = []string{"DeferUntilReplaced", "Retain", "Forward"}

// DefaultPodSync is the pod sync configuration when nothing is set.
func DefaultPodSync() PodSync {
	return PodSync{
		StaleEvictionPolicy: "DeferUntilReplaced",
		MaxDeferral:         hysteresis.Duration{Duration: 10 * time.Minute},
		ReapAfter:           hysteresis.Duration{Duration: time.Minute},
		Workers:             2,
		Resync:              hysteresis.Duration{Duration: 30 * time.Second},
		MemberPodSecurity:   "baseline",
	}
}

func (p PodSync) validate() error {
	var errs []error
	if !contains(StaleEvictionPolicies, p.StaleEvictionPolicy) {
		errs = append(errs, fmt.Errorf("podSync.staleEvictionPolicy %q must be one of %v", p.StaleEvictionPolicy, StaleEvictionPolicies))
	}
	for _, f := range []struct {
		name string
		d    hysteresis.Duration
	}{{"podSync.maxDeferral", p.MaxDeferral}, {"podSync.reapAfter", p.ReapAfter}, {"podSync.resync", p.Resync}} {
		if f.d.Duration <= 0 {
			errs = append(errs, fmt.Errorf("%s (%s) must be positive", f.name, f.d))
		}
	}
	if !contains(PodSecurityLevels, p.MemberPodSecurity) {
		errs = append(errs, fmt.Errorf("podSync.memberPodSecurity %q must be one of %v", p.MemberPodSecurity, PodSecurityLevels))
	}
	if p.HostAPIServer != "" {
		if _, _, err := ParseHostAPIServer(p.HostAPIServer); err != nil {
			errs = append(errs, fmt.Errorf("podSync.hostAPIServer %w", err))
		}
	}
	if p.Workers < 1 {
		errs = append(errs, fmt.Errorf("podSync.workers (%d) must be at least 1", p.Workers))
	}
	return errors.Join(errs...)
}
