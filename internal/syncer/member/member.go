// Package member is the runtime of one member cluster: its clients (with
// timeouts, QPS/burst and a leafsync user agent), its Node and Pod informers
// (with a transform that keeps of each object only what leafsync reads: of
// a node a leafnode.MemberNode, of a pod leafsync did not place a
// ForeignPod; their event handlers are called on the goroutine that fills
// the cache, so each only enqueues: see Informer), its prober (GET /readyz,
// classified for the hysteresis engine), and its circuit breaker, through
// which every call to the member goes but the probe. The probe has a
// transport (and connections) of its own: it is the only readiness signal,
// and the breaker's health check. A Runtime is started and stopped as a
// whole; stopping it frees every goroutine and connection it made. No
// client of a member follows a redirect: its credentials would go with it.
//
// The package also provides Retry, a bounded, jittered, context-aware retry
// for member writes.
package member

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/leafsync/leafsync/internal/leafnode"
)

// Options configure a member Runtime.
type Options struct {
	// Cluster is the member's name.
	Cluster string
	// RESTConfig connects to the member (from a validated registration).
	// It is copied; timeouts, rate limits, user agent and the breaker are
	// added to the copy.
	RESTConfig *rest.Config
	// UserAgent names leafsync in the member's audit log.
	UserAgent string
	// Timeout bounds each request that is not a watch.
	Timeout time.Duration
	// QPS and Burst limit the rate of requests to the member.
	QPS   float32
	Burst int
	// ProbeTimeout bounds one GET /readyz.
	ProbeTimeout time.Duration
	// ProbeInterval is the cluster's probe interval until Observe returns
	// another.
	ProbeInterval time.Duration
	// Observe receives each probe outcome (may be nil).
	Observe ObserveFunc
	// Breaker configures the circuit breaker.
	Breaker BreakerSettings
	// OnBreakerChange is called on every breaker state change (may be nil;
	// must not block).
	OnBreakerChange func(cluster string, from, to BreakerState)
	// Resync is the informers' resync period (0: none).
	Resync time.Duration
	// Logger for breaker and lifecycle messages.
	Logger logr.Logger
	// Clock times the probes and stamps their outcomes (the real clock
	// when nil).
	Clock clock.Clock
}

// Defaults of Options fields left zero.
const (
	defaultTimeout      = 30 * time.Second
	defaultQPS          = 20
	defaultBurst        = 40
	defaultProbeTimeout = 3 * time.Second
	DefaultUserAgent    = "leafsync"
	dialTimeout         = 10 * time.Second
)

// Runtime is one member's connection: clients, informers, prober, breaker.
type Runtime struct {
	cluster   string
	log       logr.Logger
	config    *rest.Config // with wrappers, timeout, QPS
	transport http.RoundTripper
	probeRT   http.RoundTripper // the prober's own: no breaker, own connections
	kube      kubernetes.Interface
	watch     kubernetes.Interface // kube without the overall timeout
	nodes     *Informer            // *cachedNode
	pods      *Informer            // *corev1.Pod (synced) and *ForeignPod
	usage     leafnode.Usage       // the ForeignPods' requests by node, from pods' events
	breaker   *Breaker
	prober    *Prober

	mu      sync.Mutex
	started bool
	stopped bool
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	done    chan struct{}
}

