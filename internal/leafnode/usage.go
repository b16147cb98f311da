package leafnode

import (
	"cmp"
	"slices"
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
	// place, so a Snapshot's sums stay as they were when it was taken.
	byNode map[string]NodeSum
}

// NodeSum is a node's sum in milli-units by resource, sorted by name: a
// few words a resource where a ResourceList costs most of a kilobyte (a
// member of 200 nodes is registered hundreds of times in make
// bench-scale). Milli-units are what the scheduler compares for cpu; other
// resources are whole units, exact in milli-units up to 9.2e15 (bytes of
// memory: 8 PiB a node).
type NodeSum []Amount

// Amount is one resource's part of a NodeSum.
type Amount struct {
	Name  corev1.ResourceName
	Milli int64
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
	if u.byNode == nil {
		u.byNode = map[string]NodeSum{}
	}
	if was {
		u.change(old, -1)
	}
	if is {
		u.change(cur, +1)
	}
}

// Snapshot is each node's sum now. The caller must not change the sums.
func (u *Usage) Snapshot() map[string]NodeSum {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make(map[string]NodeSum, len(u.byNode))
	for node, s := range u.byNode {
		out[node] = s
	}
	return out
}

func counts(p *PodUsage) bool {
	return p != nil && p.NodeName != "" && p.Phase != corev1.PodSucceeded && p.Phase != corev1.PodFailed
}

// change adds (sign +1) or takes off (-1) the pod's requests and one pod
// on its node, in a new sum. Called with mu held.
func (u *Usage) change(p *PodUsage, sign int64) {
	next := slices.Clone(u.byNode[p.NodeName])
	apply := func(name corev1.ResourceName, milli int64) {
		i, found := slices.BinarySearchFunc(next, name, func(a Amount, n corev1.ResourceName) int { return cmp.Compare(a.Name, n) })
		if !found {
			next = slices.Insert(next, i, Amount{Name: name})
		}
		next[i].Milli += sign * milli
	}
	for name, q := range p.Requests {
		apply(name, q.MilliValue())
	}
	apply(corev1.ResourcePods, onePod.MilliValue())
	next = slices.DeleteFunc(next, func(a Amount) bool { return a.Milli == 0 })
	if next.milli(corev1.ResourcePods) <= 0 {
		delete(u.byNode, p.NodeName) // its last pod went
		return
	}
	u.byNode[p.NodeName] = slices.Clip(next)
}

func (s NodeSum) milli(name corev1.ResourceName) int64 {
	for _, a := range s {
		if a.Name == name {
			return a.Milli
		}
	}
	return 0
}

// subtractFrom takes the sum off list (never below zero, resources the
// list has only: see sub).
func (s NodeSum) subtractFrom(list corev1.ResourceList) {
	for _, a := range s {
		sub(list, a.Name, *resource.NewMilliQuantity(a.Milli, resource.DecimalSI))
	}
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
