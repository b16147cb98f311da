//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/leafsync/leafsync/internal/syncer/config"
	"github.com/leafsync/leafsync/test/harness"
)

// TestHelmChartRefusesBadValues: helm refuses each values file of
// testdata/chart-bad-values (the chart's values.schema.json, generated
// from leafsync's types), at lint and at install time, with a message that
// names the bad key (the file's first line: "# want: …").
func TestHelmChartRefusesBadValues(t *testing.T) {
	files, err := filepath.Glob("testdata/chart-bad-values/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no bad values files: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			first, _, _ := strings.Cut(string(data), "\n")
			want, ok := strings.CutPrefix(first, "# want: ")
			if !ok {
				t.Fatalf("%s does not start with '# want: <message>'", f)
			}
			for _, args := range [][]string{
				{"lint", "--strict", chartDir, "-f", f},
				{"template", "leafsync", chartDir, "-f", f},
			} {
				out, err := exec.Command(harness.Bin(t, "helm"), args...).CombinedOutput()
				if err == nil {
					t.Errorf("helm %s accepted %s", args[0], f)
					continue
				}
				if !strings.Contains(string(out), want) {
					t.Errorf("helm %s: the error does not say %q:\n%s", args[0], want, out)
				}
			}
		})
	}
}

// TestHelmChartValues: what the chart's values turn into. Leader election
// is on with one replica too; pod labels, annotations, extra arguments and
// topology spread reach the pod; name overrides name the objects; the
// ServiceMonitor selects the Service by the selector labels alone; with
// force, ServiceMonitor and PrometheusRule render without their CRDs; the
// uninstall hook, the node fence and the heartbeat FlowSchemas follow the
// names and can be turned off.
func TestHelmChartValues(t *testing.T) {
	dir := t.TempDir()
	values := filepath.Join(dir, "values.yaml")
	if err := os.WriteFile(values, []byte(`
replicaCount: 1
fullnameOverride: fleet-manager
podLabels: {team: platform}
podAnnotations: {example.com/owner: platform}
extraArgs: [--member-qps=40]
topologySpreadConstraints:
- maxSkew: 1
  topologyKey: topology.kubernetes.io/zone
  whenUnsatisfiable: ScheduleAnyway
  labelSelector: {matchLabels: {app.kubernetes.io/name: leafsync}}
metrics: {serviceMonitor: {force: true}}
prometheusRule: {force: true}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	helm(t, "lint", "--strict", chartDir, "-f", values)
	rendered := helm(t, "template", "leafsync", chartDir, "-n", leafsyncNamespace, "-f", values)
	objs := map[string]map[string]any{}
	var deploy appsv1.Deployment
	for _, doc := range strings.Split(rendered, "\n---") {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("rendered chart is not YAML: %v\n%s", err, doc)
		}
		kind, _ := obj["kind"].(string)
		if kind == "" {
			continue
		}
		objs[kind] = obj
		if kind == "Deployment" {
			if err := yaml.Unmarshal([]byte(doc), &deploy); err != nil {
				t.Fatal(err)
			}
		}
	}
	if deploy.Name != "fleet-manager" {
		t.Errorf("Deployment named %q, want the fullnameOverride fleet-manager", deploy.Name)
	}
	pod := deploy.Spec.Template
	args := strings.Join(pod.Spec.Containers[0].Args, " ")
	for _, want := range []string{"--leader-elect=true", "--member-qps=40"} {
		if !strings.Contains(args, want) {
			t.Errorf("leafsync's arguments %q lack %s", args, want)
		}
	}
	if pod.Labels["team"] != "platform" || pod.Labels["app.kubernetes.io/name"] != "leafsync" {
		t.Errorf("pod labels %v", pod.Labels)
	}
	if pod.Annotations["example.com/owner"] != "platform" || pod.Annotations["checksum/config"] == "" {
		t.Errorf("pod annotations %v", pod.Annotations)
	}
	if n := len(pod.Spec.TopologySpreadConstraints); n != 1 {
		t.Errorf("%d topology spread constraints, want 1", n)
	}
	for _, kind := range []string{"ServiceMonitor", "PrometheusRule"} {
		if objs[kind] == nil {
			t.Errorf("no %s rendered with force, without its CRD", kind)
		}
	}
	if sm := objs["ServiceMonitor"]; sm != nil {
		sel, _ := yaml.Marshal(sm["spec"].(map[string]any)["selector"])
		want := "matchLabels:\n  app.kubernetes.io/instance: leafsync\n  app.kubernetes.io/name: leafsync\n"
		if string(sel) != want {
			t.Errorf("ServiceMonitor selector:\n%s\nwant the selector labels alone:\n%s", sel, want)
		}
	}
	if objs["PodDisruptionBudget"] != nil {
		t.Errorf("a PodDisruptionBudget for one replica")
	}
	// The uninstall hook stops the Deployment by its overridden name; with
	// uninstall.cleanup off there is no hook.
	if job, _ := yaml.Marshal(objs["Job"]); !strings.Contains(string(job), "--deployment=fleet-manager") || !strings.Contains(string(job), "helm.sh/hook: pre-delete") {
		t.Errorf("uninstall hook Job:\n%s\nwant a pre-delete hook with --deployment=fleet-manager", job)
	}
	if off := helm(t, "template", "leafsync", chartDir, "-f", values, "--set", "uninstall.cleanup=false"); strings.Contains(off, "kind: Job") {
		t.Errorf("uninstall.cleanup=false still renders the hook Job")
	}
	// The node fence matches the ServiceAccount leafsync runs as, by its
	// overridden name; nodeFence.enabled=false turns it off.
	fence := "name: fleet-manager-node-fence"
	identity := `request.userInfo.username == "system:serviceaccount:` + leafsyncNamespace + `:fleet-manager"`
	if !strings.Contains(rendered, fence) || !strings.Contains(rendered, identity) {
		t.Errorf("the node fence: want %q matching %s", fence, identity)
	}
	if off := helm(t, "template", "leafsync", chartDir, "-f", values, "--set", "nodeFence.enabled=false"); strings.Contains(off, "node-fence") {
		t.Errorf("nodeFence.enabled=false still renders the node fence")
	}
	// Both heartbeat FlowSchemas (the leaves' Leases, leafsync's own) follow
	// the names; heartbeatPriority.enabled=false turns both off.
	for _, name := range []string{"name: fleet-manager-leaf-heartbeats", "name: fleet-manager-leader-election"} {
		if !strings.Contains(rendered, name) {
			t.Errorf("no FlowSchema %q rendered", name)
		}
	}
	if off := helm(t, "template", "leafsync", chartDir, "-f", values, "--set", "heartbeatPriority.enabled=false"); strings.Contains(off, "kind: FlowSchema") {
		t.Errorf("heartbeatPriority.enabled=false still renders a FlowSchema")
	}
}

// renderedChart is what `helm template` made of the chart, by kind (the
// last object of each kind).
type renderedChart struct {
	deploy appsv1.Deployment
	role   rbacv1.Role // the Role of leafsync's own namespace
	pdb    bool
	config config.Config
}

func renderChart(t *testing.T, release string, args ...string) renderedChart {
	t.Helper()
	out := helm(t, append([]string{"template", release, chartDir, "-n", leafsyncNamespace}, args...)...)
	var r renderedChart
	for _, doc := range strings.Split(out, "\n---") {
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
			Data map[string]string `json:"data"`
		}
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("rendered chart is not YAML: %v\n%s", err, doc)
		}
		var err error
		switch {
		case meta.Kind == "Deployment":
			err = yaml.Unmarshal([]byte(doc), &r.deploy)
		case meta.Kind == "Role" && meta.Metadata.Namespace == leafsyncNamespace && !strings.HasSuffix(meta.Metadata.Name, "-uninstall"):
			err = yaml.Unmarshal([]byte(doc), &r.role)
		case meta.Kind == "PodDisruptionBudget":
			r.pdb = true
		case meta.Kind == "ConfigMap" && strings.HasSuffix(meta.Metadata.Name, "-config"):
			// Loaded and validated as leafsync run loads it.
			f := filepath.Join(t.TempDir(), "config.yaml")
			if err = os.WriteFile(f, []byte(meta.Data["config.yaml"]), 0o600); err == nil {
				if r.config, err = config.Load(f); err == nil {
					err = r.config.Validate()
				}
			}
		}
		if err != nil {
			t.Fatalf("%s %s: %v", meta.Kind, meta.Metadata.Name, err)
		}
	}
	return r
}

// podName is the env var that names the replica, from the downward API.
func podName(d appsv1.Deployment) *corev1.EnvVar {
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if e.Name == "POD_NAME" {
			return &e
		}
	}
	return nil
}

// TestHelmChartSharding: more than one replica share the members. With
// replicaCount 3 the chart turns sharding on in leafsync's config with the
// release as the ring, names each replica after its pod (POD_NAME from the
// downward API), keeps a PodDisruptionBudget of one, rolls a new replica
// in before an old one goes (maxUnavailable 0, maxSurge 1), gives a
// stopping replica its drain timeout and 15s more, and lets leafsync
// list and watch the Leases of its namespace; a replica name in the
// config is refused. With one replica, or with config.sharding.enabled
// false, none of it: leader election alone.
func TestHelmChartSharding(t *testing.T) {
	sharded := renderChart(t, "fleet", "--set", "replicaCount=3", "--set", "config.sharding.drainTimeout=1m")
	if s := sharded.config.Sharding; !s.Enabled || s.Ring != "fleet" {
		t.Errorf("replicaCount 3: config sharding %+v, want enabled with ring fleet (the release)", s)
	}
	if !sharded.pdb {
		t.Errorf("replicaCount 3: no PodDisruptionBudget")
	}
	if e := podName(sharded.deploy); e == nil || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("replicaCount 3: POD_NAME %+v, want the pod's name from the downward API", e)
	}
	if s := sharded.deploy.Spec.Strategy; s.Type != appsv1.RollingUpdateDeploymentStrategyType || s.RollingUpdate == nil ||
		s.RollingUpdate.MaxUnavailable.String() != "0" || s.RollingUpdate.MaxSurge.String() != "1" {
		t.Errorf("replicaCount 3: strategy %+v, want RollingUpdate maxUnavailable 0 maxSurge 1", s)
	}
	if g := sharded.deploy.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g < 60+15 {
		t.Errorf("replicaCount 3: terminationGracePeriodSeconds %v, want at least drainTimeout (1m) + 15s", g)
	}
	if !roleAllowsLeases(sharded.role, "get", "list", "watch", "create", "update") {
		t.Errorf("replicaCount 3: the Role %+v does not let leafsync keep its shard and member Leases", sharded.role.Rules)
	}

	for name, args := range map[string][]string{
		"replicaCount 1":                         {"--set", "replicaCount=1"},
		"replicaCount 3, sharding.enabled false": {"--set", "replicaCount=3", "--set", "config.sharding.enabled=false"},
	} {
		r := renderChart(t, "fleet", args...)
		if r.config.Sharding.Enabled {
			t.Errorf("%s: sharding enabled", name)
		}
		if e := podName(r.deploy); e != nil {
			t.Errorf("%s: POD_NAME set", name)
		}
		if s := r.deploy.Spec.Strategy; s.Type != "" {
			t.Errorf("%s: strategy %+v, want the Deployment's default", name, s)
		}
		if g := r.deploy.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g != 30 {
			t.Errorf("%s: terminationGracePeriodSeconds %v, want 30", name, g)
		}
		if roleAllowsLeases(r.role, "list") || !roleAllowsLeases(r.role, "get", "create", "update") {
			t.Errorf("%s: the Role's Lease rights %+v, want leader election's alone (get, create, update)", name, r.role.Rules)
		}
	}
	if renderChart(t, "fleet", "--set", "replicaCount=1").pdb {
		t.Errorf("replicaCount 1: a PodDisruptionBudget")
	}
	// One replica name for all would make them one replica.
	out, err := exec.Command(harness.Bin(t, "helm"), "template", "fleet", chartDir, "--set", "replicaCount=3", "--set", "config.sharding.replica=leafsync-0").CombinedOutput()
	if want := "config.sharding.replica would give every replica one name"; err == nil || !strings.Contains(string(out), want) {
		t.Errorf("helm template with replicaCount 3 and config.sharding.replica: %v, want the error %q:\n%.300s", err, want, out)
	}
}

// roleAllowsLeases: the Role grants every verb on coordination.k8s.io
// Leases of any name.
func roleAllowsLeases(r rbacv1.Role, verbs ...string) bool {
	for _, v := range verbs {
		ok := false
		for _, rule := range r.Rules {
			if slices.Contains(rule.APIGroups, "coordination.k8s.io") && slices.Contains(rule.Resources, "leases") &&
				len(rule.ResourceNames) == 0 && slices.Contains(rule.Verbs, v) {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}
