package registration

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/syncer/config"
)

// Option annotations read from a registration Secret, besides the
// hysteresis thresholds (leafsync.io/ and a hysteresis.Threshold's Flag).
// Every one is documented in docs/annotations.md and listed in options.
const (
	// AnnotationLeafName overrides the leaf node name (default leaf-<cluster>).
	AnnotationLeafName = "leafsync.io/leaf-name"
	// AnnotationAllowInsecureTLS ("true") accepts insecure-skip-tls-verify
	// and plain http:// servers for this cluster.
	AnnotationAllowInsecureTLS = "leafsync.io/allow-insecure-tls"
	// annotationContext selects a kubeconfig context other than current-context.
	annotationContext = "leafsync.io/context"
	// AnnotationNodeSelector restricts which member nodes a leaf offers (a
	// label selector, e.g. "pool=leaf"). Read by internal/syncer/leaves.
	AnnotationNodeSelector = "leafsync.io/node-selector"
	// AnnotationLeafTaint turns the leafsync.io/leaf taint on or off for one
	// member ("true"/"false"), overriding the fleet setting. Read by
	// internal/syncer/leaves.
	AnnotationLeafTaint = "leafsync.io/leaf-taint"
	// AnnotationMemberServiceAccounts lists the member ServiceAccounts that
	// host pods may run as: "namespace/name" entries, comma-separated; "*"
	// allows any ServiceAccount outside kube-system. Read by internal/syncer/podsync.
	AnnotationMemberServiceAccounts = "leafsync.io/member-service-accounts"
	// AnnotationPodSecurity is the Pod Security level (privileged,
	// baseline or restricted) at which the upstream Pod Security checks
	// evaluate the member's pods; default podSync.memberPodSecurity. Read
	// by internal/syncer/podsync.
	AnnotationPodSecurity = "leafsync.io/pod-security"
	// AnnotationAllowPrivilegedPods "true" is the older spelling of
	// AnnotationPodSecurity=privileged, read only when that is absent.
	// Read by internal/syncer/podsync.
	AnnotationAllowPrivilegedPods = "leafsync.io/allow-privileged-pods"
	// AnnotationMemberNamespaces lists the member namespaces, besides those
	// leafsync creates, that host pods may run in (comma-separated names;
	// never a kube-* namespace). Read by internal/syncer/podsync.
	AnnotationMemberNamespaces = "leafsync.io/member-namespaces"
	// AnnotationStaleEvictionPolicy overrides podSync.staleEvictionPolicy
	// for the member. Read by internal/syncer/podsync.
	AnnotationStaleEvictionPolicy = "leafsync.io/stale-eviction-policy"
	// AnnotationStorageClasses maps host StorageClasses to the member's:
	// "<host class>=<member class>" entries, comma-separated. A host claim
	// of an unmapped class is not provisioned into the member. Read by
	// internal/syncer/volumes (StorageClasses).
	AnnotationStorageClasses = "leafsync.io/storage-classes"
	// AnnotationHostAPIServer overrides podSync.hostAPIServer for the
	// member: the host API server's address as this member's pods reach it.
	// Read by internal/syncer/podsync.
	AnnotationHostAPIServer = "leafsync.io/host-api-server"
	// AnnotationVerifyCanary "false" leaves the canary pod out of the
	// member's verification (verification.canary on). Read by
	// internal/syncer/verify.
	AnnotationVerifyCanary = "leafsync.io/verify-canary"
	// AnnotationVerifyCanaryImage overrides the canary pod's image (default
	// leafsync's own image, which runs `leafsync verify`). Read by
	// internal/syncer/verify (package canary).
	AnnotationVerifyCanaryImage = "leafsync.io/verify-canary-image"
)

