//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
	"github.com/leafsync/leafsync/test/harness"
)

// kubectlBinary is $KUBECTL, or bin/kubectl (make tools builds it).
func kubectlBinary(t *testing.T) string {
	t.Helper()
	if k := os.Getenv("KUBECTL"); k != "" {
		return k
	}
	k := harness.Bin(t, "kubectl")
	if _, err := os.Stat(k); err != nil {
		t.Fatalf("no kubectl: run make tools, or set KUBECTL (%v)", err)
	}
	return k
}

// kwokStreams is the member's kwok configuration for the test pods
// (namespace apps): logs from files (in the CRI log format, as a kubelet
// keeps them), exec as local processes, and port 8080 forwarded to a
// local address.
func kwokStreams(dir string, forwardTo int) string {
	return fmt.Sprintf(`apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterLogs
metadata:
  name: apps-logs
spec:
  selector:
    matchNamespaces: [apps]
  logs:
  - containers: [app]
    logsFile: %[1]s/current.log
    previousLogsFile: %[1]s/previous.log
    follow: true
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterExec
metadata:
  name: apps-exec
spec:
  selector:
    matchNamespaces: [apps]
  execs:
  - local:
      workDir: %[1]s
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterAttach
metadata:
  name: apps-attach
spec:
  selector:
    matchNamespaces: [apps]
  attaches:
  - containers: [app]
    logsFile: %[1]s/attach.log
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterPortForward
metadata:
  name: apps-port-forward
spec:
  selector:
    matchNamespaces: [apps]
  forwards:
  - ports: [8080]
    target:
      address: 127.0.0.1
      port: %[2]d
`, dir, forwardTo)
}

// TestKubeletAPI: kubectl logs (also -f and --previous), exec and
// port-forward from the host reach a pod on a leaf, running (simulated by
// kwok) in the member; a user without nodes/proxy, a client without a
// certificate of the host's client CA, and a pod not on a leaf are
// refused; a cut member gives a clear error at once.
func TestKubeletAPI(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "attach.log"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "current.log"), []byte("2026-01-01T00:00:00.000000000Z stdout F hello from the member\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "previous.log"), []byte("2025-12-31T23:59:59.000000000Z stdout F the previous container said goodbye\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// What port-forward reaches: a web server in the test.
	web, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = http.Serve(web, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "hello through port-forward") }))
	}()
	t.Cleanup(func() { web.Close() })

	f := newFleet(t, harness.HostOptions{KubeletClientCert: true}, harness.MemberOptions{
		Name: "member-a", Nodes: 2, KwokConfig: kwokStreams(dir, web.Addr().(*net.TCPAddr).Port),
	})
	member := f.members["member-a"]
	if err := member.LiftNotReadyTaints(ctx); err != nil {
		t.Fatal(err)
	}
	if err := member.StartScheduler(); err != nil {
		t.Fatal(err)
	}
	hc := f.host.Client()
	if err := f.host.EnsureNamespace(ctx, appsNS); err != nil {
		t.Fatal(err)
	}
	// The host API server reaches kubelets as kubeadm's does: bound to
	// system:kubelet-api-admin (nodes/proxy, nodes/log, ...).
	if _, err := hc.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-apiserver-kubelet-client"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:kubelet-api-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: harness.KubeletClientUser}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	port, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig + fmt.Sprintf(`kubeletAPI:
  enabled: true
  port: %d
  advertiseAddress: 127.0.0.1
  connectTimeout: 2s
