package member

import (
	"context"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/syncer/member/membertest"
)

func testNode(name string) corev1.Node {
	return corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:          name,
			Labels:        map[string]string{"kubernetes.io/os": "linux"},
			Annotations:   map[string]string{"node.alpha.kubernetes.io/ttl": "0", "leafsync.io/keep": "x"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}},
		},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}},
			Images:      []corev1.ContainerImage{{Names: []string{"registry.example/big:1"}, SizeBytes: 1 << 30}},
		},
	}
}

func testPod(name string, synced bool) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:     "default",
			Name:          name,
			UID:           types.UID("uid-" + name),
			Labels:        map[string]string{"app": "x"},
			Annotations:   map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{...}", "other": "y"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		},
		Spec: corev1.PodSpec{
			NodeName: "n1",
			Containers: []corev1.Container{{
				Name:      "c",
				Image:     "img",
				Env:       []corev1.EnvVar{{Name: "A", Value: "b"}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
			}},
			Volumes: []corev1.Volume{{Name: "v"}},
		},
		Status: corev1.PodStatus{
			Phase:             corev1.PodRunning,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "c", Ready: true}},
		},
	}
	if synced {
		p.Labels["leafsync.io/host-pod"] = "uid"
	}
	return p
}

func TestTransform(t *testing.T) {
	tr := transform
	in := testNode("n1")
	o, err := tr(&in)
	if err != nil {
		t.Fatal(err)
	}
	n := o.(*cachedNode)
	// Allocatable, not capacity, is what the leaf's aggregation reads.
	if n.Allocatable.Cpu().String() != "4" || n.Labels.Get("kubernetes.io/os") != "linux" || !n.Ready || n.Name != "n1" {
		t.Errorf("node lost what leafsync needs: %+v", n)
	}
	// The nodes of a pool share their labels but the hostname.
	a, b := memberNode(kwokNode(1)), memberNode(kwokNode(2))
	if reflect.ValueOf(a.Labels.Shared).UnsafePointer() != reflect.ValueOf(b.Labels.Shared).UnsafePointer() {
		t.Errorf("equal labels not shared")
	}
	if a.Labels.Get(corev1.LabelHostname) != "node-1" || b.Labels.Get(corev1.LabelHostname) != "node-2" {
		t.Errorf("hostnames %q, %q; want the nodes' own", a.Labels.Get(corev1.LabelHostname), b.Labels.Get(corev1.LabelHostname))
	}

	in2 := testPod("p", false)
	o, err = tr(&in2)
	if err != nil {
		t.Fatal(err)
	}
	p := o.(*ForeignPod)
	if v := p.Pod(); v.Annotations != nil || v.Labels != nil || v.Spec.Containers != nil || v.Spec.Volumes != nil || v.Status.ContainerStatuses != nil {
		t.Errorf("foreign pod not stripped: %+v", v)
	}
	if p.Requests.Cpu().String() != "100m" || p.NodeName != "n1" || p.Phase != corev1.PodRunning || p.Name != "p" || p.Namespace != "default" {
		t.Errorf("foreign pod lost its accounting data or identity: %+v", p)
	}
	// Pods that request the same share one read-only list.
	in3 := testPod("p2", false)
	o, err = tr(&in3)
	if err != nil {
		t.Fatal(err)
	}
	if reflect.ValueOf(p.Requests).UnsafePointer() != reflect.ValueOf(o.(*ForeignPod).Requests).UnsafePointer() {
		t.Errorf("equal requests not shared")
	}

	s := testPod("s", true)
	if _, err := tr(&s); err != nil {
		t.Fatal(err)
	}
	if s.ManagedFields != nil || s.Annotations["kubectl.kubernetes.io/last-applied-configuration"] != "" {
		t.Errorf("synced pod kept managed fields or last-applied: %+v", s)
	}
	if s.Spec.Containers[0].Image != "img" || len(s.Status.ContainerStatuses) != 1 || s.Annotations["other"] != "y" {
		t.Errorf("synced pod lost data the pod syncer mirrors: %+v", s)
	}

	// Tombstones and other types pass through.
	if _, err := tr("not an object"); err != nil {
		t.Fatal(err)
	}
}

