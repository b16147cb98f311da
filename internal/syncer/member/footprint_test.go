package member

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/leafsync/leafsync/internal/syncer/member/membertest"
)

// kwokNode is a member node as make bench-scale's members serve it
// (test/harness AddNodes, made Ready by kwok's node stages).
func kwokNode(i int) *corev1.Node {
	name := fmt.Sprintf("node-%d", i)
	alloc := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"),
		corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
	}
	now := metav1.NewTime(time.Unix(1764000000, 0))
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, LastHeartbeatTime: now, LastTransitionTime: now, Reason: reason, Message: "kwok " + reason}
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, UID: types.UID(fmt.Sprintf("7c1e58a3-0d6b-4a3e-9c55-%012d", i)), ResourceVersion: fmt.Sprint(100000 + i),
			CreationTimestamp: now,
			Labels: map[string]string{"type": "kwok", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
				"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64", "kubernetes.io/arch": "amd64", "node.kubernetes.io/exclude-from-external-load-balancers": ""},
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kwok", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
				Time: &now, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(string(make([]byte, 600)))}},
		},
		Spec: corev1.NodeSpec{PodCIDR: "10.0.1.0/24", PodCIDRs: []string{"10.0.1.0/24"}},
		Status: corev1.NodeStatus{
			Capacity: alloc.DeepCopy(), Allocatable: alloc.DeepCopy(),
			Phase: corev1.NodeRunning,
			Conditions: []corev1.NodeCondition{
				cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady"),
				cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory"),
				cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure"),
				cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID"),
				cond(corev1.NodeNetworkUnavailable, corev1.ConditionFalse, "RouteCreated"),
			},
			Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}, {Type: corev1.NodeHostName, Address: name}},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
			//lint:ignore SA1019 kwok's nodes still report it, and the footprint is of what members serve
			NodeInfo: corev1.NodeSystemInfo{Architecture: "amd64", OperatingSystem: "linux", KubeletVersion: "fake", KubeProxyVersion: "fake",
				ContainerRuntimeVersion: "kwok-v0.8.0", OSImage: "", KernelVersion: "", MachineID: "", SystemUUID: "", BootID: ""},
		},
	}
}

// kwokPod is a member pod as make bench-scale's members serve it (test/harness
// AddPods: one container requesting 10m and 16Mi, bound to a node, Running by
// kwok's pod stages, with what admission adds).
func kwokPod(i int, node string) *corev1.Pod {
	name := fmt.Sprintf("pod-%d", i)
	now := metav1.NewTime(time.Unix(1764000000, 0))
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "default", UID: types.UID(fmt.Sprintf("0b5a6c1e-2f3d-4e5f-8a9b-%012d", i)), ResourceVersion: fmt.Sprint(200000 + i),
			CreationTimestamp: now,
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "scalebench", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
				Time: &now, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(string(make([]byte, 400)))}},
		},
		Spec: corev1.PodSpec{
			NodeName: node, TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.example/app:1", ImagePullPolicy: corev1.PullIfNotPresent,
				TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}},
				VolumeMounts: []corev1.VolumeMount{{Name: "kube-api-access-x", ReadOnly: true, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}},
			}},
			Volumes:            []corev1.Volume{{Name: "kube-api-access-x", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}}},
			RestartPolicy:      corev1.RestartPolicyAlways,
			DNSPolicy:          corev1.DNSClusterFirst,
			ServiceAccountName: "default", SchedulerName: "default-scheduler", EnableServiceLinks: ptr.To(true),
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
			},
			PreemptionPolicy: ptr.To(corev1.PreemptLowerPriority), Priority: ptr.To[int32](0),
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, QOSClass: corev1.PodQOSBurstable, HostIP: "10.0.0.1", PodIP: "10.0.1.7",
			HostIPs: []corev1.HostIP{{IP: "10.0.0.1"}}, PodIPs: []corev1.PodIP{{IP: "10.0.1.7"}}, StartTime: &now,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, Image: "registry.example/app:1", ImageID: "", Started: ptr.To(true),
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}},
		},
	}
}

// decoded is obj as a member informer gets it: decoded from the member's
// protobuf, every string a heap allocation of its own (a literal in a
// test object would cost the cache nothing).
func decoded(t *testing.T, obj any) any {
	t.Helper()
	type message interface {
		Marshal() ([]byte, error)
		Unmarshal([]byte) error
	}
	m, ok := obj.(message)
	if !ok {
		t.Fatalf("%T is not a protobuf message", obj)
	}
	data, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	out := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(message)
	if err := out.Unmarshal(data); err != nil {
		t.Fatal(err)
	}
	return out
}

