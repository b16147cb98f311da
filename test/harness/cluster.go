package harness

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

// Timings of the host's kube-controller-manager. Production defaults are
// 5s / 50s; tests shorten them so evictions happen in seconds.
type Timings struct {
	NodeMonitorPeriod      time.Duration
	NodeMonitorGracePeriod time.Duration
	// NodeEvictionRate is evictions per second per zone (KCM --node-eviction-rate).
	NodeEvictionRate float64
}

// DefaultTestTimings keep KCM fast: a node whose Lease is 8s old is Unknown.
var DefaultTestTimings = Timings{
	NodeMonitorPeriod:      time.Second,
	NodeMonitorGracePeriod: 8 * time.Second,
	NodeEvictionRate:       1,
}

// HostControllers are the KCM controllers a host runs: node lifecycle and
// taint eviction (the failure leafsync prevents), the workload controllers
// that replace evicted pods (and the DaemonSets that land on leaves), jobs,
// pod GC, and what service accounts need.
var HostControllers = []string{
	"nodelifecycle", "taint-eviction-controller", "replicaset", "deployment",
	"statefulset", "daemonset", "job", "podgc", "garbagecollector", "namespace",
	"serviceaccount", "serviceaccount-token", "root-ca-cert-publisher",
}

// MemberControllers are what a member needs so that pods can be created in
// fresh namespaces as in a real cluster (default ServiceAccount, namespace
// cleanup), without node lifecycle: kwok keeps member nodes alive.
var MemberControllers = []string{
	"serviceaccount", "serviceaccount-token", "namespace", "garbagecollector", "root-ca-cert-publisher",
}

// ClusterOptions shapes one control plane.
type ClusterOptions struct {
	// Name labels logs and kubeconfig contexts ("host", "member-a", ...).
	Name string
	// Controllers run in kube-controller-manager; none means no KCM.
	Controllers []string
	// Timings of KCM's node lifecycle; zero means DefaultTestTimings.
	Timings Timings
	// Scheduler starts kube-scheduler.
	Scheduler bool
	// Kwok starts kwok to simulate the nodes annotated kwok.x-k8s.io/node=fake
	// and the pods bound to them.
	Kwok bool
	// Audit writes an audit log of pod and node writes (see AuditEvents).
	Audit bool
	// AuditPolicy replaces that default audit policy (a YAML audit.k8s.io
	// Policy), e.g. to record every request of one client.
	AuditPolicy string
	// ExtraAPIServerArgs are appended to kube-apiserver's arguments.
	ExtraAPIServerArgs []string
	// KubeletClientCert gives kube-apiserver a client certificate for
	// kubelets (CN KubeletClientUser, from the cluster's CA), as kubeadm
	// does: it reaches node kubelets (logs, exec, port-forward) with it.
	KubeletClientCert bool
	// Address is the IP the API server listens on and advertises (default
	// 127.0.0.1). A pod on the test node (StartNode) reaches the host
	// network only at NodeNetwork.Gateway, so a cluster that such a pod
	// calls listens there; its serving certificates cover it.
	Address string
	// KwokConfig, when set, runs kwok's kubelet server (HTTPS on
	// 127.0.0.1, a free port that every kwok node advertises) with this
	// extra kwok configuration (ClusterLogs, ClusterExec,
	// ClusterPortForward documents), so that the API server's pods/log,
	// exec and portforward reach simulated pods.
	KwokConfig string
}

// KubeletClientUser is the user kube-apiserver reaches kubelets as with
// ClusterOptions.KubeletClientCert.
const KubeletClientUser = "kube-apiserver-kubelet-client"

// Cluster is one real control plane: etcd, kube-apiserver, and optionally
// kube-controller-manager, kube-scheduler and kwok.
type Cluster struct {
	Name string
	Dir  string
	Etcd *Etcd
	Port int
	// Address is the API server's IP (ClusterOptions.Address).
	Address string
	pki     *pki
	admin   *rest.Config
	client  kubernetes.Interface

	apiserver, kcm, scheduler, kwok *process
	apiserverArgs                   []string
	logDir                          string
	t                               TB
}

