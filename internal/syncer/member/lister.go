package member

import (
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/leafsync/leafsync/internal/leafnode"
)

// podLister lists a member's cached pods as Pods: the pods leafsync synced
// as they are, foreign ones as ForeignPod.Pod shows them (made on each
// call, for the few a selector or a name asks for). A foreign pod has no
// labels, so only a selector that takes a pod without labels lists it.
type podLister struct{ indexer cache.Indexer }

func (l podLister) List(sel labels.Selector) ([]*corev1.Pod, error) {
	return podsOf(l.indexer.List(), sel), nil
}

func (l podLister) Pods(namespace string) corelisters.PodNamespaceLister {
	return podNamespaceLister{l.indexer, namespace}
}

type podNamespaceLister struct {
	indexer   cache.Indexer
	namespace string
}

// List finds the synced pods of the namespace by its index, and scans for
// foreign ones only when the selector could take them (not the selectors
// of leafsync's own labels pod sync lists with).
func (l podNamespaceLister) List(sel labels.Selector) ([]*corev1.Pod, error) {
	objs, err := l.indexer.ByIndex(cache.NamespaceIndex, l.namespace)
	if err != nil {
		return nil, err
	}
	pods := podsOf(objs, sel)
	if sel.Matches(labels.Set(nil)) {
		for _, o := range l.indexer.List() {
			if f, ok := o.(*ForeignPod); ok && f.Namespace == l.namespace {
				pods = append(pods, f.Pod())
			}
		}
	}
	return pods, nil
}

func (l podNamespaceLister) Get(name string) (*corev1.Pod, error) {
	obj, exists, err := l.indexer.GetByKey(l.namespace + "/" + name)
	if err != nil {
		return nil, err
	}
	if p, ok := asPod(obj); exists && ok {
		return p, nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("pod"), name)
}

// syncedNamespace indexes the pods leafsync synced by namespace. Foreign
// pods, most of a member, are not indexed: an index entry would cost each
// a fifth of its cache entry again, for lookups only pod sync makes, of its
// own pods.
func syncedNamespace(obj any) ([]string, error) {
	if p, ok := obj.(*corev1.Pod); ok {
		return []string{p.Namespace}, nil
	}
	return nil, nil
}

// podsOf shows the objs sel takes as Pods.
func podsOf(objs []any, sel labels.Selector) []*corev1.Pod {
	var out []*corev1.Pod
	for _, o := range objs {
		switch p := o.(type) {
		case *corev1.Pod:
			if sel.Matches(labels.Set(p.Labels)) {
				out = append(out, p)
			}
		case *ForeignPod:
			if sel.Matches(labels.Set(nil)) {
				out = append(out, p.Pod())
			}
		}
	}
	return out
}

func asPod(obj any) (*corev1.Pod, bool) {
	switch p := obj.(type) {
	case *corev1.Pod:
		return p, true
	case *ForeignPod:
		return p.Pod(), true
	}
	return nil, false
}

// foreignUsage is the usage of a pod of the cache (or of its last state,
// deleted) if leafsync did not place it, else nil.
func foreignUsage(obj any) *leafnode.PodUsage {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if f, ok := obj.(*ForeignPod); ok {
		return &f.PodUsage
	}
	return nil
}

// entries are what read shows of each of the store's objects of type T:
// pointers into the cache, no copy.
func entries[T, R any](store cache.Store, read func(*T) *R) []*R {
	objs := store.List()
	out := make([]*R, 0, len(objs))
	for _, o := range objs {
		if e, ok := o.(*T); ok {
			out = append(out, read(e))
		}
	}
	return out
}
