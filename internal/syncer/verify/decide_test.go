package verify

import (
	"testing"
)

func res(check Check, o Outcome) Result {
	return Result{Check: check, Outcome: o, Message: string(check) + " " + string(o)}
}

// The decision from one run's results: checks → verified, taint, cordon.
func TestDecide(t *testing.T) {
	pass := []Result{res(CheckRights, Passed), res(CheckCapacity, Passed), res(CheckCanary, Skipped)}
	noRights := []Result{res(CheckRights, Failed), res(CheckCapacity, Passed), res(CheckCanary, Passed)}
	noCapacity := []Result{res(CheckRights, Passed), res(CheckCapacity, Failed), res(CheckCanary, Failed)}
	unknown := []Result{res(CheckRights, Inconclusive), res(CheckCapacity, Passed), res(CheckCanary, Passed)}
	cases := []struct {
		name    string
		prev    Phase
		results []Result
		phase   Phase
		taint   string
	}{
		{"a new member that passes", Pending, pass, Verified, ""},
		{"a new member without a right", Pending, noRights, Unverified, "rights"},
		{"a new member with nothing schedulable nor a canary", Pending, noCapacity, Unverified, "capacity_canary"},
		{"a new member that does not answer stays pending", Pending, unknown, Pending, "pending"},
		{"a failing member that passes", Unverified, pass, Verified, ""},
		{"a failing member fails again", Unverified, noCapacity, Unverified, "capacity_canary"},
		{"a verified member that fails is cordoned", Verified, noRights, Cordoned, "rights"},
		{"a verified member that does not answer stays verified", Verified, unknown, Verified, ""},
		{"a cordoned member that fails stays cordoned", Cordoned, noCapacity, Cordoned, "capacity_canary"},
		{"a cordoned member that does not answer stays cordoned", Cordoned, unknown, Cordoned, "rights"},
		{"a cordoned member that passes is verified", Cordoned, pass, Verified, ""},
	}
	for _, tc := range cases {
		prev := Verdict{Phase: tc.prev}
		if tc.prev == Unverified || tc.prev == Cordoned {
			prev.Failed = []Result{res(CheckRights, Failed)}
		}
		got := Decide(prev, tc.results)
		if got.Phase != tc.phase || got.Taint() != tc.taint {
			t.Errorf("%s: %s taint %q, want %s taint %q", tc.name, got.Phase, got.Taint(), tc.phase, tc.taint)
		}
		if failing := got.Phase == Unverified || got.Phase == Cordoned; failing != (got.Summary() != "") {
			t.Errorf("%s: %s with failures %q", tc.name, got.Phase, got.Summary())
		}
	}
}

// A pending verdict (no run yet) taints the leaf: a new leaf is never
// schedulable before its first conclusive run.
func TestZeroVerdictTaints(t *testing.T) {
	if (Verdict{}).Taint() != "pending" {
		t.Fatal("the zero verdict does not taint the leaf")
	}
}

// The summary names each failed check and its message, as the Secret's
// annotation and the Warning Event say it.
func TestSummaryNamesEachFailedCheck(t *testing.T) {
	v := Decide(Verdict{Phase: Pending}, []Result{
		{Check: CheckRights, Outcome: Failed, Message: "member credentials lack create pods"},
		{Check: CheckCapacity, Outcome: Failed, Message: "no member node is Ready"},
	})
	want := "rights: member credentials lack create pods; capacity: no member node is Ready"
	if v.Summary() != want {
		t.Fatalf("summary %q, want %q", v.Summary(), want)
	}
}
