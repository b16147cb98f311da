package main

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// An eviction, as a user reads the word: a pod of the leaf removed from it
// because of the fault — its host pod deleted with a DisruptionTarget
// condition, whoever deleted it (KCM's taint manager, or leafsync itself
// once it had confirmed an outage). A refused attempt is no eviction.
// The narrator sees each host pod once a second; a deleted pod on a leaf
// stays (Terminating) until its member answers, so none is missed.

// evictedBy says who evicted a host pod of the leaf: "leafsync" for an
// eviction leafsync carried out (its DisruptionTarget message starts with
// "leafsync:"), "kcm" for any other deletion of the pod, "" when the pod is
// not being deleted.
func evictedBy(p *corev1.Pod) string {
	if p.DeletionTimestamp == nil {
		return ""
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && strings.HasPrefix(c.Message, "leafsync:") {
			return "leafsync"
		}
	}
	return "kcm"
}

// evictions counts a leaf's evictions by who carried them out.
func (s *leafSummary) evictions() (byLeafsync, byKCM int) {
	for _, by := range s.evicted {
		if by == "leafsync" {
			byLeafsync++
		} else {
			byKCM++
		}
	}
	return byLeafsync, byKCM
}

// outageSentence is the summary's account of the real outage, in the words
// a newcomer reads: how many pods were evicted and by whom, and where its
// workloads ran meanwhile.
func outageSentence(outage string, byLeafsync, byKCM int, moved []string) string {
	elsewhere := "none"
	if len(moved) > 0 {
		elsewhere = strings.Join(moved, ", ")
	}
	n := byLeafsync + byKCM
	if n == 0 {
		return fmt.Sprintf("the %s outage was real, yet no pod of the leaf was evicted; Ready elsewhere meanwhile: %s.", outage, elsewhere)
	}
	var who []string
	if byLeafsync > 0 {
		who = append(who, fmt.Sprintf("%d by leafsync itself (leafsync_evictions_completed_total)", byLeafsync))
	}
	if byKCM > 0 {
		who = append(who, fmt.Sprintf("%d by KCM's taint manager", byKCM))
	}
	return fmt.Sprintf("the %s outage was real: %s evicted once leafsync had confirmed it (%s); Ready elsewhere meanwhile: %s.",
		outage, pods(n, "of the leaf was", "of the leaf were"), strings.Join(who, ", "), elsewhere)
}

// pods is "1 pod <one>" or "n pods <many>".
func pods(n int, one, many string) string {
	if n == 1 {
		return "1 pod " + one
	}
	return fmt.Sprintf("%d pods %s", n, many)
}

// observe counts a host pod of the leaf as evicted once it is seen being
// deleted.
func (s *leafSummary) observe(p *corev1.Pod) {
	if by := evictedBy(p); by != "" {
		if _, seen := s.evicted[p.UID]; !seen {
			s.evicted[p.UID] = by
		}
	}
}
