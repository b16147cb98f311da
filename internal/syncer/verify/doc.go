// Package verify decides whether a member is fit to receive new pods, and
// keeps its leaf tainted leafsync.io/unverified:NoSchedule until it is
// (docs/verification.md). Like kube-node-ready for nodes: a member whose
// credentials cannot create pods, whose nodes are all cordoned, or whose
// pods cannot run gets no host pods, instead of failing them one by one.
//
// Each run checks, each with its own result:
//
//	rights    SelfSubjectAccessReviews, as the registration's credentials,
//	          of every verb leafsync uses in the member (the table in rights.go)
//	capacity  a Ready, schedulable member node (the member's node informer)
//	canary    a pod in the member runs to completion (package canary);
//	          off per registration with leafsync.io/verify-canary: "false"
//
// and Decide folds the results into the member's verdict:
//
//	          any failed                 all passed
//	Pending ──────────────> Unverified ─────────────> Verified
//	   │                        ^                       │  ^
//	   │ all passed             │ credentials or        │  │ all passed
//	   └──────────> Verified    │ identity change:      v  │
//	                            │ back to Pending    Cordoned (any failed)
//
// A check that could not run (the member did not answer, its caches have
// not synced) is inconclusive: the verdict stays as it was. An outage is
// the readiness engine's to judge; verification never feeds it and never
// changes a leaf's readiness. Every verdict but Verified taints the leaf
// (NoSchedule): pods already on it keep running.
//
// A member is verified when it registers, on every change of its
// registration, and whenever its credentials or identity change (the
// registration's connection hash, the UID of its kube-system namespace:
// back to Pending first), retried with exponential backoff until it
// passes; a verified member is verified again every verification.interval
// when set. The verdict is written on the registration Secret
// (leafsync.io/verified, leafsync.io/verify-failed) with an Event per
// change, and read back after a restart when it holds for the same
// credentials and identity, so a restart does not taint verified leaves.
package verify
