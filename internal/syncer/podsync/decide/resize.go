package decide

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// decideResize adds ResizeMember when the host pod's resources (a resize
// through the host's resize subresource) differ from its member pod's:
// the pod-level resources, or a container's (init containers included)
// resources or resizePolicy — the fields that subresource may change,
// which MemberPod copies unchanged. decideLive calls it for a running
// member pod only (a kubelet does not resize one that is terminating or
// has finished).
func decideResize(in Input, p *Plan) {
	mp := in.Member
	if changed := resizeDiff(mp, Resized(mp, in.Host)); len(changed) > 0 {
		p.add(Action{Type: ResizeMember, MemberUID: mp.UID, Reason: "HostPodResized",
			Message: fmt.Sprintf("resources of %s changed in the host", strings.Join(changed, ", "))})
	}
}

// Resized is the member pod mp with the host pod hp's resizable fields:
// the pod-level resources, and each container's resources and
// resizePolicy, matched by name. A container the host pod lacks keeps its
// own (a spec that differs so is not a resize).
func Resized(mp, hp *corev1.Pod) *corev1.Pod {
	p := mp.DeepCopy()
	p.Spec.Resources = hp.Spec.Resources.DeepCopy()
	host := map[string]*corev1.Container{}
	for _, cs := range [][]corev1.Container{hp.Spec.InitContainers, hp.Spec.Containers} {
		for i := range cs {
			host[cs[i].Name] = &cs[i]
		}
	}
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range cs {
			if h := host[cs[i].Name]; h != nil {
				cs[i].Resources = *h.Resources.DeepCopy()
				cs[i].ResizePolicy = slices.Clone(h.ResizePolicy)
			}
		}
	}
	return p
}

// resizeDiff names what differs between a member pod and its resized
// self: "pod" for the pod-level resources, and each container whose
// resources or resizePolicy differ (quantities compared by value).
func resizeDiff(mp, want *corev1.Pod) []string {
	var changed []string
	if !equality.Semantic.DeepEqual(mp.Spec.Resources, want.Spec.Resources) {
		changed = append(changed, "pod")
	}
	have := slices.Concat(mp.Spec.InitContainers, mp.Spec.Containers)
	for i, w := range slices.Concat(want.Spec.InitContainers, want.Spec.Containers) {
		if !equality.Semantic.DeepEqual(have[i], w) {
			changed = append(changed, "container "+w.Name)
		}
	}
	return changed
}