// New builds a member Runtime. It does no network I/O; call Start.
func New(o Options) (*Runtime, error) {
	if o.Cluster == "" || o.RESTConfig == nil {
		return nil, errors.New("member: Cluster and RESTConfig are required")
	}
	if o.Timeout <= 0 {
		o.Timeout = defaultTimeout
	}
	if o.QPS <= 0 {
		o.QPS = defaultQPS
	}
	if o.Burst <= 0 {
		o.Burst = defaultBurst
	}
	if o.ProbeTimeout <= 0 {
		o.ProbeTimeout = defaultProbeTimeout
	}
	if o.UserAgent == "" {
		o.UserAgent = DefaultUserAgent
	}
	if o.Breaker == (BreakerSettings{}) {
		o.Breaker = defaultBreakerSettings()
	}
	log := o.Logger.WithValues("cluster", o.Cluster)
	r := &Runtime{cluster: o.Cluster, log: log, done: make(chan struct{})}
	r.breaker = newBreaker(o.Cluster, o.Breaker, log, o.OnBreakerChange)

	cfg := rest.CopyConfig(o.RESTConfig)
	cfg.UserAgent = o.UserAgent + " (cluster " + o.Cluster + ")"
	// Protobuf, as kube-controller-manager speaks: every registration LISTs
	// and watches all of its member's Nodes and Pods, and protobuf costs
	// both API servers and leafsync a fraction of JSON's encoding and
	// decoding (make bench-scale, docs/benchmarks/scale.md).
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	cfg.QPS = o.QPS
	cfg.Burst = o.Burst
	cfg.Timeout = o.Timeout
	// A dialer of our own: bounded connect time, and a transport that
	// belongs to this runtime (not shared through client-go's TLS cache
	// with another member), so Stop can close its connections.
	dialer := &net.Dialer{Timeout: min(dialTimeout, o.Timeout), KeepAlive: 30 * time.Second}
	cfg.Dial = dialer.DialContext
	// The probe's transport is built before the breaker is added: a probe
	// is never refused by the breaker, and never queues on a connection
	// busy with other calls. (A custom Dial keeps client-go from sharing
	// either transport through its TLS cache.)
	probeDialer := *dialer
	probeCfg := rest.CopyConfig(cfg)
	probeCfg.Dial = probeDialer.DialContext
	probeRT, err := rest.TransportFor(probeCfg)
	if err != nil {
		return nil, fmt.Errorf("member %q: building probe transport: %w", o.Cluster, err)
	}
	r.probeRT = probeRT
	cfg.Wrap(r.breaker.Wrap)
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("member %q: building transport: %w", o.Cluster, err)
	}
	r.transport = rt
	r.config = cfg

	httpClient := &http.Client{Transport: rt, Timeout: o.Timeout, CheckRedirect: noRedirects}
	r.kube, err = kubernetes.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("member %q: building client: %w", o.Cluster, err)
	}
	// Informers need a client without an overall timeout: it would cut
	// every watch after Timeout. Dead connections are still found by the
	// dial timeout, TCP keep-alive and HTTP/2 health checks.
	watchCfg := rest.CopyConfig(cfg)
	watchCfg.Timeout = 0
	r.watch, err = kubernetes.NewForConfigAndClient(watchCfg, &http.Client{Transport: rt, CheckRedirect: noRedirects})
	if err != nil {
		return nil, fmt.Errorf("member %q: building informer client: %w", o.Cluster, err)
	}
	// The one index a reader uses: pods leafsync synced by namespace (see
	// syncedNamespace). Nodes need none.
	nodes, pods := r.watch.CoreV1().Nodes(), r.watch.CoreV1().Pods(metav1.NamespaceAll)
	r.nodes = newInformer(listWatch(r.watch, nodes.List, nodes.Watch), &corev1.Node{}, o.Resync, transform, cache.Indexers{})
	r.pods = newInformer(listWatch(r.watch, pods.List, pods.Watch), &corev1.Pod{}, o.Resync, transform,
		cache.Indexers{cache.NamespaceIndex: syncedNamespace})
	// First, so that the sums are up to date when the other handlers
	// (the leaf's kick among them) hear of a pod.
	_, _ = r.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.usage.Update(nil, foreignUsage(obj)) },
		UpdateFunc: func(old, cur any) { r.usage.Update(foreignUsage(old), foreignUsage(cur)) },
		DeleteFunc: func(obj any) { r.usage.Update(foreignUsage(obj), nil) },
	})

	readyz, err := readyzURL(cfg)
	if err != nil {
		return nil, fmt.Errorf("member %q: %w", o.Cluster, err)
	}
	r.prober = NewProber(ProberOptions{
		Cluster:   o.Cluster,
		Client:    &http.Client{Transport: probeRT, CheckRedirect: noRedirects},
		URL:       readyz,
		Timeout:   o.ProbeTimeout,
		Interval:  o.ProbeInterval,
		Observe:   o.Observe,
		OnSuccess: r.breaker.HealthCheckPassed,
		Clock:     o.Clock,
	})
	return r, nil
}

// noRedirects makes a redirect the answer (http.Client.CheckRedirect).
// The member's transports add its credentials (token, client
// certificate) to every request they send, so a redirect followed would
// carry them to wherever the member's address points leafsync.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

func readyzURL(cfg *rest.Config) (string, error) {
	u, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return "", fmt.Errorf("server URL %q: %w", cfg.Host, err)
	}
	u.Path = strings.TrimRight(u.Path, "/") + "/readyz"
	u.RawQuery = ""
	return u.String(), nil
}