// TestRuntimeStartStopNoLeak starts a member runtime against a TLS (HTTP/2)
// API server, lets its informers sync and its prober report, stops it, and
// checks that no goroutine is left behind.
func TestRuntimeStartStopNoLeak(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	api := membertest.NewServer(t, []corev1.Node{testNode("n1"), testNode("n2")}, []corev1.Pod{testPod("p1", false), testPod("p2", true)})
	defer api.Close()

	var mu sync.Mutex
	var observations []hysteresis.Observation
	// The probes' timer runs on a fake clock: the test says when the next
	// probe is due, and can show that none comes after Stop.
	fc := clocktesting.NewFakeClock(time.Now())
	rt, err := New(Options{
		Cluster:       "east",
		RESTConfig:    api.RESTConfig(),
		UserAgent:     "leafsync/test",
		Clock:         fc,
		ProbeInterval: 100 * time.Millisecond,
		Observe: func(obs hysteresis.Observation) time.Duration {
			mu.Lock()
			observations = append(observations, obs)
			mu.Unlock()
			return 0
		},
		Logger: testr.New(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rt.Start(ctx)
	if !rt.WaitForCacheSync(ctx) {
		t.Fatal("caches did not sync")
	}
	if nodes := rt.Nodes(); len(nodes) != 2 {
		t.Fatalf("nodes = %d", len(nodes))
	}
	for _, o := range rt.nodes.indexer.List() {
		if _, ok := o.(*cachedNode); !ok {
			t.Errorf("a node is cached as %T", o)
		}
	}
	pods, err := rt.PodLister().Pods("default").List(labels.Everything())
	if err != nil || len(pods) != 2 {
		t.Fatalf("pods = %d, %v", len(pods), err)
	}
	// Direct calls go through the same transport.
	if _, err := rt.Client().CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("list through client: %v", err)
	}
	if ua := api.UserAgent(); !strings.HasPrefix(ua, "leafsync/test") {
		t.Errorf("user agent = %q", ua)
	}
	// Each probe is real I/O against the test server: wait for it (a
	// liveness bound), and step the clock whenever the prober waits for
	// its next one.
	probes := 0
	err = wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		mu.Lock()
		probes = len(observations)
		mu.Unlock()
		if probes < 3 && fc.HasWaiters() {
			fc.Step(100 * time.Millisecond)
		}
		return probes >= 3, nil
	})
	if err != nil {
		t.Fatalf("only %d probe observations: %v", probes, err)
	}
	mu.Lock()
	for _, o := range observations {
		if !o.OK {
			t.Errorf("probe failed: %+v", o)
		}
	}
	mu.Unlock()
	if api.OpenWatches() != 2 {
		t.Errorf("open watches = %d, want 2", api.OpenWatches())
	}

	rt.Stop()
	rt.Stop() // idempotent
	select {
	case <-rt.Done():
	default:
		t.Error("Done not closed after Stop")
	}
	// The server sees the watches end.
	for i := 0; api.OpenWatches() != 0 && i < 200; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if api.OpenWatches() != 0 {
		t.Errorf("watches still open after Stop: %d", api.OpenWatches())
	}
	// Stop returned once the prober did: nothing waits for the next probe,
	// and a probe interval passing brings none.
	mu.Lock()
	n := len(observations)
	mu.Unlock()
	if fc.HasWaiters() {
		t.Error("the prober still waits for its next probe after Stop")
	}
	fc.Step(time.Hour)
	mu.Lock()
	if len(observations) != n {
		t.Error("prober still running after Stop")
	}
	mu.Unlock()
	api.Close()
}

// TestRuntimeInformersNeedNoContextGoroutine: informers started from a
// channel (factory.Start) run on a context made from it, and every context
// derived from that costs a goroutine (context.propagateCancel), per
// informer and member; started with the runtime's own context, none.
func TestRuntimeInformersNeedNoContextGoroutine(t *testing.T) {
	api := membertest.NewServer(t, []corev1.Node{testNode("n1")}, []corev1.Pod{testPod("p1", false)})
	rt, err := New(Options{Cluster: "east", RESTConfig: api.RESTConfig(), Logger: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	before := contextGoroutines()
	rt.Start(ctx)
	if !rt.WaitForCacheSync(ctx) {
		t.Fatal("caches did not sync")
	}
	if n := contextGoroutines() - before; n > 0 {
		t.Errorf("a started runtime adds %d goroutines that only wait to pass a cancel on, want none", n)
	}
}

func contextGoroutines() int {
	buf := make([]byte, 1<<20)
	n := 0
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "context.(*cancelCtx).propagateCancel") {
			n++
		}
	}
	return n
}
