package registration

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/leafsync/leafsync/hysteresis"
)

// Annotations read from a registration Secret. Every one is documented in
// docs/annotations.md.
const (
	// AnnotationLeafName overrides the leaf node name (default leaf-<cluster>).
	AnnotationLeafName = "leafsync.io/leaf-name"
	// AnnotationAllowInsecureTLS ("true") accepts insecure-skip-tls-verify
	// and plain http:// servers for this cluster.
	AnnotationAllowInsecureTLS = "leafsync.io/allow-insecure-tls"
	// AnnotationContext selects a kubeconfig context other than current-context.
	AnnotationContext = "leafsync.io/context"
)

// Annotations written by leafsync on a registration Secret to report its
// status. They are never read as options.
const (
	// AnnotationStatus is the registration's phase (see the Phase* values
	// of package syncer/clusters).
	AnnotationStatus = "leafsync.io/status"
	// AnnotationStatusReason is the CamelCase reason of the phase.
	AnnotationStatusReason = "leafsync.io/status-reason"
	// AnnotationStatusMessage is a message for people: what is wrong and what to do.
	AnnotationStatusMessage = "leafsync.io/status-message"
	// AnnotationStatusTime is when the phase or reason last changed (RFC 3339).
	AnnotationStatusTime = "leafsync.io/status-time"
)

// threshold returns the hysteresis threshold an annotation overrides: the
// annotation is leafsync.io/ and the threshold's Flag.
func threshold(key string) (hysteresis.Threshold, bool) {
	flag, ok := strings.CutPrefix(key, AnnotationPrefix)
	i := slices.IndexFunc(hysteresis.Thresholds, func(t hysteresis.Threshold) bool { return t.Flag == flag })
	if !ok || i < 0 {
		return hysteresis.Threshold{}, false
	}
	return hysteresis.Thresholds[i], true
}

// Annotation describes an option annotation that another component owns
// (e.g. a stale-eviction policy). Registering it makes Parse validate its
// value and stops it being reported as unknown.
type Annotation struct {
	// Key is the full annotation key, with the leafsync.io/ prefix.
	Key string
	// Validate checks a value; its error message should say what is
	// accepted. nil accepts anything.
	Validate func(value string) error
}

var (
	extraMu          sync.RWMutex
	extraAnnotations = map[string]Annotation{}
)

// RegisterAnnotation adds an option annotation owned by another component.
// Call it from an init function or before the manager starts.
func RegisterAnnotation(a Annotation) {
	if !strings.HasPrefix(a.Key, AnnotationPrefix) {
		panic(fmt.Sprintf("registration: annotation %q lacks prefix %s", a.Key, AnnotationPrefix))
	}
	extraMu.Lock()
	defer extraMu.Unlock()
	extraAnnotations[a.Key] = a
}

func isStatusAnnotation(key string) bool {
	switch key {
	case AnnotationStatus, AnnotationStatusReason, AnnotationStatusMessage, AnnotationStatusTime:
		return true
	}
	return false
}

// UnknownAnnotations returns the leafsync.io/ annotations that no component
// reads (most likely misspelt), sorted.
func UnknownAnnotations(annotations map[string]string) []string {
	extraMu.RLock()
	defer extraMu.RUnlock()
	var unknown []string
	for k := range annotations {
		if !strings.HasPrefix(k, AnnotationPrefix) || isStatusAnnotation(k) {
			continue
		}
		switch k {
		case AnnotationLeafName, AnnotationAllowInsecureTLS, AnnotationContext:
			continue
		}
		if _, ok := threshold(k); ok {
			continue
		}
		if _, ok := extraAnnotations[k]; ok {
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

	if v, ok := spec.Annotations[AnnotationContext]; ok && v == "" {
		return errorf(ReasonInvalidAnnotation, "%s is empty; name a context of the kubeconfig, or remove the annotation to use current-context", AnnotationContext)
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

	extraMu.RLock()
	defer extraMu.RUnlock()
	for _, k := range sortedKeys(extraAnnotations) {
		a := extraAnnotations[k]
		v, ok := spec.Annotations[k]
		if !ok || a.Validate == nil {
			continue
		}
		if err := a.Validate(v); err != nil {
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
