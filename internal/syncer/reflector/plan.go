package reflector

import (
	"maps"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// copyStep is what to do with the member copy of a host object.
type copyStep int

const (
	copyKeep    copyStep = iota // it matches the host object, or there is nothing to do
	copyCreate                  // missing in the member
	copyUpdate                  // deleted fields, changed data or labels, a newer host version
	copyReplace                 // as copyUpdate, but immutable or of another Secret type: delete, then create
	copyDelete                  // the host object is gone and the reference is optional
	copyRefuse                  // a member object of that name leafsync did not create
	copyWait                    // the host object is gone and a synced pod needs it
)

// planCopy decides, from the member's object of that name (cur, nil: none;
// owned: leafsync created it), the copy wanted of the host object (want,
// nil: the host has none to copy) and whether a synced pod needs it (a
// reference that is not optional). Only the objects' contents count, not
// what leafsync remembers having written, so a copy deleted or edited by
// hand in the member is restored.
//
// A host object gone takes its copy with it only when no reference is
// needed, as a kubelet then empties an optional volume (the member's
// kubelet does once the copy goes). For a needed one a kubelet tears
// nothing down: a volume keeps its last files (the remount fails) and a
// running container its environment; so the copy stays (copyWait) and the
// member's pods keep the same, while a new pod waits in the host. The one
// difference: a container restarting meanwhile fails on a node (env from
// the missing object) and starts in the member with the last copy.
func planCopy(k Kind, cur, want metav1.Object, owned, needed bool) copyStep {
	switch {
	case cur != nil && !owned:
		return copyRefuse
	case want == nil && needed:
		return copyWait
	case want == nil && cur != nil:
		return copyDelete
	case want == nil:
		return copyKeep
	case cur == nil:
		return copyCreate
	case sameCopy(k, cur, want):
		return copyKeep
	case !k.updatable(cur, want):
		return copyReplace
	}
	return copyUpdate
}

// sameCopy: cur holds what want holds — the host version copied, the
// labels, and the kind's contents.
func sameCopy(k Kind, cur, want metav1.Object) bool {
	return cur.GetAnnotations()[AnnotationHostResourceVersion] == want.GetAnnotations()[AnnotationHostResourceVersion] &&
		maps.Equal(cur.GetLabels(), want.GetLabels()) && k.sameContents(cur, want)
}

// semanticEqual compares contents as the API server does (nil and empty
// maps alike).
func semanticEqual(a, b any) bool { return equality.Semantic.DeepEqual(a, b) }
