//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/leafsync/leafsync/internal/leafnode"
	"github.com/leafsync/leafsync/internal/syncer/config"
	"github.com/leafsync/leafsync/internal/syncer/guard"
	"github.com/leafsync/leafsync/internal/syncer/shard"
	"github.com/leafsync/leafsync/test/harness"
)

const chartDir = "../../charts/leafsync"

func helm(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(harness.Bin(t, "helm"), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestHelmChart installs the chart into a real host, then runs leafsync
// with exactly the chart's RBAC (a token of the chart's ServiceAccount):
// registration, the leaf, its Lease, the cordon, Events and deregistration
// all work without a single forbidden request. `leafsync status` (as the
// kubectl plugin) reports the member.
func TestHelmChart(t *testing.T) {
	helm(t, "lint", "--strict", chartDir)

	// With the Prometheus Operator's CRDs, the chart renders a ServiceMonitor
	// and a PrometheusRule carrying exactly files/alerts.yaml.
	rendered := helm(t, "template", "leafsync", chartDir, "-n", leafsyncNamespace,
		"--api-versions", "monitoring.coreos.com/v1/ServiceMonitor",
		"--api-versions", "monitoring.coreos.com/v1/PrometheusRule")
	kinds := map[string]int{}
	for _, doc := range strings.Split(rendered, "\n---") {
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec map[string]any `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("rendered chart is not YAML: %v\n%s", err, doc)
		}
		kinds[obj.Kind]++
		// The chart's eviction guard is the one leafsync ensures: at
		// start leafsync finds it unchanged, not drifted. (The node fence
		// is the chart's alone.)
		var want any
		switch {
		case obj.Kind == "ValidatingAdmissionPolicy" && obj.Metadata.Name == guard.Name:
			want = guard.PolicySpec([]string{guard.DefaultIdentity})
		case obj.Kind == "ValidatingAdmissionPolicyBinding" && obj.Metadata.Name == guard.Name:
			want = guard.BindingSpec(leafsyncNamespace)
		}
		if want != nil {
			var w map[string]any
			data, _ := json.Marshal(want)
			_ = json.Unmarshal(data, &w)
			got, _ := json.Marshal(obj.Spec)
			exp, _ := json.Marshal(w)
			if !bytes.Equal(got, exp) {
				t.Errorf("chart's %s spec differs from internal/syncer/guard's:\nchart: %s\ncode:  %s", obj.Kind, got, exp)
			}
		}
		if obj.Kind == "PrometheusRule" {
			var file map[string]any
			data, _ := os.ReadFile(filepath.Join(chartDir, "files/alerts.yaml"))
			if err := yaml.Unmarshal(data, &file); err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(obj.Spec["groups"])
			want, _ := json.Marshal(file["groups"])
			if !bytes.Equal(got, want) {
				t.Fatalf("PrometheusRule groups differ from files/alerts.yaml")
			}
		}
	}
	for _, k := range []string{"Deployment", "ServiceAccount", "ClusterRole", "Role", "Service", "ServiceMonitor", "PrometheusRule", "ConfigMap", "PodDisruptionBudget", "FlowSchema", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "Job", "RoleBinding"} {
		if kinds[k] == 0 {
			t.Errorf("chart renders no %s (kinds: %v)", k, kinds)
		}
	}

	f := newFleet(t, harness.HostOptions{}, harness.MemberOptions{Name: "member-a", Nodes: 1, Pods: 1})
	ctx := context.Background()
	hostKC, err := f.host.WriteKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	out := helm(t, "install", "leafsync", chartDir, "-n", leafsyncNamespace, "--kubeconfig", hostKC, "--wait=false")
	// The release notes tell how to register a member, in this namespace.
	if want := "--namespace " + leafsyncNamespace + " --cluster <name>"; !strings.Contains(out, want) {
		t.Errorf("helm install's notes lack %q:\n%s", want, out)
	}
	hc := f.host.Client()
	dep, err := hc.AppsV1().Deployments(leafsyncNamespace).Get(ctx, "leafsync", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("chart's Deployment: %v", err)
	}
	if got := dep.Spec.Template.Spec.ServiceAccountName; got != "leafsync" {
		t.Fatalf("Deployment runs as %q, want the chart's ServiceAccount leafsync", got)
	}
	dash, err := hc.CoreV1().ConfigMaps(leafsyncNamespace).Get(ctx, "leafsync-dashboard", metav1.GetOptions{})
	if err != nil || dash.Labels["grafana_dashboard"] != "1" || !json.Valid([]byte(dash.Data["leafsync-flap-suppression.json"])) {
		t.Fatalf("dashboard ConfigMap for the Grafana sidecar: %v, labels %v", err, dash.Labels)
	}
	// The chart's config file is one leafsync accepts.
	cm, err := hc.CoreV1().ConfigMaps(leafsyncNamespace).Get(ctx, "leafsync-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	chartCfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(chartCfg, []byte(cm.Data["config.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	// Loaded and validated as leafsync run does (strict: an unknown key is
	// an error too).
	loaded, err := config.Load(chartCfg)
	if err == nil {
		err = loaded.Validate()
	}
	if err != nil {
		t.Fatalf("leafsync refuses the chart's config: %v\n%s", err, cm.Data["config.yaml"])
	}

	// leafsync with the chart's RBAC, nothing more.
	saKC, err := f.host.ServiceAccountKubeconfig(ctx, leafsyncNamespace, "leafsync", f.hostProxy.Addr())
	if err != nil {
		t.Fatal(err)
	}
	ls := harness.StartLeafsync(t, "leafsync", saKC, "--namespace="+leafsyncNamespace, "--config="+f.config, "--leader-elect")
	f.register(t, "member-a", nil)
	const leaf = "leaf-member-a"
	f.waitLeafReady(t, leaf, time.Minute)
	// Under the chart's RBAC leafsync finds the chart's eviction guard as
	// it would install it, and keeps the member's readiness record.
	harness.Eventually(t, 30*time.Second, "leafsync checked the chart's eviction guard", func() error {
		log, err := os.ReadFile(ls.LogPath())
		if err != nil {
			return err
		}
		if !bytes.Contains(log, []byte(`"msg":"eviction guard active"`)) || !bytes.Contains(log, []byte(`"policy unchanged","binding unchanged"`)) {
			return fmt.Errorf("no 'eviction guard active' with policy and binding unchanged in %s", ls.LogPath())
		}
		return nil
	})
	if _, err := hc.CoreV1().ConfigMaps(leafsyncNamespace).Get(ctx, guard.RecordName("member-a"), metav1.GetOptions{}); err != nil {
		t.Errorf("eviction-guard record under the chart's RBAC: %v", err)
	}
	// The chart's FlowSchema: leafsync's Lease requests in kube-node-lease
	// get kubelets' node-high priority level; its other requests do not.
	nodeHigh, err := hc.FlowcontrolV1().PriorityLevelConfigurations().Get(ctx, "node-high", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	saCfg, err := clientcmd.RESTConfigFromKubeConfig(saKC)
	if err != nil {
		t.Fatal(err)
	}
	saHTTP, err := rest.HTTPClientFor(saCfg)
	if err != nil {
		t.Fatal(err)
	}
	priorityOf := func(path string) types.UID {
		t.Helper()
		resp, err := saHTTP.Get(saCfg.Host + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		// APF classifies a request before it is served: the header is
		// there whatever the answer (the Lease may not exist yet).
		if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNotFound {
			t.Fatalf("GET %s as leafsync: %s", path, resp.Status)
		}
		return types.UID(resp.Header.Get("X-Kubernetes-PF-PriorityLevel-UID"))
	}
	if got := priorityOf("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/" + leaf); got != nodeHigh.UID {
		t.Errorf("leafsync's Lease request ran at priority level %q, want node-high (%s)", got, nodeHigh.UID)
	}
	if got := priorityOf("/api/v1/nodes/" + leaf); got == nodeHigh.UID || got == "" {
		t.Errorf("leafsync's Node read ran at priority level %q: the FlowSchema matches too much (or APF is off)", got)
	}
	// Its own Leases in the release namespace (leader election, a shard
	// Lease, a member Lease: leader election in all but name) get
	// controllers' leader-election priority level; the informer's list of
	// them and its other reads there do not.
	leaderElection, err := hc.FlowcontrolV1().PriorityLevelConfigurations().Get(ctx, "leader-election", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ownLeases := "/apis/coordination.k8s.io/v1/namespaces/" + leafsyncNamespace + "/leases"
	for _, name := range []string{"leafsync-leader", shard.ShardLeaseName("leafsync-0"), shard.MemberLeaseName("member-a")} {
		if got := priorityOf(ownLeases + "/" + name); got != leaderElection.UID {
			t.Errorf("leafsync's request on its Lease %s ran at priority level %q, want leader-election (%s)", name, got, leaderElection.UID)
		}
	}
	for _, path := range []string{ownLeases, "/api/v1/namespaces/" + leafsyncNamespace + "/configmaps/leafsync-config"} {
		if got := priorityOf(path); got == leaderElection.UID || got == nodeHigh.UID || got == "" {
			t.Errorf("leafsync's GET %s ran at priority level %q: a FlowSchema matches too much (or APF is off)", path, got)
		}
	}

	member := f.members["member-a"]
	member.proxy.Cut()
	harness.Eventually(t, 20*time.Second, "cordon under the chart's RBAC", func() error {
		if !hasTaint(f.node(t, leaf), leafnode.TaintUnreachable, corev1.TaintEffectNoSchedule) {
			return fmt.Errorf("not cordoned")
		}
		return nil
	})
	if err := member.proxy.Heal(); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 30*time.Second, "transition Events on the leaf", func() error {
		evs, err := hc.EventsV1().Events("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Regarding.Kind == "Node" && e.Regarding.Name == leaf && strings.HasPrefix(e.Reason, "Leaf") {
				return nil
			}
		}
		return fmt.Errorf("none of %d events is about the leaf", len(evs.Items))
	})

	// kubectl leafsync status, with the flap's penalty read from the state
	// store (the kube backend: a ConfigMap per member).
	kcFile := filepath.Join(t.TempDir(), "host.kubeconfig")
	if err := os.WriteFile(kcFile, f.host.Kubeconfig(), 0o600); err != nil {
		t.Fatal(err)
	}
	var rows []struct {
		Cluster, Leaf, State, Link, Penalty string
	}
	harness.Eventually(t, 30*time.Second, "kubectl leafsync status", func() error {
		out, err := exec.Command(harness.Bin(t, "kubectl-leafsync"), "status", "--kubeconfig", kcFile, "-n", leafsyncNamespace, "-o", "json").Output()
		if err != nil {
			return err
		}
		if err := json.Unmarshal(out, &rows); err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		if len(rows) != 1 || rows[0].Cluster != "member-a" || rows[0].Leaf != leaf || rows[0].State != "Ready" || rows[0].Link != "Connected" ||
			rows[0].Penalty == "" || rows[0].Penalty == "0" {
			return fmt.Errorf("rows %+v", rows)
		}
		return nil
	})
	table, err := exec.Command(harness.Bin(t, "kubectl-leafsync"), "status", "--kubeconfig", kcFile, "-n", leafsyncNamespace).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, table)
	}
	t.Logf("leafsync status:\n%s", table)

	if err := hc.CoreV1().Secrets(leafsyncNamespace).Delete(ctx, "member-member-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitGone(t, "leaf node", func() error { _, err := hc.CoreV1().Nodes().Get(ctx, leaf, metav1.GetOptions{}); return err })

	if err := ls.Terminate(15 * time.Second); err != nil {
		t.Fatalf("leafsync exit: %v", err)
	}
	logs, err := os.ReadFile(ls.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(strings.ToLower(string(logs)), "forbidden"); n > 0 {
		for _, line := range strings.Split(string(logs), "\n") {
			if strings.Contains(strings.ToLower(line), "forbidden") {
				t.Log(line)
			}
		}
		t.Fatalf("leafsync hit %d forbidden errors with the chart's RBAC", n)
	}
	// The chart's Deployment never ran here (kwok simulates the host's
	// only worker): its pre-delete hook runs for real in TestHelmInstall.
	helm(t, "uninstall", "leafsync", "-n", leafsyncNamespace, "--kubeconfig", hostKC, "--no-hooks")
}
