package podsync

import (
	"testing"

	"github.com/leafsync/leafsync/hysteresis"
)

func TestOwnedBy(t *testing.T) {
	for _, c := range []struct {
		name   string
		labels map[string]string
		host   string
		want   bool
	}{
		{"this host's", map[string]string{LabelManaged: "true", LabelCluster: testCluster, LabelHost: testHost}, testHost, true},
		{"another host's, same cluster name", map[string]string{LabelManaged: "true", LabelCluster: testCluster, LabelHost: "host-b"}, testHost, false},
		{"an older leafsync's (no host label): the claim holder's", map[string]string{LabelManaged: "true", LabelCluster: testCluster}, testHost, true},
		{"host identity not known yet", map[string]string{LabelManaged: "true", LabelCluster: testCluster, LabelHost: testHost}, "", false},
		{"an empty host label", map[string]string{LabelManaged: "true", LabelCluster: testCluster, LabelHost: ""}, testHost, false},
		{"another cluster's", map[string]string{LabelManaged: "true", LabelCluster: "member-b", LabelHost: testHost}, testHost, false},
		{"not leafsync's", map[string]string{LabelCluster: testCluster, LabelHost: testHost}, testHost, false},
	} {
		if got := ownedBy(c.labels, testCluster, c.host); got != c.want {
			t.Errorf("%s: ownedBy = %v, want %v", c.name, got, c.want)
		}
	}
}

// A second host registering the same member under the same cluster name
// never takes the first host's pods: with no host pod of that name, its
// pod sync neither records an orphan nor deletes, adopts or relabels.
func TestAnotherHostsPodIsLeftAlone(t *testing.T) {
	hp := hostPod("h1")
	theirs := memberOf(hp, "m1")
	theirs.Labels[LabelHost] = "host-b"
	for _, policy := range Policies {
		in := newInput(hysteresis.Ready, nil, theirs)
		in.Policy = policy
		wantActions(t, decide(in))
	}
	// Nor is it adopted by a host pod of the same name and spec.
	p := decide(newInput(hysteresis.Ready, hostPod("h2"), theirs))
	if p.Has(adopt) || p.Has(deleteMember) {
		t.Errorf("plan for another host's member pod: %v", types_(p))
	}
}