// retainedPerObject is the heap each object keeps once decoded,
// transformed and stored in an indexer like the informer's (syncedNamespace index).
func retainedPerObject(t *testing.T, n int, mk func(i int) any) float64 {
	t.Helper()
	if _, err := transform(mk(n)); err != nil { // what is shared (request shapes) is not the objects'
		t.Fatal(err)
	}
	store := cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: syncedNamespace})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := 0; i < n; i++ {
		o, err := transform(decoded(t, mk(i)))
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(store)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}

// TestCacheFootprint measures what a member's cache keeps per node and per
// pod of make bench-scale's shapes (a member pod leafsync did not place,
// the bulk of a member), and holds it to the budget that keeps a member of
// 200 nodes and 2,000 pods well under 2 MiB.
func TestCacheFootprint(t *testing.T) {
	const n = 20000
	node := retainedPerObject(t, n, func(i int) any { return kwokNode(i) })
	pod := retainedPerObject(t, n, func(i int) any { return kwokPod(i, fmt.Sprintf("node-%d", i%200)) })
	t.Logf("retained in a member cache: %.0f bytes a node, %.0f bytes a foreign pod; a member of 200 nodes and 2,000 pods: %.2f MiB",
		node, pod, (200*node+2000*pod)/(1<<20))
	if pod > podBudget || node > nodeBudget {
		t.Errorf("over budget: a node %.0f bytes (budget %d), a foreign pod %.0f bytes (budget %d)", node, nodeBudget, pod, podBudget)
	}
}

// Budgets per cached object (TestCacheFootprint).
// Measured as decoded: 1,616 and 246 bytes before strings were interned.
const (
	podBudget  = 240 // 1,505 before the ForeignPod
	nodeBudget = 320 // 3,595 before nodes kept only what the leaf reads, 1,378 as a stripped *corev1.Node
)

// BenchmarkRuntimeFootprint starts member Runtimes, each against a test
// API server of make bench-scale's member shape (200 nodes, 2,000 pods),
// and reports the heap and goroutines each adds once its caches have
// synced: what a registration costs leafsync beyond its cache entries
// (TestCacheFootprint), with the event handlers engaged controllers keep
// on its informers. The servers run in this process: their objects
// are allocated before the measure starts, but their side of each
// connection counts; the heap profile written to $HEAP_PROFILE, if set,
// while the runtimes run tells the two apart (and $HEAP_PROFILE.goroutines
// which goroutines each member adds):
//
//	HEAP_PROFILE=/tmp/heap.out go test -run XXX -bench RuntimeFootprint -benchtime 1x -memprofilerate 1 ./internal/syncer/member/
//	go tool pprof -top -inuse_space /tmp/heap.out
func BenchmarkRuntimeFootprint(b *testing.B) {
	const members = 10
	servers := make([]*membertest.Server, members)
	for i := range servers {
		nodes := make([]corev1.Node, 200)
		for j := range nodes {
			nodes[j] = *kwokNode(j)
			nodes[j].ManagedFields = nil // the test server speaks JSON; their raw bytes are not
		}
		pods := make([]corev1.Pod, 2000)
		for j := range pods {
			pods[j] = *kwokPod(j, fmt.Sprintf("node-%d", j%200))
			pods[j].ManagedFields = nil
		}
		servers[i] = membertest.NewServer(b, nodes, pods)
	}
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&before)
		goroutines := runtime.NumGoroutine()
		ctx, cancel := context.WithCancel(context.Background())
		runtimes := make([]*Runtime, members)
		for i, s := range servers {
			rt, err := New(Options{Cluster: fmt.Sprintf("m%d", i), RESTConfig: s.RESTConfig(), Logger: logr.Discard()})
			if err != nil {
				b.Fatal(err)
			}
			rt.Start(ctx)
			runtimes[i] = rt
		}
		for _, rt := range runtimes {
			if !rt.WaitForCacheSync(ctx) {
				b.Fatal("caches did not sync")
			}
			// The handlers engaged controllers keep: leaves' on nodes
			// and pods, podsync's on pods.
			for _, inf := range []*Informer{rt.NodeInformer(), rt.Pods().Informer(), rt.Pods().Informer()} {
				if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{}); err != nil {
					b.Fatal(err)
				}
			}
		}
		time.Sleep(time.Second) // the list's buffers go, the watches settle, the handlers have their initial lists
		runtime.GC()
		runtime.GC() // what sync.Pools hold survives one
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/members, "heap-B/member")
		b.ReportMetric(float64(runtime.NumGoroutine()-goroutines)/members, "goroutines/member")
		if path := os.Getenv("HEAP_PROFILE"); path != "" {
			writeProfile(b, "heap", path)
			writeProfile(b, "goroutine", path+".goroutines")
		}
		cancel()
		for _, rt := range runtimes {
			rt.Stop()
		}
	}
}

func writeProfile(b *testing.B, name, path string) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}
