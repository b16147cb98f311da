package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Leafsync is the real leafsync binary running as a separate process, as it
// runs in production.
type Leafsync struct {
	Name        string
	HealthAddr  string
	MetricsAddr string
	proc        *process
}

// LeafsyncBinary is $LEAFSYNC_BINARY, or bin/leafsync (built by `make build`).
func LeafsyncBinary(t TB) string {
	t.Helper()
	if b := os.Getenv("LEAFSYNC_BINARY"); b != "" {
		return b
	}
	return Bin(t, "leafsync")
}

// StartLeafsync runs `leafsync run` with the host kubeconfig and extra
// arguments, on free ports for metrics and health, and waits until /readyz
// answers 200. It is killed when the test ends if still running.
func StartLeafsync(t TB, name string, hostKubeconfig []byte, args ...string) *Leafsync {
	t.Helper()
	dir := filepath.Join(LogDir(t), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("harness: %v", err)
	}
	kc := filepath.Join(dir, "host.kubeconfig")
	if err := os.WriteFile(kc, hostKubeconfig, 0o600); err != nil {
		t.Fatalf("harness: %v", err)
	}
	ports := freePorts(t, 2)
	l := &Leafsync{
		Name:        name,
		MetricsAddr: fmt.Sprintf("127.0.0.1:%d", ports[0]),
		HealthAddr:  fmt.Sprintf("127.0.0.1:%d", ports[1]),
	}
	all := append([]string{"run",
		"--kubeconfig=" + kc,
		"--metrics-bind-address=" + l.MetricsAddr,
		"--health-probe-bind-address=" + l.HealthAddr,
		"--log-level=debug",
	}, args...)
	var err error
	if l.proc, err = startProcess(dir, "leafsync", LeafsyncBinary(t), all...); err != nil {
		t.Fatalf("harness: %v", err)
	}
	t.Cleanup(func() { l.proc.Stop(5 * time.Second) })
	if err := l.proc.waitFor(60*time.Second, "ready", func() error { return l.Ready() }); err != nil {
		t.Fatalf("harness: %v", err)
	}
	return l
}

// Pid is the process id (for reading its resource use from /proc).
func (l *Leafsync) Pid() int { return l.proc.cmd.Process.Pid }

// Ready returns nil when /readyz answers 200.
func (l *Leafsync) Ready() error { return httpOK("http://" + l.HealthAddr + "/readyz") }

// Terminate sends SIGTERM and waits up to timeout for leafsync to exit. It
// returns the exit error (nil for exit status 0).
func (l *Leafsync) Terminate(timeout time.Duration) error {
	_ = l.proc.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-l.proc.done:
		return l.proc.err
	case <-time.After(timeout):
		l.proc.Kill()
		return fmt.Errorf("leafsync did not exit within %s of SIGTERM; see %s", timeout, l.proc.logPath)
	}
}

// Kill ends leafsync at once, as a crash or a node loss would.
func (l *Leafsync) Kill() { l.proc.Kill() }

// Pause freezes leafsync (SIGSTOP); Resume lets it go on where it was.
func (l *Leafsync) Pause() error  { return l.proc.Pause() }
func (l *Leafsync) Resume() error { return l.proc.Resume() }

// Exited reports whether leafsync has ended, and with which error.
func (l *Leafsync) Exited() (bool, error) { return l.proc.Exited() }

// LogPath is the file leafsync logs to.
func (l *Leafsync) LogPath() string { return l.proc.logPath }