// options maps every option annotation to the check of its value, which
// Parse applies so that a bad value refuses the Secret (nil: checked by
// parseAnnotations itself). The packages that read the values take them as
// checked.
var options = map[string]func(value string) error{
	AnnotationLeafName:         nil,
	AnnotationAllowInsecureTLS: nil,
	annotationContext:          nil,
	AnnotationNodeSelector: func(v string) error {
		_, err := labels.Parse(v)
		return err
	},
	AnnotationLeafTaint: func(v string) error {
		_, err := strconv.ParseBool(v)
		return err
	},
	AnnotationMemberServiceAccounts: func(v string) error {
		for _, e := range strings.Split(v, ",") {
			if e = strings.TrimSpace(e); e == "" || e == "*" {
				continue
			}
			ns, name, ok := strings.Cut(e, "/")
			if !ok || strings.Contains(name, "/") || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
				return fmt.Errorf("%s: %q is not namespace/name (or *)", AnnotationMemberServiceAccounts, e)
			}
		}
		return nil
	},
	AnnotationAllowPrivilegedPods: func(v string) error {
		if _, err := strconv.ParseBool(v); err != nil {
			return fmt.Errorf("%s: %q is not true or false", AnnotationAllowPrivilegedPods, v)
		}
		return nil
	},
	AnnotationPodSecurity: func(v string) error {
		if !slices.Contains(config.PodSecurityLevels, v) {
			return fmt.Errorf("%s: %q is not privileged, baseline or restricted", AnnotationPodSecurity, v)
		}
		return nil
	},
	AnnotationMemberNamespaces: func(v string) error {
		for _, ns := range strings.Split(v, ",") {
			switch ns = strings.TrimSpace(ns); {
			case ns == "":
			case len(validation.IsDNS1123Label(ns)) > 0:
				return fmt.Errorf("%s: %q is not a namespace name", AnnotationMemberNamespaces, ns)
			case strings.HasPrefix(ns, "kube-"):
				return fmt.Errorf("%s: %q is a kube-* namespace, where host pods never run", AnnotationMemberNamespaces, ns)
			}
		}
		return nil
	},
	AnnotationVerifyCanary: func(v string) error {
		_, err := strconv.ParseBool(v)
		return err
	},
	AnnotationHostAPIServer: func(v string) error {
		_, _, err := config.ParseHostAPIServer(v)
		return err
	},
	AnnotationVerifyCanaryImage: func(v string) error {
		if v == "" || strings.ContainsFunc(v, unicode.IsSpace) {
			return fmt.Errorf("%s: %q is not an image reference", AnnotationVerifyCanaryImage, v)
		}
		return nil
	},
	AnnotationStorageClasses: func(v string) error {
		_, err := ParseStorageClasses(v)
		return err
	},
	AnnotationStaleEvictionPolicy: func(v string) error {
		if !slices.Contains(config.StaleEvictionPolicies, v) {
			return fmt.Errorf("unknown stale-eviction policy %q (want one of %s)", v, strings.Join(config.StaleEvictionPolicies, ", "))
		}
		return nil
	},
}

// ParseStorageClasses reads AnnotationStorageClasses: host class -> member
// class. Each side is a StorageClass name; a host class is mapped once.
func ParseStorageClasses(v string) (map[string]string, error) {
	m := map[string]string{}
	for _, e := range strings.Split(v, ",") {
		if e = strings.TrimSpace(e); e == "" {
			continue
		}
		host, mem, ok := strings.Cut(e, "=")
		host, mem = strings.TrimSpace(host), strings.TrimSpace(mem)
		switch {
		case !ok || len(validation.IsDNS1123Subdomain(host)) > 0 || len(validation.IsDNS1123Subdomain(mem)) > 0:
			return nil, fmt.Errorf("%q is not <host class>=<member class>", e)
		case m[host] != "":
			return nil, fmt.Errorf("host class %s is mapped twice", host)
		}
		m[host] = mem
	}
	return m, nil
}

// StorageClasses is the registration's storage class map (empty when
// unset; the value was checked when the Secret was accepted).
func StorageClasses(annotations map[string]string) map[string]string {
	m, _ := ParseStorageClasses(annotations[AnnotationStorageClasses])
	return m
}

// Annotations written by leafsync on a registration Secret to report its
// status. They are never read as options.
const (
	// AnnotationStatus is the registration's phase (see the Phase* values
	// of package internal/syncer/clusters).
	AnnotationStatus = "leafsync.io/status"
	// AnnotationStatusReason is the CamelCase reason of the phase.
	AnnotationStatusReason = "leafsync.io/status-reason"
	// AnnotationStatusMessage is a message for people: what is wrong and what to do.
	AnnotationStatusMessage = "leafsync.io/status-message"
	// AnnotationStatusTime is when the phase or reason last changed (RFC 3339).
	AnnotationStatusTime = "leafsync.io/status-time"
	// AnnotationMemberIdentity is the member's identity (the UID of its
	// kube-system namespace), recorded at first contact and compared at
	// every connect. Clearing it confirms a member whose identity changed.
	AnnotationMemberIdentity = "leafsync.io/member-identity"
	// AnnotationVerified is "true" while the member is verified to run
	// new pods, "false" while it is not (internal/syncer/verify).
	AnnotationVerified = "leafsync.io/verified"
	// AnnotationVerifyFailed lists the failed checks of the last
	// verification, "check: what is wrong and what to do" joined by "; ".
	AnnotationVerifyFailed = "leafsync.io/verify-failed"
	// AnnotationVerifiedFor fingerprints the credentials and member
	// identity the verification result holds for: a result for other
	// ones is not trusted after a restart.
	AnnotationVerifiedFor = "leafsync.io/verified-for"
	// AnnotationVerifyTime is when the verification result last changed (RFC 3339).
	AnnotationVerifyTime = "leafsync.io/verify-time"
)

