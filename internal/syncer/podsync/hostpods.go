package podsync

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// hostPods is the host's pods bound to a node, from one informer for every
// leaf, indexed by node name: a member's pod sync reads and follows the
// pods of its leaf there. One informer per leaf (a watch with the leaf's
// field selector) cost each member a watch, a listener's buffer and about
// ten goroutines (make bench-scale, docs/benchmarks/scale.md); the host's
// pods on nodes that are no leaf are kept too, as pods are (a host with
// many of them pays for them once, not per member).
type hostPods struct {
	factory  informers.SharedInformerFactory
	informer cache.SharedIndexInformer

	mu sync.RWMutex
	// follow: leaf name → the member whose queue gets its pods' changes.
	follow map[string]*memberSync
}

// byNode indexes host pods by spec.nodeName.
const byNode = "nodeName"

func newHostPods(host kubernetes.Interface) *hostPods {
	h := &hostPods{follow: map[string]*memberSync{}}
	h.factory = informers.NewSharedInformerFactoryWithOptions(host, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "spec.nodeName!=" }),
		informers.WithTransform(func(obj any) (any, error) {
			if p, ok := obj.(*corev1.Pod); ok {
				p.ManagedFields = nil
			}
			return obj, nil
		}))
	h.informer = h.factory.Core().V1().Pods().Informer()
	_ = h.informer.AddIndexers(cache.Indexers{byNode: func(obj any) ([]string, error) {
		if p, ok := obj.(*corev1.Pod); ok {
			return []string{p.Spec.NodeName}, nil
		}
		return nil, nil
	}})
	_, _ = h.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    h.changed,
		UpdateFunc: func(_, o any) { h.changed(o) },
		DeleteFunc: h.changed,
	})
	return h
}

// start runs the informer until ctx ends; stop waits for it.
func (h *hostPods) start(ctx context.Context) { h.factory.Start(ctx.Done()) }
func (h *hostPods) stop()                     { h.factory.Shutdown() }

// HasSynced: the informer has listed the host's pods once.
func (h *hostPods) HasSynced() bool { return h.informer.HasSynced() }

// changed hands a pod's change to the member that follows its node.
func (h *hostPods) changed(obj any) {
	o := obj
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	p, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	h.mu.RLock()
	ms := h.follow[p.Spec.NodeName]
	h.mu.RUnlock()
	if ms != nil {
		ms.queue.Add(key{ms.cluster, p.Namespace, p.Name})
	}
}

// setLeaf routes the changes of the pods on leaf to ms's queue, and no
// longer those on its former leaf ("" for none).
func (h *hostPods) setLeaf(ms *memberSync, former, leaf string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.follow[former] == ms {
		delete(h.follow, former)
	}
	if leaf != "" {
		h.follow[leaf] = ms
	}
}

// on lists the pods bound to the leaf, from the cache (read-only).
func (h *hostPods) on(leaf string) []*corev1.Pod {
	objs, _ := h.informer.GetIndexer().ByIndex(byNode, leaf)
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			out = append(out, p)
		}
	}
	return out
}

// follower is the member following the leaf the host pod namespace/name
// is bound to, nil if none.
func (h *hostPods) follower(namespace, name string) *memberSync {
	p := h.pod(namespace, name)
	if p == nil {
		return nil
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.follow[p.Spec.NodeName]
}

// get is the host pod namespace/name if it is bound to the leaf, from the
// cache (read-only), else nil.
func (h *hostPods) get(namespace, name, leaf string) *corev1.Pod {
	if p := h.pod(namespace, name); p != nil && p.Spec.NodeName == leaf {
		return p
	}
	return nil
}

// pod is the host pod namespace/name from the cache (read-only), nil if
// there is none.
func (h *hostPods) pod(namespace, name string) *corev1.Pod {
	obj, exists, err := h.informer.GetIndexer().GetByKey(namespace + "/" + name)
	if err != nil || !exists {
		return nil
	}
	p, _ := obj.(*corev1.Pod)
	return p
}
