package member

import apiequality "k8s.io/apimachinery/pkg/api/equality"

// NodeRecordChanged reports whether an update of the member's Node
// informer (see NodeInformer) changed what a leaf reads of the node, not
// only its resourceVersion: a kubelet's status report that changes
// nothing a leaf shows (a heartbeat time, images, volumes) is no reason
// to recompute the leaf. Objects of another type count as changed.
func NodeRecordChanged(old, cur any) bool {
	o, ok := old.(*cachedNode)
	n, ok2 := cur.(*cachedNode)
	if !ok || !ok2 {
		return true
	}
	return !apiequality.Semantic.DeepEqual(o.MemberNode, n.MemberNode)
}
