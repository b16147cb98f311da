// Package canary is the canary check of a member's verification
// (docs/verification.md#the-canary): one small pod in the member, of
// leafsync's own image running `leafsync verify`, that shows from inside
// the member that a pod is admitted, scheduled, pulled and started, reaches
// the member's API server, and resolves names through cluster DNS.
//
//	Run ──create──▶ pod (leafsync-system, default ServiceAccount, no tolerations)
//	     ◀─watch──  ├─ image pull failed ............ ImagePullFailed
//	                ├─ ended, report in the termination message
//	                │     passed / a check failed ... Passed / CheckFailed
//	                │     no report ................. NoReport
//	                └─ Options.Timeout passed ....... NotScheduled / Timeout
//	     ──delete─▶ always (also on timeout and cancel)
//
// Defaults and why: a 2-minute timeout leaves room for an image pull and a
// cold start on a busy node (a pass took 4s on a loaded test node with the
// image present); leafsync's own image, so a member pulls nothing it would
// not pull for leafsync anyway; the restricted Pod Security standard and
// requests of 10m CPU and 32Mi, so that no namespace policy and no nearly
// full node refuses it; activeDeadlineSeconds of the timeout, so the
// member's kubelet ends it even if leafsync is gone before deleting it.
//
// Report is the contract with `leafsync verify` (cmd/leafsync/verify.go):
// one JSON line, printed and written to the termination log.
package canary