// StartCluster starts a control plane and waits until it serves and its
// default namespace exists. Everything stops when the test ends.
func StartCluster(t TB, opts ClusterOptions) *Cluster {
	t.Helper()
	if opts.Name == "" {
		opts.Name = "cluster"
	}
	if opts.Timings == (Timings{}) {
		opts.Timings = DefaultTestTimings
	}
	if opts.Address == "" {
		opts.Address = "127.0.0.1"
	}
	logDir := filepath.Join(LogDir(t), opts.Name)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatalf("harness: %v", err)
	}
	c := &Cluster{Name: opts.Name, Dir: logDir, Address: opts.Address, logDir: logDir, t: t}
	var err error
	if c.pki, err = newPKI(logDir, opts.Address); err != nil {
		t.Fatalf("harness: pki: %v", err)
	}
	c.Etcd = StartEtcd(t, logDir, EtcdOptions{Name: "etcd"})
	c.Port = freePorts(t, 1)[0]
	extra := opts.ExtraAPIServerArgs
	if opts.Audit {
		args, err := c.auditArgs(opts.AuditPolicy)
		if err != nil {
			t.Fatalf("harness: %v", err)
		}
		extra = append(extra, args...)
	}
	if opts.KubeletClientCert {
		if _, _, err := c.pki.issue("kubelet-client", KubeletClientUser, nil, false); err != nil {
			t.Fatalf("harness: %v", err)
		}
		extra = append(extra, "--kubelet-client-certificate="+c.pki.path("kubelet-client.crt"),
			"--kubelet-client-key="+c.pki.path("kubelet-client.key"))
	}
	if opts.KwokConfig != "" || opts.KubeletClientCert {
		// kwok and the test node give their nodes a Hostname address (the
		// node name, which nothing resolves) besides the InternalIP their
		// kubelet server listens on.
		extra = append(extra, "--kubelet-preferred-address-types=InternalIP")
	}
	if err := c.startAPIServer(extra); err != nil {
		t.Fatalf("harness: %s: %v", opts.Name, err)
	}
	t.Cleanup(c.stop)
	if len(opts.Controllers) > 0 {
		if err := c.startKCM(opts.Controllers, opts.Timings); err != nil {
			t.Fatalf("harness: %s: %v", opts.Name, err)
		}
	}
	if opts.Scheduler {
		if err := c.startScheduler(); err != nil {
			t.Fatalf("harness: %s: %v", opts.Name, err)
		}
	}
	if opts.Kwok {
		if err := c.startKwok(opts.Timings, opts.KwokConfig); err != nil {
			t.Fatalf("harness: %s: %v", opts.Name, err)
		}
	}
	return c
}

// URL is the API server's address.
func (c *Cluster) URL() string { return "https://" + c.Addr() }

// Addr is the API server's host:port, for a fault proxy's upstream.
func (c *Cluster) Addr() string { return net.JoinHostPort(c.Address, strconv.Itoa(c.Port)) }

// CACert is the PEM of the cluster's CA.
func (c *Cluster) CACert() []byte { return c.pki.caPEM }

// RESTConfig is an admin (system:masters) client config.
func (c *Cluster) RESTConfig() *rest.Config { return rest.CopyConfig(c.admin) }

// Client is an admin clientset.
func (c *Cluster) Client() kubernetes.Interface { return c.client }

func (c *Cluster) startAPIServer(extra []string) error {
	if _, _, err := c.pki.issue("apiserver", "kube-apiserver", nil, true); err != nil {
		return err
	}
	certPEM, keyPEM, err := c.pki.issue("admin", "leafsync-test-admin", []string{"system:masters"}, false)
	if err != nil {
		return err
	}
	// Pods reach a non-loopback API server at the kubernetes Service, whose
	// endpoints the lease reconciler writes; a loopback address is no
	// endpoint anything can use.
	reconciler := "lease"
	if net.ParseIP(c.Address).IsLoopback() {
		reconciler = "none"
	}
	c.apiserverArgs = append([]string{
		"--etcd-servers=" + strings.Join(c.Etcd.Endpoints(), ","),
		fmt.Sprintf("--secure-port=%d", c.Port),
		"--bind-address=" + c.Address,
		"--advertise-address=" + c.Address,
		"--tls-cert-file=" + c.pki.path("apiserver.crt"),
		"--tls-private-key-file=" + c.pki.path("apiserver.key"),
		"--client-ca-file=" + c.pki.path("ca.crt"),
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + c.pki.path("sa.pub"),
		"--service-account-signing-key-file=" + c.pki.path("sa.key"),
		"--service-cluster-ip-range=10.96.0.0/16",
		"--authorization-mode=Node,RBAC",
		"--allow-privileged=true",
		"--cert-dir=" + filepath.Join(c.logDir, "apiserver-certs"),
		"--endpoint-reconciler-type=" + reconciler,
		"--profiling=false",
		"--v=1",
	}, extra...)
	c.admin = &rest.Config{
		Host:            c.URL(),
		TLSClientConfig: rest.TLSClientConfig{CAData: c.pki.caPEM, CertData: certPEM, KeyData: keyPEM},
		QPS:             100,
		Burst:           200,
		Timeout:         30 * time.Second,
	}
	if c.client, err = kubernetes.NewForConfig(c.admin); err != nil {
		return err
	}
	if c.apiserver, err = startProcess(c.logDir, "kube-apiserver", Bin(c.t, "kube-apiserver"), c.apiserverArgs...); err != nil {
		return err
	}
	return c.waitServing(90 * time.Second)
}

