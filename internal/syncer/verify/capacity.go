package verify

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	nodeutil "k8s.io/component-helpers/node/util"

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
	nodes, err := rt.NodeLister().List(sel)
	if err != nil {
		return Result{Check: CheckCapacity, Outcome: Inconclusive, Message: err.Error()}
	}
	for _, n := range nodes {
		if _, c := nodeutil.GetNodeCondition(&n.Status, corev1.NodeReady); c != nil && c.Status == corev1.ConditionTrue && !n.Spec.Unschedulable {
			return Result{Check: CheckCapacity, Outcome: Passed}
		}
	}
	what := "no member node"
	if !sel.Empty() {
		what = fmt.Sprintf("no member node matching %s=%q", registration.AnnotationNodeSelector, sel)
	}
	return Result{Check: CheckCapacity, Outcome: Failed, Message: fmt.Sprintf(
		"%s is Ready and schedulable (%d seen): uncordon a node or add one to the member", what, len(nodes))}
}
