// Command vk-baseline is the virtual-kubelet baseline of leafsync's flap
// benchmark: stock virtual-kubelet v1.13.0 node and pod controllers (the
// architecture Liqo, Admiralty and tensile-kube build on) with a thin
// pass-through provider to one member cluster. It keeps VK's behaviour on
// purpose: no hysteresis, VK's Lease and status intervals.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path"
	"strings"
	"syscall"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	"github.com/virtual-kubelet/virtual-kubelet/log/klogv2"
	"github.com/virtual-kubelet/virtual-kubelet/node"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

const (
	// kubeletVersion follows VK's own "<k8s>-vk-<vk>" convention.
	kubeletVersion = "v1.36.3-vk-v1.13.0"
)

// listFlag is a repeatable flag that also takes comma-separated lists; the
// first use replaces the default.
type listFlag struct {
	values []string
	set    bool
}

func (l *listFlag) String() string { return strings.Join(l.values, ",") }

func (l *listFlag) Set(s string) error {
	if !l.set {
		l.values, l.set = nil, true
	}
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			l.values = append(l.values, v)
		}
	}
	return nil
}

type options struct {
	kubeconfig, memberKubeconfig, nodeName string
	leaseDuration, leaseRenewInterval      time.Duration
	pingTimeout                            time.Duration
	pingInterval, statusInterval           time.Duration
	informerResync                         time.Duration
	taint                                  string
	labels                                 listFlag
	healthAddr                             string
	workers                                int
}

func main() {
	o := options{labels: listFlag{values: []string{"type=virtual-kubelet", contestantLabel + "=" + contestant}}}
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "host cluster kubeconfig file (required)")
	flag.StringVar(&o.memberKubeconfig, "member-kubeconfig", "", "member cluster kubeconfig file (required)")
	flag.StringVar(&o.nodeName, "node-name", "", "name of the virtual Node created in the host (required)")
	flag.DurationVar(&o.leaseDuration, "lease-duration", node.DefaultLeaseDuration*time.Second, "node Lease duration (whole seconds)")
	flag.DurationVar(&o.leaseRenewInterval, "lease-renew-interval", 10*time.Second, "node Lease renew interval")
	flag.DurationVar(&o.pingTimeout, "ping-timeout", 0, "timeout of one Ping of the member (0: none, VK's default)")
	flag.DurationVar(&o.pingInterval, "ping-interval", node.DefaultPingInterval, "how often the member is pinged (VK's default)")
	flag.DurationVar(&o.informerResync, "informer-resync", time.Minute, "resync of the informers (nodeutil.NewNode's default InformerResyncPeriod); member pods are re-notified to VK at each")
	flag.DurationVar(&o.statusInterval, "status-update-interval", node.DefaultStatusUpdateInterval, "how often the Node status is written (VK's default)")
	flag.StringVar(&o.taint, "taint", "leafsync.io/leaf=true:NoSchedule", "taint of the Node, key[=value]:Effect (empty: none)")
	flag.Var(&o.labels, "label", "Node label key=value; repeated or comma-separated")
	flag.StringVar(&o.healthAddr, "health-addr", "", "if set, serve GET /healthz (200) on this address")
	flag.IntVar(&o.workers, "pod-sync-workers", 4, "workers of VK's pod controller")
	klog.InitFlags(flag.CommandLine)
	flag.Parse()
	log.L = klogv2.New(nil)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		klog.ErrorS(err, "vk-baseline failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.Info("vk-baseline stopped")
	klog.Flush()
}

