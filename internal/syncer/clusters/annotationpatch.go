package clusters

import (
	"encoding/json"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// AnnotationPatch is a merge patch of one writer's annotations on the
// object with uid (a nil value removes the annotation). It is built from
// what to write, not diffed against the object as read: a cache that lags
// another writer's change neither fails the write (no resourceVersion is
// sent) nor loses a removal. The UID makes it fail on an object deleted
// and created again meanwhile (a UID is immutable).
func AnnotationPatch(uid types.UID, annotations map[string]*string) (client.Patch, error) {
	var p struct {
		Metadata struct {
			UID         types.UID          `json:"uid"`
			Annotations map[string]*string `json:"annotations"`
		} `json:"metadata"`
	}
	p.Metadata.UID, p.Metadata.Annotations = uid, annotations
	data, err := json.Marshal(p)
	return client.RawPatch(types.MergePatchType, data), err
}
