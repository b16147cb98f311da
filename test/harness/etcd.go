package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Etcd is a real etcd cluster of one or more members on loopback.
type Etcd struct {
	members []*etcdMember
}

type etcdMember struct {
	name      string
	dataDir   string
	clientURL string
	peerURL   string
	args      []string
	bin       string
	logDir    string
	proc      *process
	stopped   bool
}

// EtcdOptions shapes an etcd cluster.
type EtcdOptions struct {
	// Members is the cluster size; 0 means 1.
	Members int
	// Name prefixes member names and log files.
	Name string
}

// StartEtcd starts an etcd cluster and waits until every member is healthy.
// It is stopped when the test ends.
func StartEtcd(t TB, logDir string, opts EtcdOptions) *Etcd {
	t.Helper()
	n := opts.Members
	if n == 0 {
		n = 1
	}
	if opts.Name == "" {
		opts.Name = "etcd"
	}
	ports := freePorts(t, 2*n)
	e := &Etcd{}
	var initial []string
	for i := 0; i < n; i++ {
		m := &etcdMember{
			name:      fmt.Sprintf("%s-%d", opts.Name, i),
			clientURL: fmt.Sprintf("http://127.0.0.1:%d", ports[2*i]),
			peerURL:   fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1]),
			bin:       Bin(t, "etcd"),
			logDir:    logDir,
		}
		m.dataDir = filepath.Join(logDir, m.name+".data")
		initial = append(initial, m.name+"="+m.peerURL)
		e.members = append(e.members, m)
	}
	cluster := strings.Join(initial, ",")
	for _, m := range e.members {
		m.args = []string{
			"--name=" + m.name,
			"--data-dir=" + m.dataDir,
			"--listen-client-urls=" + m.clientURL,
			"--advertise-client-urls=" + m.clientURL,
			"--listen-peer-urls=" + m.peerURL,
			"--initial-advertise-peer-urls=" + m.peerURL,
			"--initial-cluster=" + cluster,
			"--initial-cluster-state=new",
			"--initial-cluster-token=" + opts.Name,
			// Test data is disposable: skip fsync, which is slow on shared disks.
			"--unsafe-no-fsync",
			"--log-level=warn",
			"--quota-backend-bytes=2147483648",
		}
		if err := m.start(); err != nil {
			e.Stop()
			t.Fatalf("harness: %v", err)
		}
	}
	t.Cleanup(e.Stop)
	for _, m := range e.members {
		if err := m.waitHealthy(60 * time.Second); err != nil {
			t.Fatalf("harness: %v", err)
		}
	}
	return e
}

func (m *etcdMember) start() error {
	p, err := startProcess(m.logDir, m.name, m.bin, m.args...)
	if err != nil {
		return err
	}
	m.proc, m.stopped = p, false
	return nil
}

func (m *etcdMember) waitHealthy(timeout time.Duration) error {
	return m.proc.waitFor(timeout, "healthy", func() error { return httpOK(m.clientURL + "/health") })
}

// Endpoints are the client URLs of all members.
func (e *Etcd) Endpoints() []string {
	var out []string
	for _, m := range e.members {
		out = append(out, m.clientURL)
	}
	return out
}

// KillMember ends member i at once, as a crash would. Its data stays.
func (e *Etcd) KillMember(i int) {
	m := e.members[i]
	m.proc.Kill()
	m.stopped = true
}

// RestartMember starts a killed member again on the same ports and data.
func (e *Etcd) RestartMember(i int) error {
	m := e.members[i]
	args := make([]string, 0, len(m.args))
	for _, a := range m.args {
		if strings.HasPrefix(a, "--initial-cluster-state=") {
			a = "--initial-cluster-state=existing"
		}
		args = append(args, a)
	}
	m.args = args
	if err := m.start(); err != nil {
		return err
	}
	return m.waitHealthy(60 * time.Second)
}

// Stop ends every member and removes their data.
func (e *Etcd) Stop() {
	for _, m := range e.members {
		if m.proc != nil {
			m.proc.Stop(2 * time.Second)
		}
		_ = os.RemoveAll(m.dataDir)
	}
}