// waitServing waits for /readyz and for the default namespace and RBAC
// bootstrap roles, so that tests never race the API server's start-up.
func (c *Cluster) waitServing(timeout time.Duration) error {
	return c.apiserver.waitFor(timeout, "ready", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		body, err := c.client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("readyz: %v %s", err, body)
		}
		if _, err := c.client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return err
		}
		_, err = c.client.RbacV1().ClusterRoles().Get(ctx, "system:kube-controller-manager", metav1.GetOptions{})
		return err
	})
}

// RestartAPIServer kills kube-apiserver and starts it again on the same
// port and etcd, as a host control-plane restart would.
func (c *Cluster) RestartAPIServer() error {
	c.apiserver.Kill()
	var err error
	if c.apiserver, err = startProcess(c.logDir, "kube-apiserver", Bin(c.t, "kube-apiserver"), c.apiserverArgs...); err != nil {
		return err
	}
	return c.waitServing(90 * time.Second)
}

// componentKubeconfig writes a kubeconfig with a client certificate for a
// control-plane component and returns its path.
func (c *Cluster) componentKubeconfig(name, cn string, orgs []string) (string, error) {
	certPEM, keyPEM, err := c.pki.issue(name, cn, orgs, false)
	if err != nil {
		return "", err
	}
	data, err := kubeconfigBytes(c.Name, c.URL(), c.pki.caPEM, &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM})
	if err != nil {
		return "", err
	}
	path := filepath.Join(c.logDir, name+".kubeconfig")
	return path, os.WriteFile(path, data, 0o600)
}

func (c *Cluster) startKCM(controllers []string, tm Timings) error {
	kc, err := c.componentKubeconfig("kube-controller-manager", "system:kube-controller-manager", nil)
	if err != nil {
		return err
	}
	c.kcm, err = startProcess(c.logDir, "kube-controller-manager", Bin(c.t, "kube-controller-manager"),
		"--kubeconfig="+kc,
		"--controllers="+strings.Join(controllers, ","),
		"--leader-elect=false",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+c.pki.path("sa.key"),
		"--root-ca-file="+c.pki.path("ca.crt"),
		"--node-monitor-period="+tm.NodeMonitorPeriod.String(),
		"--node-monitor-grace-period="+tm.NodeMonitorGracePeriod.String(),
		fmt.Sprintf("--node-eviction-rate=%g", tm.NodeEvictionRate),
		"--concurrent-gc-syncs=5",
		"--secure-port=0",
		"--v=2",
	)
	if err != nil {
		return err
	}
	// KCM is up once the service-account controller has made the default
	// ServiceAccount in the default namespace.
	return c.kcm.waitFor(90*time.Second, "running", func() error {
		_, err := c.client.CoreV1().ServiceAccounts("default").Get(context.Background(), "default", metav1.GetOptions{})
		return err
	})
}

func (c *Cluster) startScheduler() error {
	kc, err := c.componentKubeconfig("kube-scheduler", "system:kube-scheduler", nil)
	if err != nil {
		return err
	}
	c.scheduler, err = startProcess(c.logDir, "kube-scheduler", Bin(c.t, "kube-scheduler"),
		"--kubeconfig="+kc,
		"--leader-elect=false",
		"--secure-port=0",
		"--v=1",
	)
	return err
}

// KwokNodeAnnotation marks the nodes kwok simulates.
const KwokNodeAnnotation = "kwok.x-k8s.io/node"

func (c *Cluster) startKwok(tm Timings, extraConfig string) error {
	kc, err := c.componentKubeconfig("kwok", "kwok", []string{"system:masters"})
	if err != nil {
		return err
	}
	dir, err := BinDir()
	if err != nil {
		return err
	}
	server := []string{"--server-address=127.0.0.1:0"}
	if extraConfig != "" {
		if server, err = c.kwokServerArgs(extraConfig); err != nil {
			return err
		}
	}
	c.kwok, err = startProcess(c.logDir, "kwok", filepath.Join(dir, "kwok"), append([]string{
		"--kubeconfig=" + kc,
		"--config=" + filepath.Join(dir, "kwok-stages.yaml"),
		"--manage-nodes-with-annotation-selector=" + KwokNodeAnnotation + "=fake",
		// kwok renews Leases every quarter of their duration: with the
		// grace period as duration, a simulated node renews 4 times per
		// grace period and never looks Unknown to KCM (with 40s it renewed
		// every 10s against an 8s grace, and the host's "healthy" worker
		// was Unknown 2s out of every 10).
		fmt.Sprintf("--node-lease-duration-seconds=%d", max(4, int(tm.NodeMonitorGracePeriod.Seconds()))),
	}, server...)...)
	return err
}

