//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

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
// uninstall hook and the node fence follow the names and can be turned off.
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
}
