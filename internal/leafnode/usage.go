package leafnode

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Usage is what a member's pods that leafsync did not place request on
// each of its nodes, pods counted under corev1.ResourcePods: the part of a
// leaf's capacity the member's own workloads take. It is kept up to date
// from the member's pod events (Update), so that a leaf recompute reads one
// sum per node instead of adding up every pod of the member. Summing the
// pods at every recompute was most of leafsync's CPU with busy members:
// 200 recomputes over 2,000 pods each held a member node's removal back by
// over a second (make bench-scale at 400 registrations).
//
// Safe for concurrent use: Update is called by the member's pod informer,
// Snapshot by the leaf's sync.
type Usage struct {
	mu sync.Mutex
	// byNode holds each node's sum; a sum is replaced, never changed in
	// place, so a Snapshot's lists stay as they were when it was taken.
	byNode map[string]corev1.ResourceList
}

// Update accounts for a pod's change from old to cur: nil for a pod that
// is not there (added: old nil; deleted: cur nil). A pod counts while it is
// bound to a node and has not finished.
func (u *Usage) Update(old, cur *PodUsage) {
	was, is := counts(old), counts(cur)
	if was && is && old.NodeName == cur.NodeName && sameList(old.Requests, cur.Requests) {
		return // a status change (the usual update): nothing to do
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if was {
		u.change(old, -1)
	}
	if is {
		u.change(cur, +1)
	}
}

// Snapshot is each node's sum now. The caller must not change the lists.
func (u *Usage) Snapshot() map[string]corev1.ResourceList {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make(map[string]corev1.ResourceList, len(u.byNode))
	for node, l := range u.byNode {
		out[node] = l
	}
	return out
}

func counts(p *PodUsage) bool {
	return p != nil && p.NodeName != "" && p.Phase != corev1.PodSucceeded && p.Phase != corev1.PodFailed
}

// change adds (sign +1) or takes off (-1) the pod's requests and one pod
// on its node, in a new list. Called with mu held.
func (u *Usage) change(p *PodUsage, sign int) {
	if u.byNode == nil {
		u.byNode = map[string]corev1.ResourceList{}
	}
	prev := u.byNode[p.NodeName]
	next := make(corev1.ResourceList, len(prev)+1)
	for name, q := range prev {
		next[name] = q.DeepCopy()
	}
	apply := func(name corev1.ResourceName, q resource.Quantity) {
		cur := next[name]
		if sign > 0 {
			cur.Add(q)
		} else {
			cur.Sub(q)
		}
		next[name] = cur
	}
	for name, q := range p.Requests {
		apply(name, q)
	}
	apply(corev1.ResourcePods, onePod)
	if n := next[corev1.ResourcePods]; n.Sign() <= 0 {
		delete(u.byNode, p.NodeName) // its last pod went
		return
	}
	u.byNode[p.NodeName] = next
}

// sameList: the two lists request the same.
func sameList(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, q := range a {
		if r, ok := b[name]; !ok || q.Cmp(r) != 0 {
			return false
		}
	}
	return true
}
