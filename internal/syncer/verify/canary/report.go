package canary

// Check names: what `leafsync verify` checks from inside the member.
const (
	// CheckAPI: the member's API server answers the pod.
	CheckAPI = "api"
	// CheckDNS: cluster DNS resolves kubernetes.default.
	CheckDNS = "dns"
)

// Check outcomes.
const (
	OutcomePassed  = "passed"
	OutcomeFailed  = "failed"
	OutcomeSkipped = "skipped"
)

// Check is one check's outcome, as the canary pod reports it.
type Check struct {
	Name    string `json:"name"`
	Outcome string `json:"outcome"`
	Detail  string `json:"detail,omitempty"`
}

// Report is the one JSON line `leafsync verify` prints and writes to its
// termination message: the contract between the canary pod and Run.
type Report struct {
	Passed bool    `json:"passed"`
	Checks []Check `json:"checks"`
}

// NewReport is the report of checks: passed unless one failed (a skipped
// check does not fail the canary).
func NewReport(checks ...Check) Report {
	r := Report{Passed: true, Checks: checks}
	for _, c := range checks {
		if c.Outcome == OutcomeFailed {
			r.Passed = false
		}
	}
	return r
}