func run(ctx context.Context, o options) error {
	if o.kubeconfig == "" || o.memberKubeconfig == "" || o.nodeName == "" {
		return errors.New("--kubeconfig, --member-kubeconfig and --node-name are required")
	}
	nodeObj, err := newNode(o)
	if err != nil {
		return err
	}
	host, err := clientset(o.kubeconfig)
	if err != nil {
		return fmt.Errorf("host: %w", err)
	}
	member, err := clientset(o.memberKubeconfig)
	if err != nil {
		return fmt.Errorf("member: %w", err)
	}
	if o.leaseDuration < time.Second || o.leaseDuration%time.Second != 0 {
		return fmt.Errorf("--lease-duration %s: want whole seconds", o.leaseDuration)
	}
	if o.healthAddr != "" {
		l, err := net.Listen("tcp", o.healthAddr)
		if err != nil {
			return fmt.Errorf("--health-addr: %w", err)
		}
		go serveHealth(ctx, l)
	}

	// Host informers as nodeutil.NewNode makes them: our node's pods, and
	// the ConfigMaps, Secrets and Services VK resolves env vars from.
	podFactory := informers.NewSharedInformerFactoryWithOptions(host, o.informerResync,
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", o.nodeName).String()
		}))
	scmFactory := informers.NewSharedInformerFactory(host, o.informerResync)
	podInformer := podFactory.Core().V1().Pods()
	cmInformer := scmFactory.Core().V1().ConfigMaps()
	secretInformer := scmFactory.Core().V1().Secrets()
	svcInformer := scmFactory.Core().V1().Services()

	// Member pods we created, for GetPod(s) and status notifications.
	memberFactory := informers.NewSharedInformerFactoryWithOptions(member, o.informerResync,
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.LabelSelector = contestantLabel + "=" + contestant
		}))
	memberPods := memberFactory.Core().V1().Pods()
	p := &provider{
		member:      member,
		memberPods:  memberPods.Lister(),
		memberInfor: memberPods.Informer(),
		hostPods:    podInformer.Lister(),
	}

	eb := record.NewBroadcaster()
	eb.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: host.CoreV1().Events(corev1.NamespaceAll)})
	defer eb.Shutdown()
	recorder := eb.NewRecorder(scheme.Scheme, corev1.EventSource{Component: path.Join(o.nodeName, "pod-controller")})

	pc, err := node.NewPodController(node.PodControllerConfig{
		PodClient:         host.CoreV1(),
		PodInformer:       podInformer,
		EventRecorder:     recorder,
		Provider:          p,
		ConfigMapInformer: cmInformer,
		SecretInformer:    secretInformer,
		ServiceInformer:   svcInformer,
	})
	if err != nil {
		return err
	}
	nc, err := node.NewNodeController(p, nodeObj, host.CoreV1().Nodes(), nodeOptions(o, host)...)
	if err != nil {
		return err
	}

	podFactory.Start(ctx.Done())
	scmFactory.Start(ctx.Done())
	memberFactory.Start(ctx.Done())
	defer podFactory.Shutdown()
	defer scmFactory.Shutdown()
	defer memberFactory.Shutdown()
	// GetPods (VK's dangling-pod cleanup at start) must see every member pod.
	klog.Info("waiting for the member pod cache")
	if !cache.WaitForCacheSync(ctx.Done(), memberPods.Informer().HasSynced) {
		return nil // interrupted
	}

	// Same order as nodeutil.Node.Run: the pod controller first, the node
	// (which makes the node schedulable) once pods can be handled.
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go pc.Run(runCtx, o.workers) //nolint:errcheck // reported by pc.Err
	defer func() { cancel(); <-pc.Done() }()
	select {
	case <-ctx.Done():
		return nil
	case <-pc.Done():
		return fmt.Errorf("pod controller: %w", pc.Err())
	case <-pc.Ready():
	}
	klog.Info("pod controller ready")

	go nc.Run(runCtx) //nolint:errcheck // reported by nc.Err
	defer func() { cancel(); <-nc.Done() }()
	select {
	case <-ctx.Done():
		return nil
	case <-nc.Done():
		return fmt.Errorf("node controller: %w", nc.Err())
	case <-nc.Ready():
	}
	klog.InfoS("node controller ready", "node", o.nodeName)

	select {
	case <-ctx.Done():
		// Stock VK leaves the Node (and its Lease) behind on exit.
		return nil
	case <-pc.Done():
		return fmt.Errorf("pod controller: %w", pc.Err())
	case <-nc.Done():
		return fmt.Errorf("node controller: %w", nc.Err())
	}
}

// nodeOptions enable VK's v1 Lease and spell out VK's default intervals.
func nodeOptions(o options, host kubernetes.Interface) []node.NodeControllerOpt {
	leases := host.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	opts := []node.NodeControllerOpt{
		node.WithNodeEnableLeaseV1WithRenewInterval(leases, int32(o.leaseDuration/time.Second), o.leaseRenewInterval),
		node.WithNodePingInterval(o.pingInterval),
		node.WithNodeStatusUpdateInterval(o.statusInterval),
	}
	if o.pingTimeout > 0 {
		opts = append(opts, node.WithNodePingTimeout(o.pingTimeout))
	}
	return opts
}

// newNode is the Node as the provider reports it: fixed capacity, Ready.
func newNode(o options) (*corev1.Node, error) {
	lbls := map[string]string{
		// role and hostname as nodeutil.NewNode sets them; os and arch
		// for workloads that select on them.
		"kubernetes.io/role":   "agent",
		corev1.LabelHostname:   o.nodeName,
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: "amd64",
	}
	for _, kv := range o.labels.values {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--label %q: want key=value", kv)
		}
		lbls[k] = v
	}
	var taints []corev1.Taint
	if o.taint != "" {
		t, err := parseTaint(o.taint)
		if err != nil {
			return nil, err
		}
		taints = append(taints, t)
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("100"),
		corev1.ResourceMemory: resource.MustParse("400Gi"),
		corev1.ResourcePods:   resource.MustParse("1000"),
	}
	now := metav1.Now()
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: o.nodeName, Labels: lbls},
		Spec:       corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{
			Phase:       corev1.NodeRunning,
			Capacity:    capacity,
			Allocatable: capacity.DeepCopy(),
			NodeInfo: corev1.NodeSystemInfo{
				OperatingSystem:         "linux",
				Architecture:            "amd64",
				KubeletVersion:          kubeletVersion,
				ContainerRuntimeVersion: "vk-baseline://v1.13.0",
			},
			// VK only writes this status while pings succeed; it never
			// turns Ready False itself (see node.go, updateStatus).
			Conditions: []corev1.NodeCondition{
				cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "member API server answers pings"),
				cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", ""),
				cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", ""),
				cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", ""),
				cond(corev1.NodeNetworkUnavailable, corev1.ConditionFalse, "RouteCreated", ""),
			},
		},
	}, nil
}

// parseTaint reads key[=value]:Effect.
func parseTaint(s string) (corev1.Taint, error) {
	kv, effect, ok := strings.Cut(s, ":")
	if !ok {
		return corev1.Taint{}, fmt.Errorf("--taint %q: want key[=value]:Effect", s)
	}
	k, v, _ := strings.Cut(kv, "=")
	t := corev1.Taint{Key: k, Value: v, Effect: corev1.TaintEffect(effect)}
	switch t.Effect {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		return t, fmt.Errorf("--taint %q: unknown effect %q", s, effect)
	}
	if k == "" {
		return t, fmt.Errorf("--taint %q: empty key", s)
	}
	return t, nil
}

func clientset(kubeconfig string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

func serveHealth(ctx context.Context, l net.Listener) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok"))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		klog.ErrorS(err, "health server")
	}
}