// threshold returns the hysteresis threshold an annotation overrides: the
// annotation is leafsync.io/ and the threshold's Flag.
func threshold(key string) (hysteresis.Threshold, bool) {
	flag, ok := strings.CutPrefix(key, AnnotationPrefix)
	if !ok {
		return hysteresis.Threshold{}, false
	}
	i := slices.IndexFunc(hysteresis.Thresholds, func(t hysteresis.Threshold) bool { return t.Flag == flag })
	if i < 0 {
		return hysteresis.Threshold{}, false
	}
	return hysteresis.Thresholds[i], true
}

func isStatusAnnotation(key string) bool {
	switch key {
	case AnnotationStatus, AnnotationStatusReason, AnnotationStatusMessage, AnnotationStatusTime, AnnotationMemberIdentity,
		AnnotationVerified, AnnotationVerifyFailed, AnnotationVerifiedFor, AnnotationVerifyTime:
		return true
	}
	return false
}

// UnknownAnnotations returns the leafsync.io/ annotations that no component
// reads (most likely misspelt), sorted.
func UnknownAnnotations(annotations map[string]string) []string {
	var unknown []string
	for k := range annotations {
		if !strings.HasPrefix(k, AnnotationPrefix) || isStatusAnnotation(k) {
			continue
		}
		if _, ok := options[k]; ok {
			continue
		}
		if _, ok := threshold(k); ok {
			continue
		}
		unknown = append(unknown, k)
	}
	sort.Strings(unknown)
	return unknown
}

// parseAnnotations fills the annotation-derived fields of spec.
func parseAnnotations(annotations map[string]string, spec *Spec) error {
	spec.Annotations = map[string]string{}
	for k, v := range annotations {
		if strings.HasPrefix(k, AnnotationPrefix) && !isStatusAnnotation(k) {
			spec.Annotations[k] = v
		}
	}

	spec.LeafName = LeafNamePrefix + spec.Cluster
	if v, ok := spec.Annotations[AnnotationLeafName]; ok {
		if msgs := validation.IsDNS1123Subdomain(v); len(msgs) > 0 {
			return errorf(ReasonInvalidAnnotation, "%s=%q is not a valid node name (%s); use a DNS-1123 subdomain such as leaf-%s, or remove the annotation for the default",
				AnnotationLeafName, v, strings.Join(msgs, "; "), spec.Cluster)
		}
		spec.LeafName = v
	}

	if v, ok := spec.Annotations[AnnotationAllowInsecureTLS]; ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return errorf(ReasonInvalidAnnotation, "%s=%q is not a boolean; set it to \"true\" or \"false\"", AnnotationAllowInsecureTLS, v)
		}
		spec.AllowInsecureTLS = b
	}

	if v, ok := spec.Annotations[annotationContext]; ok && v == "" {
		return errorf(ReasonInvalidAnnotation, "%s is empty; name a context of the kubeconfig, or remove the annotation to use current-context", annotationContext)
	}

	raw := map[string]string{}
	for _, key := range sortedKeys(spec.Annotations) {
		t, ok := threshold(key)
		if !ok {
			continue
		}
		v := spec.Annotations[key]
		if _, err := hysteresis.ParseOverrides(map[string]string{t.Name: v}); err != nil {
			return errorf(ReasonInvalidAnnotation, "%s=%q: %v; fix the value (see docs/annotations.md) or remove the annotation to use the fleet default", key, v, err)
		}
		raw[t.Name] = v
	}
	overrides, err := hysteresis.ParseOverrides(raw)
	if err != nil {
		return errorf(ReasonInvalidAnnotation, "the threshold annotations do not fit together: %v; fix them (see docs/annotations.md)", err)
	}
	spec.Overrides = overrides
	spec.RawOverrides = raw

	for _, k := range sortedKeys(options) {
		check := options[k]
		v, ok := spec.Annotations[k]
		if !ok || check == nil {
			continue
		}
		if err := check(v); err != nil {
			return errorf(ReasonInvalidAnnotation, "%s=%q: %v; fix the value (see docs/annotations.md) or remove the annotation", k, v, err)
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
