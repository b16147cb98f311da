package member

import (
	"maps"
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	nodeutil "k8s.io/component-helpers/node/util"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/leafsync/leafsync/internal/leafnode"
)

// What leafsync's readers read of a member's cached objects, in one place:
// a reader that starts to read another field adds it here, or the
// transform may strip it unnoticed.

// nodeRead is what the leaf's aggregation (internal/leafnode Compute) and
// the verifier's capacity check read of a member node.
type nodeRead struct {
	Name                                          string
	Labels                                        map[string]string // node selector, topology, OS and arch labels
	Unschedulable                                 bool
	Allocatable                                   corev1.ResourceList
	ConditionTrue                                 map[corev1.NodeConditionType]bool // Ready, pressures
	KubeletVersion, OperatingSystem, Architecture string
	DeclaredFeatures                              []string
}

// readConditions are the node conditions readers ask about.
var readConditions = []corev1.NodeConditionType{corev1.NodeReady, corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure}

// readNode is what readers read of the node as the API serves it.
func readNode(n *corev1.Node) nodeRead {
	r := nodeRead{Name: n.Name, Labels: n.Labels, Unschedulable: n.Spec.Unschedulable, Allocatable: n.Status.Allocatable,
		ConditionTrue:  map[corev1.NodeConditionType]bool{},
		KubeletVersion: n.Status.NodeInfo.KubeletVersion, OperatingSystem: n.Status.NodeInfo.OperatingSystem,
		Architecture: n.Status.NodeInfo.Architecture, DeclaredFeatures: n.Status.DeclaredFeatures}
	for _, typ := range readConditions {
		_, c := nodeutil.GetNodeCondition(&n.Status, typ)
		r.ConditionTrue[typ] = c != nil && c.Status == corev1.ConditionTrue
	}
	return r
}

// readMemberNode is what readers read of the node as the cache keeps it:
// its labels as a selector sees them (each of the node's keys, and a key
// it lacks).
func readMemberNode(n *leafnode.MemberNode, keys []string) nodeRead {
	r := nodeRead{Name: n.Name, Labels: map[string]string{}, Unschedulable: n.Unschedulable, Allocatable: n.Allocatable,
		ConditionTrue:  map[corev1.NodeConditionType]bool{},
		KubeletVersion: n.KubeletVersion, OperatingSystem: n.OperatingSystem, Architecture: n.Architecture,
		DeclaredFeatures: n.DeclaredFeatures}
	for _, k := range append(keys, "absent") {
		if v, ok := n.Labels.Lookup(k); ok && n.Labels.Has(k) && n.Labels.Get(k) == v {
			r.Labels[k] = v
		}
	}
	for _, typ := range readConditions {
		r.ConditionTrue[typ] = n.ConditionTrue(typ)
	}
	return r
}

// foreignRead is what readers read of a pod leafsync did not place: the
// leaf's aggregation (node, phase, requests), and pod sync, the kubelet
// API and event mirroring, which look pods up by name through PodLister,
// tell a foreign pod from leafsync's by its leafsync.io/ labels
// (podmeta.Ours) and read no more of it than that it is there, and
// whether it is going (its UID, other labels, annotations and spec are
// read of leafsync's pods only).
type foreignRead struct {
	Namespace, Name, ResourceVersion string
	Deleted                          *metav1.Time
	Labels                           map[string]string // leafsync.io/ ones: none
	NodeName                         string
	Phase                            corev1.PodPhase
	Requests                         corev1.ResourceList
}

func readForeign(p *corev1.Pod) foreignRead {
	return foreignRead{Namespace: p.Namespace, Name: p.Name, ResourceVersion: p.ResourceVersion,
		Deleted: p.DeletionTimestamp, Labels: keepLeafsyncKeys(p.Labels),
		NodeName: p.Spec.NodeName, Phase: p.Status.Phase,
		Requests: resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})}
}

