package decide

import (
	"testing"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
)

// A second host registering the same member under the same cluster name
// never takes the first host's pods: with no host pod of that name, its
// pod sync neither records an orphan nor deletes, adopts or relabels.
func TestAnotherHostsPodIsLeftAlone(t *testing.T) {
	hp := hostPod("h1")
	theirs := memberOf(hp, "m1")
	theirs.Labels[podmeta.LabelHost] = "host-b"
	for _, policy := range podmeta.Policies {
		in := newInput(hysteresis.Ready, nil, theirs)
		in.Policy = policy
		wantActions(t, Decide(in))
	}
	// Nor is it adopted by a host pod of the same name and spec.
	p := Decide(newInput(hysteresis.Ready, hostPod("h2"), theirs))
	if p.Has(Adopt) || p.Has(DeleteMember) {
		t.Errorf("plan for another host's member pod: %v", types_(p))
	}
}
