package harness

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// process is one control-plane binary started by the harness. Its output
// goes to a log file in the test's log folder. It is started with
// Pdeathsig=SIGKILL so that it dies with the test binary even when the test
// panics or times out, and in its own process group so that a Ctrl-C aimed
// at the test does not kill it before the harness tears down in order.
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{}
	err     error
}

func startProcess(logDir, name, bin string, args ...string) (*process, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%s binary not found at %s: run `make tools` first (%w)", name, bin, err)
	}
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logFile, "# %s %q\n# started %s\n", bin, args, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// Exited reports whether the process has ended, and how.
func (p *process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Stop asks the process to end and kills it after grace. kube-apiserver can
// linger for tens of seconds on SIGTERM; tests do not wait for that.
func (p *process) Stop(grace time.Duration) {
	if exited, _ := p.Exited(); exited {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	_ = p.cmd.Process.Signal(syscall.SIGCONT) // a paused process cannot act on SIGTERM
	select {
	case <-p.done:
		return
	case <-time.After(grace):
	}
	p.Kill()
}

// Pause stops the process (SIGSTOP) as a long GC pause, a frozen VM or a
// throttled container would: it keeps its connections and its memory, and
// acts on its stale view of the world the moment it is resumed.
func (p *process) Pause() error { return p.cmd.Process.Signal(syscall.SIGSTOP) }

// Resume continues a paused process (SIGCONT).
func (p *process) Resume() error { return p.cmd.Process.Signal(syscall.SIGCONT) }

// Kill ends the process at once, as a crash would.
func (p *process) Kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Pid is the operating-system process id.
func (p *process) Pid() int { return p.cmd.Process.Pid }

var errExited = errors.New("process exited")

// waitFor polls check until it succeeds, the process exits, or the timeout
// passes. The error names the process and points at its log.
func (p *process) waitFor(timeout time.Duration, what string, check func() error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		if exited, err := p.Exited(); exited {
			return fmt.Errorf("%s %w before %s (%v); see %s", p.name, errExited, what, err, p.logPath)
		}
		if last = check(); last == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not %s after %s: %v; see %s", p.name, what, timeout, last, p.logPath)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Process is a program a test started with StartBinary.
type Process struct{ p *process }

// StartBinary runs bin with args, its output in <name>.log in the test's
// log folder; it is stopped when the test ends if still running.
func StartBinary(t TB, name, bin string, args ...string) *Process {
	t.Helper()
	p, err := startProcess(LogDir(t), name, bin, args...)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	t.Cleanup(func() { p.Stop(5 * time.Second) })
	return &Process{p}
}

// Stop sends SIGTERM and kills the process after grace.
func (p *Process) Stop(grace time.Duration) { p.p.Stop(grace) }

// Pause (SIGSTOP) and Resume (SIGCONT) freeze and continue the process.
func (p *Process) Pause() error  { return p.p.Pause() }
func (p *Process) Resume() error { return p.p.Resume() }

// Exited reports whether the process has ended, and how.
func (p *Process) Exited() (bool, error) { return p.p.Exited() }

// LogPath is the file the process logs to.
func (p *Process) LogPath() string { return p.p.logPath }

// httpOK returns nil when a GET of url answers 200 within a second: the
// health check of the processes the harness starts.
func httpOK(url string) error {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}
