package verify

import (
	"slices"
	"strings"
)

// Check names one thing verification checks; it is the
// leafsync_verification_failed_checks_total label and the prefix of each
// failure in the Secret's leafsync.io/verify-failed annotation.
type Check string

// The checks, in the order they run.
const (
	// CheckRights: the registration's credentials may do what pod sync
	// does in the member (SelfSubjectAccessReviews, the table in rights.go).
	CheckRights Check = "rights"
	// CheckCapacity: the member has a Ready, schedulable node for the leaf.
	CheckCapacity Check = "capacity"
	// CheckCanary: a pod leafsync creates in the member runs to completion.
	CheckCanary Check = "canary"
)

// Outcome is what one check found.
type Outcome string

// Outcomes of a check.
const (
	Passed Outcome = "passed"
	// Failed: the member answered, and the answer is no.
	Failed Outcome = "failed"
	// Inconclusive: the check could not run (the member did not answer,
	// its caches have not synced): no evidence either way.
	Inconclusive Outcome = "inconclusive"
	// Skipped: the check is turned off for the member.
	Skipped Outcome = "skipped"
)

// Result is one check's outcome; Message says what is wrong and what to do
// (Failed, Inconclusive), or what was left out (Skipped).
type Result struct {
	Check   Check
	Outcome Outcome
	Message string
}

// Phase is where a member stands with verification.
type Phase string

// Phases of a member's verification.
const (
	// Pending: no conclusive run yet for the member's current credentials
	// and identity (new, or changed).
	Pending Phase = "Pending"
	// Verified: the last conclusive run passed every check.
	Verified Phase = "Verified"
	// Unverified: a check failed, and the member never passed with these
	// credentials.
	Unverified Phase = "Unverified"
	// Cordoned: a check failed after the member had passed.
	Cordoned Phase = "Cordoned"
)

// Verdict is a member's verification state: its Phase, and the failed
// checks of the run that decided it (none unless Unverified or Cordoned).
type Verdict struct {
	Phase  Phase
	Failed []Result
}

// Decide folds one run's results into the member's verdict. It is pure.
//
//   - any check Failed: Cordoned if the member was Verified (or already
//     Cordoned), else Unverified;
//   - else any Inconclusive: the verdict stays as it was (a member that
//     did not answer is the readiness engine's concern, not evidence that
//     it cannot run pods; a pending member stays pending);
//   - else (every check Passed or Skipped): Verified.
func Decide(prev Verdict, results []Result) Verdict {
	var failed []Result
	inconclusive := false
	for _, r := range results {
		switch r.Outcome {
		case Failed:
			failed = append(failed, r)
		case Inconclusive:
			inconclusive = true
		}
	}
	switch {
	case len(failed) > 0 && (prev.Phase == Verified || prev.Phase == Cordoned):
		return Verdict{Phase: Cordoned, Failed: failed}
	case len(failed) > 0:
		return Verdict{Phase: Unverified, Failed: failed}
	case inconclusive:
		return prev
	}
	return Verdict{Phase: Verified}
}

// Taint is the value of the leaf's leafsync.io/unverified:NoSchedule
// taint: "" when verified (no taint), "pending" before the first
// conclusive run, else the failed checks joined by "_" (a label value).
func (v Verdict) Taint() string {
	switch v.Phase {
	case Verified:
		return ""
	case Pending, "":
		return "pending"
	}
	names := make([]string, 0, len(v.Failed))
	for _, r := range v.Failed {
		if !slices.Contains(names, string(r.Check)) {
			names = append(names, string(r.Check))
		}
	}
	return strings.Join(names, "_")
}

// Summary is the failed checks as the leafsync.io/verify-failed
// annotation and the Warning Event say them: "check: message" joined by "; ".
func (v Verdict) Summary() string {
	parts := make([]string, 0, len(v.Failed))
	for _, r := range v.Failed {
		parts = append(parts, string(r.Check)+": "+r.Message)
	}
	return strings.Join(parts, "; ")
}
