package translate

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
)

// Which member pod labels and annotations came from the host.
//
// An update must remove a key the host pod lost, but never one the member
// side added (admission webhooks and member controllers annotate pods).
// Managed fields would tell the two apart, but the caches strip them, and
// the member pod was created (an Update-operation manager) before any
// apply, so server-side apply would not remove a created key either. So
// the member pod itself carries the record: AnnotationHostLabels and
// AnnotationHostAnnotations list the host keys leafsync wrote, set at
// create and rewritten by every update. It lives with the object it
// describes (no state elsewhere to lose or to drift), and a pod made by
// an older leafsync without it only loses no key until its first update
// writes the record.

// memberLabelKeys are the labels leafsync sets on a member pod itself; a
// host label of the same key is overridden, so it is not a host key.
var memberLabelKeys = map[string]bool{
	podmeta.LabelManaged: true, podmeta.LabelCluster: true, podmeta.LabelHost: true, podmeta.LabelHostUID: true,
}

// memberAnnotationKeys are the annotations leafsync sets on a member pod
// itself, and the host annotations it never copies.
var memberAnnotationKeys = map[string]bool{
	podmeta.AnnotationLeaf: true, podmeta.AnnotationSpecHash: true, podmeta.AnnotationOwner: true,
	podmeta.AnnotationHostGeneration: true, podmeta.AnnotationHostLabels: true, podmeta.AnnotationHostAnnotations: true,
	corev1.LastAppliedConfigAnnotation: true, podmeta.AnnotationMemberUID: true,
}

// hostLabels and hostAnnotations are the host pod's labels and annotations
// a member pod carries.
func hostLabels(hp *corev1.Pod) map[string]string {
	return without(hp.Labels, memberLabelKeys)
}

func hostAnnotations(hp *corev1.Pod) map[string]string {
	return without(hp.Annotations, memberAnnotationKeys)
}

func without(m map[string]string, drop map[string]bool) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		if !drop[k] {
			out[k] = v
		}
	}
	return out
}

// hostRecord is what a member pod built from hp now must carry besides the
// host's own keys: the record of those keys and the host generation.
func hostRecord(hp *corev1.Pod, labels, annotations map[string]string) map[string]string {
	rec := map[string]string{
		podmeta.AnnotationHostLabels:      keyList(labels),
		podmeta.AnnotationHostAnnotations: keyList(annotations),
	}
	if hp.Generation > 0 {
		rec[podmeta.AnnotationHostGeneration] = strconv.FormatInt(hp.Generation, 10)
	}
	return rec
}

// keyList is the record's form: sorted keys, comma-separated (a label or
// annotation key never holds a comma).
func keyList(m map[string]string) string {
	return strings.Join(slices.Sorted(maps.Keys(m)), ",")
}

// recordedKeys reads a key list from a member pod's annotation (none when
// the pod has no record).
func recordedKeys(mp *corev1.Pod, annotation string) []string {
	v := mp.Annotations[annotation]
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// Update is what a member pod must get to show the host pod as it is now:
// the fields a pod update may change, translated as MemberSpec does.
// Container resources (the resize subresource) and ephemeral containers
// (their own subresource) are not part of it.
type Update struct {
	// Labels and Annotations to set; a nil value removes the key.
	Labels, Annotations map[string]*string
	// Images and InitImages map a container's name to its new image.
	Images, InitImages map[string]string
	// ActiveDeadlineSeconds is the new deadline (nil: unchanged).
	ActiveDeadlineSeconds *int64
	// TerminationGracePeriodSeconds is the new grace (nil: unchanged); the
	// API lets only a negative one become 1.
	TerminationGracePeriodSeconds *int64
	// Tolerations is the member pod's whole new list (nil: unchanged):
	// its own, with the host's tolerationSeconds, plus the host's new ones
	// (the API lets tolerations be added, never removed).
	Tolerations []corev1.Toleration
}

// MemberUpdate compares a member pod with the host pod it stands for and
// returns what the member pod must get (nil: nothing), as MemberPod would
// build it now: the host's labels and annotations (a key the host removed
// goes, by the record, one the member side added stays), the record, the
// host generation and the spec hash, the containers' images,
// activeDeadlineSeconds and the tolerations.
func MemberUpdate(hp, mp *corev1.Pod) *Update {
	u := &Update{Labels: map[string]*string{}, Annotations: map[string]*string{}, Images: map[string]string{}, InitImages: map[string]string{}}
	labels, annotations := hostLabels(hp), hostAnnotations(hp)
	diffKeys(u.Labels, labels, mp.Labels, recordedKeys(mp, podmeta.AnnotationHostLabels))
	diffKeys(u.Annotations, annotations, mp.Annotations, recordedKeys(mp, podmeta.AnnotationHostAnnotations))
	spec := MemberSpec(hp)
	own := hostRecord(hp, labels, annotations)
	own[podmeta.AnnotationSpecHash] = specHash(&spec)
	diffKeys(u.Annotations, own, mp.Annotations, nil)

	diffImages(u.Images, spec.Containers, mp.Spec.Containers)
	diffImages(u.InitImages, spec.InitContainers, mp.Spec.InitContainers)
	if want, have := spec.ActiveDeadlineSeconds, mp.Spec.ActiveDeadlineSeconds; want != nil && (have == nil || *want != *have) {
		u.ActiveDeadlineSeconds = want
	}
	if want, have := spec.TerminationGracePeriodSeconds, mp.Spec.TerminationGracePeriodSeconds; want != nil && have != nil && *have < 0 && *want != *have {
		u.TerminationGracePeriodSeconds = want
	}
	u.Tolerations = mergeTolerations(spec.Tolerations, mp.Spec.Tolerations)
	if len(u.Labels)+len(u.Annotations)+len(u.Images)+len(u.InitImages) == 0 &&
		u.ActiveDeadlineSeconds == nil && u.TerminationGracePeriodSeconds == nil && u.Tolerations == nil {
		return nil
	}
	return u
}

// diffKeys adds to out the keys of want that have lacks or holds with
// another value, and a removal for each recorded key want no longer has.
func diffKeys(out map[string]*string, want, have map[string]string, recorded []string) {
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			out[k] = &v
		}
	}
	for _, k := range recorded {
		_, wanted := want[k]
		_, present := have[k]
		if !wanted && present {
			out[k] = nil
		}
	}
}

