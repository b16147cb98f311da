//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leafsync/leafsync/test/harness"
)

const leafsyncNamespace = "leafsync-system"

// testConfig is leafsync's config for e2e tests: thresholds scaled down so
// that flaps and outages play out in seconds, and a Lease renewed well
// inside the host KCM's 8s grace period (production: 10s against 50s).
const testConfig = `
hysteresis:
  probeInterval: 1s
  cordonAfter: 2s
  notReadyAfter: 10s
  readyAfter: 4s
  window: 60s
leaves:
  leaseRenewInterval: 1s
  leaseDuration: 40s
  leaseRenewTimeout: 8s
  conditionHeartbeat: 30s
  resync: 10s
leaderElection:
  leaseDuration: 4s
  renewDeadline: 3s
  retryPeriod: 500ms
members:
  probeTimeout: 1s
podSync:
  maxDeferral: 30s
  reapAfter: 10s
  resync: 5s
verification:
  retryMin: 1s
  retryMax: 2s
  canary: false
`

// fleet is a host and its members, each behind a fault proxy, and the
// config leafsync runs with.
type fleet struct {
	host      *harness.Cluster
	hostProxy *harness.FaultProxy
	members   map[string]*memberFixture
	config    string
}

type memberFixture struct {
	*harness.Cluster
	proxy *harness.FaultProxy
}

func newFleet(t *testing.T, hostOpts harness.HostOptions, members ...harness.MemberOptions) *fleet {
	t.Helper()
	f := &fleet{host: harness.StartHost(t, hostOpts), members: map[string]*memberFixture{}}
	f.hostProxy = harness.NewFaultProxy(t, "host", f.host.Addr())
	for _, mo := range members {
		c := harness.StartMember(t, mo)
		f.members[mo.Name] = &memberFixture{Cluster: c, proxy: harness.NewFaultProxy(t, mo.Name, c.Addr())}
	}
	if err := f.host.EnsureNamespace(context.Background(), leafsyncNamespace); err != nil {
		t.Fatal(err)
	}
	f.config = filepath.Join(harness.LogDir(t), "leafsync-config.yaml")
	if err := os.WriteFile(f.config, []byte(testConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// startLeafsync runs leafsync against the host through the host's fault proxy.
func (f *fleet) startLeafsync(t *testing.T, name string, args ...string) *harness.Leafsync {
	t.Helper()
	args = append([]string{"--namespace=" + leafsyncNamespace, "--config=" + f.config}, args...)
	return harness.StartLeafsync(t, name, f.host.KubeconfigVia(f.hostProxy.Addr()), args...)
}

// register creates the registration Secret of a member, pointing through
// its fault proxy.
func (f *fleet) register(t *testing.T, name string, annotations map[string]string) {
	t.Helper()
	m := f.members[name]
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: "member-" + name, Namespace: leafsyncNamespace,
			Labels:      map[string]string{"leafsync.io/cluster": name},
			Annotations: annotations,
		},
		Data: map[string][]byte{"kubeconfig": m.KubeconfigVia(m.proxy.Addr())},
	}
	if _, err := f.host.Client().CoreV1().Secrets(leafsyncNamespace).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (f *fleet) node(t *testing.T, name string) *corev1.Node {
	t.Helper()
	n, err := f.host.Client().CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (f *fleet) lease(name string) (*coordinationv1.Lease, error) {
	return f.host.Client().CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(context.Background(), name, metav1.GetOptions{})
}

// waitLeafReady waits until the leaf exists with Ready=True.
func (f *fleet) waitLeafReady(t *testing.T, leaf string, timeout time.Duration) {
	t.Helper()
	waitNodeReady(t, f.host, leaf, timeout)
}

// waitNodeReady waits until a Node of c exists with Ready=True.
func waitNodeReady(t *testing.T, c *harness.Cluster, name string, timeout time.Duration) {
	t.Helper()
	harness.Eventually(t, timeout, "node "+name+" Ready", func() error {
		n, err := c.Client().CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s := harness.NodeReady(n); s != corev1.ConditionTrue {
			return fmt.Errorf("Ready=%q", s)
		}
		return nil
	})
}

func (f *fleet) waitGone(t *testing.T, what string, get func() error) {
	t.Helper()
	harness.Eventually(t, 30*time.Second, what+" removed", func() error {
		err := get()
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("still there")
	})
}

func hasTaint(n *corev1.Node, key string, effect corev1.TaintEffect) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key && t.Effect == effect {
			return true
		}
	}
	return false
}
