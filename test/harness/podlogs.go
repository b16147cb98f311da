package harness

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// FollowPodLogs copies the log of every pod matching selector in
// namespace, from when it runs until its container stops, to
// <LogDir>/pods/<pod>.log. The kubelet removes a deleted pod's logs; these
// copies stay, so a replica rolled out during the test can still be read
// after it. (Logs come from the kubelet through the API server: the
// cluster needs ClusterOptions.KubeletClientCert.)
func FollowPodLogs(t TB, c *Cluster, namespace, selector string) {
	t.Helper()
	dir := filepath.Join(LogDir(t), "pods")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("harness: %v", err)
	}
	cfg := c.RESTConfig()
	cfg.Timeout = 0 // a followed log is one long request
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	following := map[string]bool{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
			list, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
			if err != nil {
				return false, nil // the next poll retries
			}
			for _, p := range list.Items {
				if following[p.Name] || p.Status.Phase != corev1.PodRunning {
					continue
				}
				following[p.Name] = true
				wg.Add(1)
				go func(name string) {
					defer wg.Done()
					copyPodLog(ctx, cs, namespace, name, filepath.Join(dir, name+".log"))
				}(p.Name)
			}
			return false, nil
		})
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// copyPodLog follows one pod's log into path; an error ends the copy and
// is written at its end.
func copyPodLog(ctx context.Context, cs kubernetes.Interface, namespace, name, path string) {
	f, err := os.Create(path)
	if err != nil {
		return
	}
	defer f.Close()
	stream, err := cs.CoreV1().Pods(namespace).GetLogs(name, &corev1.PodLogOptions{Follow: true}).Stream(ctx)
	if err == nil {
		_, err = io.Copy(f, stream)
		stream.Close()
	}
	if err != nil && ctx.Err() == nil {
		_, _ = io.WriteString(f, "\nharness: log copy ended: "+err.Error()+"\n")
	}
}
