package member

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leafsync/leafsync/internal/leafnode"
)

// ForeignPod is what a member's cache keeps of a pod leafsync did not
// place: its name, what the leaf's accounting reads (leafnode.PodUsage),
// and no more. Readers act on leafsync's own pods only (podmeta.Ours, by
// their leafsync.io/ labels, which a foreign pod never has: IsLeafsyncPod);
// of another pod they see that it is there, and whether it is going. Most
// of a member's pods are foreign, so it is small: about a fifth of the
// smallest *corev1.Pod (TestCacheFootprint). Cached objects are shared and
// read-only.
type ForeignPod struct {
	Namespace, Name, ResourceVersion string
	Deleted                          *metav1.Time
	leafnode.PodUsage
}

// GetObjectMeta makes a ForeignPod an object the informer's store can key
// and index (meta.Accessor); the cache keeps no ObjectMeta of its own.
func (f *ForeignPod) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: f.Namespace, Name: f.Name, ResourceVersion: f.ResourceVersion}
}

// Pod is the foreign pod as PodLister shows it: what the cache keeps, in a
// new Pod, its requests as the only resources (spec.overhead, what
// resourcehelper.PodRequests adds as it is).
func (f *ForeignPod) Pod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: f.Namespace, Name: f.Name, ResourceVersion: f.ResourceVersion,
			DeletionTimestamp: f.Deleted,
		},
		Spec:   corev1.PodSpec{NodeName: f.NodeName, Overhead: f.Requests},
		Status: corev1.PodStatus{Phase: f.Phase},
	}
}

func foreignPod(p *corev1.Pod) *ForeignPod {
	u := leafnode.UsageOf(p)
	u.Requests = requestShapes.intern(u.Requests)
	u.NodeName, u.Phase = intern(u.NodeName), corev1.PodPhase(intern(string(u.Phase)))
	return &ForeignPod{
		Namespace: intern(p.Namespace), Name: p.Name, ResourceVersion: p.ResourceVersion,
		Deleted: p.DeletionTimestamp, PodUsage: u,
	}
}
