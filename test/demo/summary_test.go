package main

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestOutageSentence: the counts a user reads. The real outage of `make
// demo` (leafsync completed 4 evictions, both StatefulSet pods failed
// over) must not read as "0 pods evicted".
func TestOutageSentence(t *testing.T) {
	moved := []string{"db-0 on leaf-member-a", "db-1 on leaf-member-a"}
	for _, c := range []struct {
		byLeafsync, byKCM int
		moved             []string
		want              []string
	}{
		{4, 0, moved, []string{"90s outage was real: 4 pods of the leaf were evicted once leafsync had confirmed it (4 by leafsync itself (leafsync_evictions_completed_total))", "db-0 on leaf-member-a, db-1 on leaf-member-a."}},
		{3, 1, nil, []string{"4 pods of the leaf were evicted", "3 by leafsync itself", "1 by KCM's taint manager", "Ready elsewhere meanwhile: none."}},
		{0, 1, nil, []string{"1 pod of the leaf was evicted", "(1 by KCM's taint manager)"}},
		{0, 0, nil, []string{"no pod of the leaf was evicted"}},
	} {
		got := outageSentence("90s", c.byLeafsync, c.byKCM, c.moved)
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("outageSentence(%d, %d): %q lacks %q", c.byLeafsync, c.byKCM, got, w)
			}
		}
	}
}

// TestEvictionsCounted: a leaf's host pods being deleted are evictions,
// told apart by who carried them out; a pod merely marked by a refused
// attempt (DisruptionTarget, no deletionTimestamp) is none.
func TestEvictionsCounted(t *testing.T) {
	now := metav1.Now()
	pod := func(uid string, deleted bool, msg string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)}}
		if deleted {
			p.DeletionTimestamp = &now
		}
		if msg != "" {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "DeletionByTaintManager", Message: msg}}
		}
		return p
	}
	s := &leafSummary{evicted: map[types.UID]string{}}
	for _, p := range []*corev1.Pod{
		pod("a", true, "leafsync: member confirmed NotReady"),
		pod("b", true, "leafsync: member confirmed NotReady"),
		pod("c", true, "Taint manager: deleting due to NoExecute taint"),
		pod("d", false, "Taint manager: deleting due to NoExecute taint"), // refused by the guard
		pod("e", false, ""),
	} {
		s.observe(p)
		s.observe(p) // seen again a second later: counted once
	}
	if l, k := s.evictions(); l != 2 || k != 1 {
		t.Errorf("evictions: %d by leafsync, %d by KCM; want 2 and 1", l, k)
	}
}
