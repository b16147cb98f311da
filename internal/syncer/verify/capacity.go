package verify

import (
	"fmt"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/leafsync/leafsync/internal/syncer/member"
	"github.com/leafsync/leafsync/internal/syncer/registration"
)

// checkCapacity: the member has a Ready, schedulable node the leaf offers
// (one matching the registration's node selector, if any), read from the
// member's node informer.
func checkCapacity(rt *member.Runtime, annotations map[string]string) Result {
	if !rt.HasSynced() {
		return Result{Check: CheckCapacity, Outcome: Inconclusive, Message: "the member's caches have not synced yet"}
	}
	sel := labels.Everything()
	if v := annotations[registration.AnnotationNodeSelector]; v != "" {
		if s, err := labels.Parse(v); err == nil {
			sel = s
		}
	}
	seen := 0
	for _, n := range rt.Nodes() {
		if !sel.Matches(&n.Labels) {
			continue
		}
		seen++
		if n.Ready && !n.Unschedulable {
			return Result{Check: CheckCapacity, Outcome: Passed}
		}
	}
	what := "no member node"
	if !sel.Empty() {
		what = fmt.Sprintf("no member node matching %s=%q", registration.AnnotationNodeSelector, sel)
	}
	return Result{Check: CheckCapacity, Outcome: Failed, Message: fmt.Sprintf(
		"%s is Ready and schedulable (%d seen): uncordon a node or add one to the member", what, seen)}
}
