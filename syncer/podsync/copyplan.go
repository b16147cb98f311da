package podsync

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// reasonHostObjectNotFound: a pod's ConfigMap or Secret is missing in the
// host.
const reasonHostObjectNotFound = "HostObjectNotFound"

// copyStep is what to do with the member copy of a host ConfigMap or
// Secret.
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
func planCopy(cur, want metav1.Object, owned, needed bool) copyStep {
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
	case sameCopy(cur, want):
		return copyKeep
	case immutable(cur) || secretType(cur) != secretType(want):
		return copyReplace
	}
	return copyUpdate
}

// sameCopy: cur holds what want holds — the host version copied, the
// labels, the data and immutability.
func sameCopy(cur, want metav1.Object) bool {
	if cur.GetAnnotations()[AnnotationHostResourceVersion] != want.GetAnnotations()[AnnotationHostResourceVersion] ||
		!maps.Equal(cur.GetLabels(), want.GetLabels()) {
		return false
	}
	switch c := cur.(type) {
	case *corev1.ConfigMap:
		w, ok := want.(*corev1.ConfigMap)
		return ok && equality.Semantic.DeepEqual(c.Data, w.Data) &&
			equality.Semantic.DeepEqual(c.BinaryData, w.BinaryData) && immutable(c) == immutable(w)
	case *corev1.Secret:
		w, ok := want.(*corev1.Secret)
		return ok && equality.Semantic.DeepEqual(c.Data, w.Data) && c.Type == w.Type && immutable(c) == immutable(w)
	}
	return false
}

func immutable(o metav1.Object) bool {
	switch v := o.(type) {
	case *corev1.ConfigMap:
		return v.Immutable != nil && *v.Immutable
	case *corev1.Secret:
		return v.Immutable != nil && *v.Immutable
	}
	return false
}

// secretType is a Secret's type ("" for a ConfigMap); it cannot be changed
// in place.
func secretType(o metav1.Object) corev1.SecretType {
	if s, ok := o.(*corev1.Secret); ok {
		return s.Type
	}
	return ""
}
