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
// call, for the few a selector or a name asks for).
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

func (l podNamespaceLister) List(sel labels.Selector) ([]*corev1.Pod, error) {
	objs, err := l.indexer.ByIndex(cache.NamespaceIndex, l.namespace)
	if err != nil {
		return nil, err
	}
	return podsOf(objs, sel), nil
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

func podsOf(objs []any, sel labels.Selector) []*corev1.Pod {
	var out []*corev1.Pod
	for _, o := range objs {
		var lbls map[string]string
		switch p := o.(type) {
		case *corev1.Pod:
			lbls = p.Labels
		case *ForeignPod:
			lbls = p.Labels
		}
		if !sel.Matches(labels.Set(lbls)) {
			continue
		}
		if p, ok := asPod(o); ok {
			out = append(out, p)
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

// foreignPods are the usage of every cached pod leafsync did not place,
// as the leaf's aggregation reads them (pointers into the cache: no copy).
func foreignPods(indexer cache.Indexer) []*leafnode.PodUsage {
	objs := indexer.List()
	out := make([]*leafnode.PodUsage, 0, len(objs))
	for _, o := range objs {
		if f, ok := o.(*ForeignPod); ok {
			out = append(out, &f.PodUsage)
		}
	}
	return out
}