`, port)
	if err := os.WriteFile(f.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	first := f.startLeafsync(t, "leafsync-a", "--leader-elect")
	f.register(t, "member-a", nil)
	const leaf = "leaf-member-a"
	f.waitLeafReady(t, leaf, time.Minute)

	// Tolerations long enough that the pod outlives the cut below.
	workload := leafWorkload("web", 1, leaf)
	workload.TolerationSeconds = 300
	f.createWorkloads(t, []harness.LeafWorkload{workload}, nil)
	pod := waitHostPodsReady(t, f, "app=web", 1, 90*time.Second, leaf)[0]
	harness.Eventually(t, 30*time.Second, "leaf advertises the kubelet API", func() error {
		n := f.node(t, leaf)
		if n.Status.DaemonEndpoints.KubeletEndpoint.Port != int32(port) {
			return fmt.Errorf("kubelet port %d", n.Status.DaemonEndpoints.KubeletEndpoint.Port)
		}
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP && a.Address == "127.0.0.1" {
				return nil
			}
		}
		return fmt.Errorf("addresses %v", n.Status.Addresses)
	})
	harness.Eventually(t, 30*time.Second, "host pod synced", func() error {
		p, err := hc.CoreV1().Pods(appsNS).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Annotations[podmeta.AnnotationMemberUID] == "" {
			return fmt.Errorf("no %s yet", podmeta.AnnotationMemberUID)
		}
		return nil
	})

	kubeconfig, err := f.host.WriteKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	kubectlBin := kubectlBinary(t)
	kubectl := func(stdin string, args ...string) (string, error) {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		cmd := exec.CommandContext(cctx, kubectlBin, append([]string{"--kubeconfig=" + kubeconfig, "-n", appsNS}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}
	// mustFailNamingTheMember: kubectl logs and exec fail, saying the
	// member is the cause, within limit (a generous liveness bound; the
	// figures are logged).
	mustFailNamingTheMember := func(t *testing.T, situation string, limit time.Duration) {
		t.Helper()
		for _, args := range [][]string{{"logs", pod.Name}, {"exec", pod.Name, "--", "true"}} {
			start := time.Now()
			out, err := kubectl("", args...)
			took := time.Since(start)
			if err == nil || !strings.Contains(out, "member") {
				t.Fatalf("kubectl %s with the member %s: %v: %s", args[0], situation, err, out)
			}
			t.Logf("kubectl %s with the member %s: failed after %s: %s", args[0], situation, took.Round(time.Millisecond), strings.TrimSpace(out))
			if took > limit {
				t.Errorf("kubectl %s with the member %s took %s to fail", args[0], situation, took)
			}
		}
	}

	t.Run("kubectl logs", func(t *testing.T) {
		out, err := kubectl("", "logs", pod.Name)
		if err != nil || !strings.Contains(out, "hello from the member") {
			t.Fatalf("kubectl logs: %v: %s", err, out)
		}
		out, err = kubectl("", "logs", "--previous", pod.Name)
		if err != nil || !strings.Contains(out, "the previous container said goodbye") || strings.Contains(out, "hello from the member") {
			t.Fatalf("kubectl logs --previous: %v: %s", err, out)
		}
	})

	t.Run("kubectl logs -f streams new lines", func(t *testing.T) {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		want, stop := followOutput(t, exec.CommandContext(cctx, kubectlBin, "--kubeconfig="+kubeconfig, "-n", appsNS, "logs", "-f", pod.Name))
		defer stop()
		want("hello from the member")
		lf, err := os.OpenFile(filepath.Join(dir, "current.log"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		written := time.Now()
		fmt.Fprintf(lf, "%s stdout F a new line\n", time.Now().UTC().Format(time.RFC3339Nano))
		lf.Close()
		want("a new line")
		t.Logf("a line appended to the member container's log reached kubectl logs -f after %s", time.Since(written).Round(time.Millisecond))
	})

	t.Run("kubectl attach streams the container's output", func(t *testing.T) {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		want, stop := followOutput(t, exec.CommandContext(cctx, kubectlBin, "--kubeconfig="+kubeconfig, "-n", appsNS, "attach", pod.Name, "-c", "app"))
		defer stop()
		// kwok attaches to its output file from the end: write lines until
		// one written after kubectl attached comes back.
		done := make(chan struct{})
		defer close(done)
		go func() {
			for i := 0; ; i++ {
				if f, err := os.OpenFile(filepath.Join(dir, "attach.log"), os.O_APPEND|os.O_WRONLY, 0); err == nil {
					fmt.Fprintf(f, "%s stdout F attached line %d\n", time.Now().UTC().Format(time.RFC3339Nano), i)
					f.Close()
				}
				select {
				case <-done:
					return
				case <-time.After(300 * time.Millisecond):
				}
			}
		}()
		want("attached line")
	})

	t.Run("kubectl exec with stdin and stdout", func(t *testing.T) {
		// One line of stdin, not up to its end: kwok v0.8.0 never closes a
		// local command's stdin pipe, so a command that reads to EOF would
		// not end (a kubelet closes it).
		out, err := kubectl("ping from the host\n", "exec", "-i", pod.Name, "--", "sh", "-c", `read line; echo pwd=$(pwd); echo "$line" | tr a-z A-Z`)
		if err != nil || !strings.Contains(out, "PING FROM THE HOST") || !strings.Contains(out, "pwd="+dir) {
			t.Fatalf("kubectl exec: %v: %s", err, out)
		}
		out, err = kubectl("", "exec", pod.Name, "--", "sh", "-c", "exit 3")
		// (kwok reports a local command's failure as "exit status 3", a
		// kubelet as "command terminated with exit code 3".)
		if err == nil || !(strings.Contains(out, "exit code 3") || strings.Contains(out, "exit status 3")) {
			t.Fatalf("kubectl exec of a failing command: %v: %s", err, out)
		}
	})

	t.Run("kubectl port-forward", func(t *testing.T) {
		local, err := harness.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		cmd := exec.CommandContext(cctx, kubectlBin, "--kubeconfig="+kubeconfig, "-n", appsNS, "port-forward", "pod/"+pod.Name, fmt.Sprintf("%d:8080", local))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cancel(); _ = cmd.Wait() }()
		harness.Eventually(t, 30*time.Second, "HTTP through kubectl port-forward", func() error {
			resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", local))
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if string(body) != "hello through port-forward" {
				return fmt.Errorf("got %q", body)
			}
			return nil
		})
	})

	t.Run("refusals", func(t *testing.T) {
		url := fmt.Sprintf("https://127.0.0.1:%d/containerLogs/%s/%s/app", port, appsNS, pod.Name)
		get := func(cert []tls.Certificate) (int, string) {
			t.Helper()
			c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
				InsecureSkipVerify: true, Certificates: cert, // the serving certificate is self-signed here
			}}}
			resp, err := c.Get(url)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(body)
		}
		certFor := func(cn string) []tls.Certificate {
			certPEM, keyPEM, err := f.host.IssueClientCert(cn, cn, nil)
			if err != nil {
				t.Fatal(err)
			}
			c, err := tls.X509KeyPair(certPEM, keyPEM)
			if err != nil {
				t.Fatal(err)
			}
			return []tls.Certificate{c}
		}
		if code, body := get(nil); code != http.StatusUnauthorized {
			t.Errorf("no client certificate: %d %s, want 401", code, body)
		}
		if code, body := get(certFor("alice")); code != http.StatusForbidden || !strings.Contains(body, "nodes") {
			t.Errorf("alice (no nodes/proxy): %d %s, want 403", code, body)
		} else {
			t.Logf("alice: %d %s", code, strings.TrimSpace(body))
		}
		if code, body := get(certFor(harness.KubeletClientUser)); code != http.StatusOK || !strings.Contains(body, "hello from the member") {
			t.Errorf("the API server's kubelet client: %d %s, want 200", code, body)
		}
		// A pod on an ordinary host node is not leafsync's to serve.
		if _, err := hc.CoreV1().Pods(appsNS).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "on-worker", Namespace: appsNS},
			Spec:       corev1.PodSpec{NodeName: "host-worker-0", Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		url = fmt.Sprintf("https://127.0.0.1:%d/containerLogs/%s/on-worker/app", port, appsNS)
		if code, body := get(certFor(harness.KubeletClientUser)); code != http.StatusNotFound {
			t.Errorf("pod not on a leaf: %d %s, want 404", code, body)
		}
	})

	t.Run("latency", func(t *testing.T) {
		logs, execs := measureRoundTrips(t, f, pod.Name, 20)
		t.Logf("KUBELETAPI latency over 20 round trips through host API server → leafsync → member API server → kwok: logs median %s (min %s, max %s); exec `true` median %s (min %s, max %s)",
			logs[len(logs)/2], logs[0], logs[len(logs)-1], execs[len(execs)/2], execs[0], execs[len(execs)-1])
		start := time.Now()
		if out, err := kubectl("", "logs", pod.Name); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		kl := time.Since(start)
		start = time.Now()
		if out, err := kubectl("", "exec", pod.Name, "--", "true"); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		t.Logf("KUBELETAPI kubectl process, start to exit: logs %s, exec true %s", kl.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	})

	t.Run("requests are counted by verb and answer", func(t *testing.T) {
		m := scrape(t, first)
		for _, c := range []struct{ verb, code string }{
			{"containerLogs", "200"}, {"exec", "upgraded"}, {"attach", "upgraded"}, {"portForward", "upgraded"},
			{"containerLogs", "401"}, {"containerLogs", "403"}, {"containerLogs", "404"},
		} {
			if v := metricValue(m, "leafsync_kubelet_api_requests_total", "verb", c.verb, "code", c.code); v < 1 {
				t.Errorf("leafsync_kubelet_api_requests_total{verb=%q,code=%q} = %g after such requests", c.verb, c.code, v)
			}
		}
	})

	outer := t // the standby must outlive the subtest that starts it
	t.Run("a new leader advertises its own address", func(t *testing.T) {
		// The standby advertises 127.0.0.2 (another loopback address, as
		// another pod would have another IP).
		cfgB := filepath.Join(harness.LogDir(outer), "leafsync-b-config.yaml")
		if err := os.WriteFile(cfgB, []byte(strings.Replace(cfg, "advertiseAddress: 127.0.0.1", "advertiseAddress: 127.0.0.2", 1)), 0o600); err != nil {
			t.Fatal(err)
		}
		f.startLeafsync(outer, "leafsync-b", "--leader-elect", "--config="+cfgB)
		first.Kill()
		killed := time.Now()
		harness.Eventually(t, time.Minute, "leaf advertises the new leader", func() error {
			for _, a := range f.node(t, leaf).Status.Addresses {
				if a.Type == corev1.NodeInternalIP && a.Address == "127.0.0.2" {
					return nil
				}
			}
			return fmt.Errorf("not yet")
		})
		advertised := time.Since(killed)
		harness.Eventually(t, time.Minute, "kubectl logs through the new leader", func() error {
			out, err := kubectl("", "logs", pod.Name)
			if err != nil || !strings.Contains(out, "hello from the member") {
				return fmt.Errorf("%v: %s", err, out)
			}
			return nil
		})
		t.Logf("leader killed: the leaf advertised the new leader after %s, kubectl logs worked again after %s",
			advertised.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))
	})

	t.Run("a silent member fails after connectTimeout", func(t *testing.T) {
		// The fault proxy accepts connections and drops every byte.
		if err := member.proxy.Blackhole(); err != nil {
			t.Fatal(err)
		}
		// Liveness, generous: connectTimeout is 2s.
		mustFailNamingTheMember(t, "silent", 20*time.Second)
		if err := member.proxy.Heal(); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, time.Minute, "kubectl logs after the heal", func() error {
			out, err := kubectl("", "logs", pod.Name)
			if err != nil || !strings.Contains(out, "hello from the member") {
				return fmt.Errorf("%v: %s", err, out)
			}
			return nil
		})
	})

	t.Run("a cut member fails fast with a clear error", func(t *testing.T) {
		member.proxy.Cut()
		mustFailNamingTheMember(t, "cut", 10*time.Second)
		// Once the member is confirmed down, the refusal needs no dial.
		harness.Eventually(t, time.Minute, "leaf NotReady", func() error {
			if s := harness.NodeReady(f.node(t, leaf)); s == corev1.ConditionTrue {
				return fmt.Errorf("Ready=%s", s)
			}
			return nil
		})
		start := time.Now()
		out, err := kubectl("", "logs", pod.Name)
		if err == nil || !strings.Contains(out, "NotReady") {
			t.Fatalf("kubectl logs with the member NotReady: %v: %s", err, out)
		}
		t.Logf("kubectl logs with the member NotReady: failed after %s: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(out))
	})
}

// measureRoundTrips times n logs reads and n execs of `true` through the
// host API server with client-go (no kubectl process start), sorted.
func measureRoundTrips(t *testing.T, f *fleet, pod string, n int) (logs, execs []time.Duration) {
	t.Helper()
	ctx := context.Background()
	hc := f.host.Client()
	cfg := f.host.RESTConfig()
	for i := 0; i < n; i++ {
		start := time.Now()
		if _, err := hc.CoreV1().Pods(appsNS).GetLogs(pod, &corev1.PodLogOptions{Container: "app"}).DoRaw(ctx); err != nil {
			t.Fatal(err)
		}
		logs = append(logs, time.Since(start).Round(100*time.Microsecond))

		req := hc.CoreV1().RESTClient().Post().Resource("pods").Namespace(appsNS).Name(pod).SubResource("exec").
			VersionedParams(&corev1.PodExecOptions{Container: "app", Command: []string{"true"}, Stdout: true, Stderr: true}, scheme.ParameterCodec)
		start = time.Now()
		ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", req.URL().String())
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := ws.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &out}); err != nil {
			t.Fatalf("exec: %v: %s", err, out.String())
		}
		execs = append(execs, time.Since(start).Round(100*time.Microsecond))
	}
	sort.Slice(logs, func(i, j int) bool { return logs[i] < logs[j] })
	sort.Slice(execs, func(i, j int) bool { return execs[i] < execs[j] })
	return logs, execs
}

// followOutput starts cmd (kubectl logs -f, kubectl attach) and returns
// want, which waits up to 30s for a line of its output containing s, and
// stop, which ends it.
func followOutput(t *testing.T, cmd *exec.Cmd) (want func(s string), stop func()) {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	name := strings.Join(cmd.Args[3:], " ")
	want = func(s string) {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("%s ended before %q; stderr: %s", name, s, stderr.String())
				}
				if strings.Contains(l, s) {
					return
				}
			case <-deadline:
				t.Fatalf("no %q from %s within 30s; stderr: %s", s, name, stderr.String())
			}
		}
	}
	stop = func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	return want, stop
}