func diffImages(out map[string]string, want, have []corev1.Container) {
	for _, w := range want {
		for _, h := range have {
			if h.Name == w.Name && h.Image != w.Image {
				out[w.Name] = w.Image
			}
		}
	}
}

// mergeTolerations is the member's tolerations with the host's (want)
// merged in, or nil when that changes nothing. A member toleration equal
// to a host one but for tolerationSeconds takes the host's seconds; a host
// toleration the member lacks is added; the member's others stay.
func mergeTolerations(want, have []corev1.Toleration) []corev1.Toleration {
	out := slices.Clone(have)
	changed := false
	for _, w := range want {
		found := false
		for i := range out {
			if sameButSeconds(out[i], w) {
				found = true
				if !equality.Semantic.DeepEqual(out[i].TolerationSeconds, w.TolerationSeconds) {
					out[i].TolerationSeconds, changed = w.TolerationSeconds, true
				}
				break
			}
		}
		if !found {
			out, changed = append(out, w), true
		}
	}
	if !changed {
		return nil
	}
	return out
}

func sameButSeconds(a, b corev1.Toleration) bool {
	a.TolerationSeconds, b.TolerationSeconds = nil, nil
	return a == b
}

// String is the patch without its preconditions (logs, and plans compared
// as text).
func (u *Update) String() string {
	data, _ := json.Marshal(u.patch(map[string]any{}))
	return string(data)
}

// Patch is the update as a strategic merge patch of the member pod, with
// its UID and resourceVersion as preconditions: a write decided from a
// stale cache is refused (a conflict), never laid over a newer pod.
func (u *Update) Patch(uid types.UID, resourceVersion string) ([]byte, error) {
	return json.Marshal(u.patch(map[string]any{"uid": uid, "resourceVersion": resourceVersion}))
}

func (u *Update) patch(meta map[string]any) map[string]any {
	if len(u.Labels) > 0 {
		meta["labels"] = u.Labels
	}
	if len(u.Annotations) > 0 {
		meta["annotations"] = u.Annotations
	}
	spec := map[string]any{}
	if len(u.Images) > 0 {
		spec["containers"] = imagePatch(u.Images)
	}
	if len(u.InitImages) > 0 {
		spec["initContainers"] = imagePatch(u.InitImages)
	}
	if u.ActiveDeadlineSeconds != nil {
		spec["activeDeadlineSeconds"] = *u.ActiveDeadlineSeconds
	}
	if u.TerminationGracePeriodSeconds != nil {
		spec["terminationGracePeriodSeconds"] = *u.TerminationGracePeriodSeconds
	}
	if u.Tolerations != nil {
		spec["tolerations"] = u.Tolerations // not a merge list: replaced whole
	}
	patch := map[string]any{"metadata": meta}
	if len(spec) > 0 {
		patch["spec"] = spec
	}
	return patch
}

// imagePatch is containers merged by name (their patch merge key), each
// with its new image only.
func imagePatch(images map[string]string) []map[string]string {
	out := make([]map[string]string, 0, len(images))
	for _, name := range slices.Sorted(maps.Keys(images)) {
		out = append(out, map[string]string{"name": name, "image": images[name]})
	}
	return out
}
