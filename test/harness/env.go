// Package harness runs real Kubernetes control planes for leafsync's tests:
// etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok,
// built from source into ./bin by `make tools`, on free loopback ports, plus a
// TCP fault proxy (toxiproxy) to put between a client and a server, and a
// real kubelet node (containerd, the CNI bridge, kube-proxy; node.go) for
// running leafsync's own image.
//
// Every process logs to a per-test folder, printed (with the tail of each log)
// when the test fails. Processes die with the test binary, even on a panic or
// a timeout, and are stopped in reverse order of start by t.Cleanup.
package harness

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// TB is the part of testing.TB the harness needs. *testing.T and *testing.B
// satisfy it; the demo supplies its own.
type TB interface {
	Helper()
	Name() string
	Logf(format string, args ...any)
	Fatalf(format string, args ...any)
	Failed() bool
	Cleanup(func())
}

// RepoRoot finds leafsync's repository root by walking up from the working
// directory to the go.mod of module github.com/leafsync/leafsync.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(data), "module github.com/leafsync/leafsync\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("not inside the leafsync repository (no go.mod of github.com/leafsync/leafsync above the working directory)")
		}
		dir = parent
	}
}

// BinDir is where `make tools` puts the control-plane binaries:
// $LEAFSYNC_BIN_DIR, or ./bin at the repository root.
func BinDir() (string, error) {
	if d := os.Getenv("LEAFSYNC_BIN_DIR"); d != "" {
		return d, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "bin"), nil
}

// Bin returns the path of one binary in BinDir.
func Bin(t TB, name string) string {
	t.Helper()
	dir, err := BinDir()
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	return filepath.Join(dir, name)
}

// logDirs remembers each running test's log folder, so that several
// clusters of one test share it instead of each clearing it.
var (
	logDirsMu sync.Mutex
	logDirs   = map[string]string{}
)

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// LogDir returns (and creates) the per-test folder for process logs:
// $LEAFSYNC_E2E_LOGS/<test name>, default _output/e2e-logs/<test name> at the
// repository root. When the test fails, the folder and the tail of every log
// in it are printed.
func LogDir(t TB) string {
	t.Helper()
	logDirsMu.Lock()
	defer logDirsMu.Unlock()
	if dir, ok := logDirs[t.Name()]; ok {
		return dir
	}
	base := os.Getenv("LEAFSYNC_E2E_LOGS")
	if base == "" {
		root, err := RepoRoot()
		if err != nil {
			t.Fatalf("harness: %v", err)
		}
		base = filepath.Join(root, "_output", "e2e-logs")
	}
	dir := filepath.Join(base, unsafeChars.ReplaceAllString(t.Name(), "_"))
	if inUseByAnother(dir) {
		// The same test runs in another process (another engineer's run):
		// clearing its folder would delete its etcd data under it.
		dir += fmt.Sprintf("-%d", os.Getpid())
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatalf("harness: clearing %s: %v", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("harness: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		t.Fatalf("harness: %v", err)
	}
	logDirs[t.Name()] = dir
	t.Cleanup(func() {
		logDirsMu.Lock()
		delete(logDirs, t.Name())
		logDirsMu.Unlock()
		if t.Failed() {
			t.Logf("harness: logs of this test are in %s", dir)
			dumpLogTails(t, dir, 40)
		}
	})
	return dir
}

// ownerFile in a log folder holds the process id of the test process
// using it.
const ownerFile = ".owner-pid"

// inUseByAnother reports whether a live process other than this one
// wrote dir's owner file.
func inUseByAnother(dir string) bool {
	data, err := os.ReadFile(filepath.Join(dir, ownerFile))
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid == os.Getpid() || pid <= 0 {
		return false
	}
	return syscall.Kill(pid, 0) == nil
}

func dumpLogTails(t TB, dir string, lines int) {
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*.log"))
	more, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, f := range append(more, files...) {
		t.Logf("harness: ---- last %d lines of %s ----\n%s", lines, f, tail(f, lines))
	}
}

func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var ring []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		ring = append(ring, sc.Text())
		if len(ring) > n {
			ring = ring[1:]
		}
	}
	return strings.Join(ring, "\n")
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func freePorts(t TB, n int) []int {
	t.Helper()
	ports := make([]int, 0, n)
	seen := map[int]bool{}
	for len(ports) < n {
		p, err := FreePort()
		if err != nil {
			t.Fatalf("harness: free port: %v", err)
		}
		if !seen[p] {
			seen[p] = true
			ports = append(ports, p)
		}
	}
	return ports
}

// Eventually polls cond until it returns nil or the timeout passes, then
// fails the test with the last error.
func Eventually(t TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after %s: %v", what, timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Machine describes this machine in one line, for benchmark reports.
func Machine() string {
	host, _ := os.Hostname()
	cpu := "?"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		n := strings.Count(string(data), "processor\t:")
		for _, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(line, "model name") {
				cpu = fmt.Sprintf("%d × %s", n, strings.TrimSpace(strings.SplitN(line, ":", 2)[1]))
				break
			}
		}
	}
	return fmt.Sprintf("%s, %s", host, cpu)
}

// WriteReport writes a benchmark's report into dir: v as report.json and
// the Markdown markdown writes as report.md.
func WriteReport(dir string, v any, markdown func(io.Writer)) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), data, 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "report.md"))
	if err != nil {
		return err
	}
	markdown(f)
	return f.Close()
}
