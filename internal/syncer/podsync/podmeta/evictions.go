package podmeta

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// AnnotationEvictionRefused on a host pod is the time of the
// DisruptionTarget condition of an eviction that did not happen: each
// refusal is reported once.
const AnnotationEvictionRefused = "leafsync.io/eviction-refused"

// evictionConditionMaxAge: a delete requested this long after the eviction
// condition was set is not that eviction's (the condition is left over from
// a refused one): it is classified by who asked now.
const evictionConditionMaxAge = 30 * time.Second

// leftOverCondition reports whether a Terminating pod's eviction condition
// is left over from an eviction that did not happen: leafsync saw it
// refused (AnnotationEvictionRefused), or it predates the delete by more
// than evictionConditionMaxAge.
func leftOverCondition(p *corev1.Pod, c *corev1.PodCondition) bool {
	if p.DeletionTimestamp == nil || c.LastTransitionTime.IsZero() {
		return false
	}
	if p.Annotations[AnnotationEvictionRefused] == ConditionStamp(c) {
		return true
	}
	requested := p.DeletionTimestamp.Time
	if p.DeletionGracePeriodSeconds != nil {
		requested = requested.Add(-time.Duration(*p.DeletionGracePeriodSeconds) * time.Second)
	}
	return requested.Sub(c.LastTransitionTime.Time) > evictionConditionMaxAge
}

// ConditionStamp identifies one eviction attempt: its condition's time.
func ConditionStamp(c *corev1.PodCondition) string {
	return c.LastTransitionTime.UTC().Format(time.RFC3339)
}