func TestTransformKeepsWhatReadersRead(t *testing.T) {
	node := kwokNode(1)
	node.Labels["topology.kubernetes.io/zone"] = "z1"
	node.Spec.Unschedulable = true
	node.Status.NodeInfo.KubeletVersion = "v1.36.3"
	node.Status.DeclaredFeatures = []string{"InPlacePodResize"}
	node.Status.Conditions[2].Status = corev1.ConditionTrue // disk pressure
	want := readNode(node.DeepCopy())
	o, err := transform(node)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := o.(*cachedNode)
	if !ok {
		t.Fatalf("a node is cached as %T", o)
	}
	if got := readMemberNode(&c.MemberNode, slices.Collect(maps.Keys(node.Labels))); !equality.Semantic.DeepEqual(want, got) {
		t.Errorf("a node's cache entry lost what the leaf reads:\n got %+v\nwant %+v", got, want)
	}
	if m, err := meta.Accessor(o); err != nil || m.GetName() != node.Name || m.GetResourceVersion() != node.ResourceVersion {
		// The informer tells a change from a resync by the version.
		t.Errorf("a cached node's metadata: %v, %v; want its name and resource version", m, err)
	}

	pod := kwokPod(1, "node-1")
	pod.Labels = map[string]string{"app": "web"}
	pod.Annotations = map[string]string{"note": "n"}
	pod.DeletionTimestamp = &metav1.Time{Time: pod.CreationTimestamp.Add(1)}
	pod.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}}}
	pod.Spec.Overhead = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Mi")}
	wantPod := readForeign(pod.DeepCopy())
	o, err = transform(pod)
	if err != nil {
		t.Fatal(err)
	}
	f, ok := o.(*ForeignPod)
	if !ok {
		t.Fatalf("a foreign pod is cached as %T", o)
	}
	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: syncedNamespace})
	if err := store.Add(f); err != nil {
		t.Fatal(err)
	}
	got, err := podLister{store}.Pods(pod.Namespace).Get(pod.Name)
	if err != nil {
		t.Fatal(err)
	}
	if r := readForeign(got); !equality.Semantic.DeepEqual(wantPod, r) {
		t.Errorf("a foreign pod, as PodLister shows it, lost what readers read:\n got %+v\nwant %+v", r, wantPod)
	}
	if !equality.Semantic.DeepEqual(wantPod.Requests, f.Requests) || f.NodeName != wantPod.NodeName || f.Phase != wantPod.Phase {
		t.Errorf("a foreign pod's usage is not the pod's: %+v, want requests %v", f.PodUsage, wantPod.Requests)
	}
}

// PodLister shows synced and foreign pods alike, by name, namespace and
// label selector, and the leaf's aggregation gets the foreign ones only.
func TestPodListerShowsForeignPods(t *testing.T) {
	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: syncedNamespace})
	var usage leafnode.Usage
	for _, p := range []corev1.Pod{testPod("synced", true), testPod("foreign", false)} {
		o, err := transform(&p)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Add(o); err != nil {
			t.Fatal(err)
		}
		usage.Update(nil, foreignUsage(o))
	}
	l := podLister{store}
	all, _ := l.List(labels.Everything())
	inNS, _ := l.Pods("default").List(labels.Everything())
	ours, _ := l.Pods("default").List(labels.SelectorFromSet(labels.Set{"leafsync.io/host-pod": "uid"}))
	if len(all) != 2 || len(inNS) != 2 || len(ours) != 1 || ours[0].Name != "synced" {
		t.Errorf("listed %d pods, %d in the namespace, selected %v; want 2, 2, [synced]", len(all), len(inNS), ours)
	}
	if p, err := l.Pods("default").Get("foreign"); err != nil || p.Spec.NodeName != "n1" {
		t.Errorf("Get(foreign) = %v, %v", p, err)
	}
	if _, err := l.Pods("other").Get("foreign"); !apierrors.IsNotFound(err) {
		t.Errorf("Get in another namespace: %v, want NotFound", err)
	}
	if indexed, _ := store.ByIndex(cache.NamespaceIndex, "default"); len(indexed) != 1 {
		t.Errorf("%d pods in the namespace index, want the synced one only", len(indexed))
	}
	u := usage.Snapshot()
	if want := (leafnode.NodeSum{{Name: corev1.ResourceCPU, Milli: 100}, {Name: corev1.ResourcePods, Milli: 1000}}); len(u) != 1 || !reflect.DeepEqual(u["n1"], want) {
		t.Errorf("foreign usage %v, want the foreign pod's only", u)
	}
}