// Start starts the informers and the prober. It returns at once; nothing
// in it blocks on the member. When ctx ends the informers and prober stop,
// but only Stop waits for them and closes the member's connections: always
// call Stop.
func (r *Runtime) Start(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started || r.stopped {
		return
	}
	r.started = true
	ctx, r.cancel = context.WithCancel(ctx)
	r.wg.Go(func() { r.nodes.run(ctx) })
	r.wg.Go(func() { r.pods.run(ctx) })
	r.wg.Go(func() { r.prober.Run(ctx) })
	r.log.V(1).Info("member runtime started")
}

// Stop stops the informers and the prober, waits for their goroutines, and
// closes the member's idle connections. It is idempotent; a Runtime cannot
// be restarted.
func (r *Runtime) Stop() {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		<-r.done
		return
	}
	r.stopped = true
	cancel := r.cancel
	r.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	r.wg.Wait()
	utilnet.CloseIdleConnectionsFor(r.transport)
	utilnet.CloseIdleConnectionsFor(r.probeRT)
	close(r.done)
	r.log.V(1).Info("member runtime stopped")
}

// Done is closed when the runtime has fully stopped.
func (r *Runtime) Done() <-chan struct{} { return r.done }

// Cluster returns the member's name.
func (r *Runtime) Cluster() string { return r.cluster }

// Client returns the member's clientset (timeouts, QPS, breaker applied).
func (r *Runtime) Client() kubernetes.Interface { return r.kube }

// WatchClient returns the member's clientset for informers: Client's
// transport (breaker, QPS, user agent) and connection, without the
// overall timeout that would cut every watch. An informer of another
// resource uses it rather than a transport of its own: a connection of a
// member costs its TLS and HTTP/2 state and a goroutine, per member.
func (r *Runtime) WatchClient() kubernetes.Interface { return r.watch }

// RESTConfig returns a copy of the member's client config, with the
// breaker, timeout, QPS and user agent applied, for other kinds of clients.
func (r *Runtime) RESTConfig() *rest.Config { return rest.CopyConfig(r.config) }

// NodeInformer returns the member's Node informer, for event handlers
// that only enqueue (see Informer): its objects are the cache's records of
// the nodes (see transform), read through Nodes.
func (r *Runtime) NodeInformer() *Informer { return r.nodes }

// Nodes lists, from the cache, what the leaf reads of each of the
// member's nodes.
func (r *Runtime) Nodes() []*leafnode.MemberNode { return memberNodes(r.nodes.indexer) }

// Pods returns the member's Pod informer, for event handlers that only
// enqueue (see Informer). Its objects, as event handlers get them, are the
// *corev1.Pod of pods leafsync synced and the *ForeignPod of every other
// (see transform); its Lister is PodLister.
func (r *Runtime) Pods() PodInformer { return PodInformer{r.pods} }

// PodInformer is the member's Pod informer.
type PodInformer struct{ informer *Informer }

// Informer returns the member's Pod informer (see Pods).
func (p PodInformer) Informer() *Informer { return p.informer }

// PodLister lists the member's Pods from the cache: foreign pods as
// ForeignPod.Pod shows them.
func (r *Runtime) PodLister() corelisters.PodLister { return podLister{r.pods.indexer} }

// ForeignUsage is what the member's pods leafsync did not place request,
// by node (leafnode.Usage, kept from the pod informer's events): what the
// leaf's aggregation subtracts. Read-only.
func (r *Runtime) ForeignUsage() map[string]leafnode.NodeSum { return r.usage.Snapshot() }

// HasSynced reports whether both informers have synced once.
func (r *Runtime) HasSynced() bool {
	return r.nodes.HasSynced() && r.pods.HasSynced()
}

// WaitForCacheSync waits until the informers have synced or ctx ends.
func (r *Runtime) WaitForCacheSync(ctx context.Context) bool {
	return cache.WaitForCacheSync(ctx.Done(), r.nodes.HasSynced, r.pods.HasSynced)
}

// Breaker returns the member's circuit breaker.
func (r *Runtime) Breaker() *Breaker { return r.breaker }

// Prober returns the member's prober.
func (r *Runtime) Prober() *Prober { return r.prober }

// listWatch lists and watches with list and watch, through client's
// watch-list support (as client-go's generated informers do).
func listWatch[L runtime.Object](client kubernetes.Interface, list func(context.Context, metav1.ListOptions) (L, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error)) cache.ListerWatcher {
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc:  func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return list(ctx, o) },
		WatchFuncWithContext: watchFn,
	}, client)
}