// kwokServerArgs: kwok's kubelet server on a free port of 127.0.0.1, with
// a serving certificate of the cluster's CA; kwok writes that address into
// the nodes it initialises (InternalIP, kubelet endpoint port).
func (c *Cluster) kwokServerArgs(extraConfig string) ([]string, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	if _, _, err := c.pki.issue("kwok-serving", "kwok", nil, true); err != nil {
		return nil, err
	}
	cfg := filepath.Join(c.logDir, "kwok-extra.yaml")
	if err := os.WriteFile(cfg, []byte(extraConfig), 0o600); err != nil {
		return nil, err
	}
	return []string{
		"--config=" + cfg,
		fmt.Sprintf("--server-address=127.0.0.1:%d", port),
		"--node-ip=127.0.0.1",
		fmt.Sprintf("--node-port=%d", port),
		"--tls-cert-file=" + c.pki.path("kwok-serving.crt"),
		"--tls-private-key-file=" + c.pki.path("kwok-serving.key"),
	}, nil
}

// IssueClientCert signs a client certificate of the cluster's CA for a
// user (cn) in groups (orgs): the host's client CA authenticates it, as it
// does the API server's own kubelet client.
func (c *Cluster) IssueClientCert(name, cn string, orgs []string) (certPEM, keyPEM []byte, err error) {
	return c.pki.issue(name, cn, orgs, false)
}

// StopKwok stops the simulated kubelets: member nodes stop heartbeating.
func (c *Cluster) StopKwok() {
	if c.kwok != nil {
		c.kwok.Stop(2 * time.Second)
	}
}

// PauseControllers freezes kube-controller-manager (SIGSTOP): no
// controller acts until ResumeControllers. A test uses it to hold a
// StatefulSet's replacement pod back while it sets the scene.
func (c *Cluster) PauseControllers() error {
	if c.kcm == nil {
		return fmt.Errorf("harness: cluster %s runs no kube-controller-manager", c.Name)
	}
	return c.kcm.Pause()
}

// ResumeControllers lets kube-controller-manager go on (SIGCONT).
func (c *Cluster) ResumeControllers() error {
	if c.kcm == nil {
		return fmt.Errorf("harness: cluster %s runs no kube-controller-manager", c.Name)
	}
	return c.kcm.Resume()
}

func (c *Cluster) stop() {
	for _, p := range []*process{c.kwok, c.scheduler, c.kcm, c.apiserver} {
		if p != nil {
			p.Stop(2 * time.Second)
		}
	}
}

// Kubeconfig is an admin kubeconfig with inline credentials.
func (c *Cluster) Kubeconfig() []byte {
	return c.KubeconfigVia(c.Addr())
}

// KubeconfigVia is the admin kubeconfig pointing at addr (host:port) instead
// of the API server, e.g. a fault proxy in front of it.
func (c *Cluster) KubeconfigVia(addr string) []byte {
	data, err := kubeconfigBytes(c.Name, "https://"+addr, c.pki.caPEM,
		&clientcmdapi.AuthInfo{ClientCertificateData: c.admin.CertData, ClientKeyData: c.admin.KeyData})
	if err != nil {
		panic(err) // only marshalling a struct we built
	}
	return data
}

// WriteKubeconfig writes the admin kubeconfig to a file in the log folder.
func (c *Cluster) WriteKubeconfig() (string, error) {
	path := filepath.Join(c.logDir, "admin.kubeconfig")
	return path, os.WriteFile(path, c.Kubeconfig(), 0o600)
}

// ServiceAccountKubeconfig creates (if needed) a ServiceAccount and returns
// a kubeconfig with a token for it, pointing at addr ("" = the API server).
// Tests use it to run leafsync with exactly the RBAC the chart grants.
func (c *Cluster) ServiceAccountKubeconfig(ctx context.Context, namespace, name, addr string) ([]byte, error) {
	if _, err := c.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
	if _, err := c.client.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	tr, err := c.client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token for %s/%s: %w", namespace, name, err)
	}
	if addr == "" {
		addr = c.Addr()
	}
	return kubeconfigBytes(c.Name, "https://"+addr, c.pki.caPEM, &clientcmdapi.AuthInfo{Token: tr.Status.Token})
}

func kubeconfigBytes(name, server string, ca []byte, auth *clientcmdapi.AuthInfo) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos[name] = auth
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	cfg.CurrentContext = name
	return clientcmd.Write(*cfg)
}
