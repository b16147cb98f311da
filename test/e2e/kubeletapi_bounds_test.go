//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leafsync/leafsync/test/harness"
)

// TestKubeletAPIBoundsConnections: the kubelet API port of a running
// leafsync holds no connection for ever. 5,000 strangers that complete
// the TLS handshake and say nothing are each closed within
// handshakeTimeout (at most maxUnauthenticatedConnections of them are
// held at once, the rest wait to be accepted); strangers that send a
// request get their 401 and the connection closed; authenticated clients
// that go idle after an answer are closed within idleTimeout. leafsync
// stays up, serves after it, and its RSS returns near its baseline
// (figures logged).
func TestKubeletAPIBoundsConnections(t *testing.T) {
	const (
		strangers = 5000
		talkers   = 500  // strangers that send one request
		clients   = 1000 // authenticated, then idle
		handshake = time.Second
		idle      = 3 * time.Second
		// liveness: how late a close may come. Generous: 5,000 handshakes
		// at once on a saturated 2-core machine (load 40) closed a silent
		// stranger 13.6s after its last exchange; a server that never
		// closes still fails, at stillOpenWait.
		slack         = 15 * time.Second
		stillOpenWait = 25 * time.Second // beyond every bound: the server keeps it
	)
	raiseFileLimit(t, strangers+talkers+clients+1000)

	f := newFleet(t, harness.HostOptions{})
	port, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig + fmt.Sprintf(`kubeletAPI:
  enabled: true
  port: %d
  advertiseAddress: 127.0.0.1
  handshakeTimeout: %s
  requestTimeout: 5s
  idleTimeout: %s
`, port, handshake, idle)
	if err := os.WriteFile(f.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	l := f.startLeafsync(t, "leafsync")
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	certPEM, keyPEM, err := f.host.IssueClientCert("bounds-client", "bounds-client", nil)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	stranger := &tls.Config{InsecureSkipVerify: true} // the serving certificate is self-signed here
	client := &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{cert}}
	// get sends one request on a new connection and returns its status.
	get := func() (int, error) {
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: client}}
		defer c.CloseIdleConnections()
		resp, err := c.Get("https://" + addr + "/bounds")
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	harness.Eventually(t, 30*time.Second, "the kubelet API serves", func() error {
		code, err := get()
		if err == nil && code != http.StatusNotFound {
			err = fmt.Errorf("status %d, want 404 (an unsupported path, after authentication)", code)
		}
		return err
	})
	time.Sleep(2 * time.Second) // settle
	baseline := rssKiB(t, l.Pid())
	goroutines := func() float64 { return metricValue(scrape(t, l), "go_goroutines") }
	baseGoroutines := goroutines()
	var peak int64
	stopSampling := sampleRSS(l.Pid(), &peak)

	// Phase 1: strangers that say nothing.
	start := time.Now()
	closed := holdConns(strangers, func() (time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		conn, err := (&tls.Dialer{Config: stranger}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return 0, err
		}
		defer conn.Close()
		return waitClosed(conn, nil, handshake+stillOpenWait)
	})
	t.Logf("%d strangers (TLS, then nothing): all done after %s; %s", strangers, time.Since(start).Round(time.Millisecond), closed)
	closed.check(t, "a silent stranger", handshake+slack)

	// Phase 2: strangers that send a request, and authenticated clients
	// that go idle after their answer, at the same time.
	start = time.Now()
	var talked, idled connResults
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		talked = holdConns(talkers, func() (time.Duration, error) {
			return requestThenIdle(addr, stranger, http.StatusUnauthorized, stillOpenWait)
		})
	}()
	go func() {
		defer wg.Done()
		idled = holdConns(clients, func() (time.Duration, error) {
			return requestThenIdle(addr, client, http.StatusNotFound, idle+stillOpenWait)
		})
	}()
	wg.Wait()
	t.Logf("%d strangers with a request (401): %s", talkers, talked)
	t.Logf("%d authenticated clients, idle after their answer (404): %s; both groups done after %s", clients, idled, time.Since(start).Round(time.Millisecond))
	talked.check(t, "a stranger after its 401", slack)
	idled.check(t, "an idle authenticated client", idle+slack)

	stopSampling()
	if exited, err := l.Exited(); exited {
		t.Fatalf("leafsync exited: %v", err)
	}
	if code, err := get(); err != nil || code != http.StatusNotFound {
		t.Fatalf("a request after the crowd: %d, %v", code, err)
	}
	// Every connection's goroutine is gone.
	harness.Eventually(t, 10*time.Second, "leafsync's goroutines back to their baseline", func() error {
		if n := goroutines(); n > baseGoroutines+20 {
			return fmt.Errorf("%g goroutines, %g before the crowd", n, baseGoroutines)
		}
		return nil
	})
	// Its memory: the Go runtime returns freed memory to the system after
	// a GC (forced every 2 minutes when nothing else runs one), so RSS is
	// bounded generously; the figures are logged.
	after := rssKiB(t, l.Pid())
	t.Logf("KUBELETAPI leafsync RSS: baseline %d MiB, peak %d MiB with the crowd, %d MiB after it; goroutines %g before, %g after",
		baseline>>10, peak>>10, after>>10, baseGoroutines, goroutines())
	if bound := baseline + 128<<10; after > bound || peak > bound {
		t.Errorf("leafsync's RSS rose from %d MiB to %d MiB (peak %d MiB): more than 128 MiB", baseline>>10, after>>10, peak>>10)
	}
}

// connResults are how long each connection stayed open after its last
// exchange, and what went wrong.
type connResults struct {
	closedAfter []time.Duration
	// closedEarly: closed by the server before the exchange was done (a
	// handshake that outlasted handshakeTimeout on a busy machine).
	closedEarly int
	stillOpen   int
	errs        []error
}

func (r connResults) String() string {
	s := fmt.Sprintf("%d closed by the server", len(r.closedAfter))
	if n := len(r.closedAfter); n > 0 {
		s += fmt.Sprintf(" after median %s, max %s", r.closedAfter[n/2].Round(time.Millisecond), r.closedAfter[n-1].Round(time.Millisecond))
	}
	return s + fmt.Sprintf("; %d closed by it during the handshake or request; %d still open; %d failed", r.closedEarly, r.stillOpen, len(r.errs))
}

// check: every connection was closed by the server, within limit.
func (r connResults) check(t *testing.T, what string, limit time.Duration) {
	t.Helper()
	if r.stillOpen > 0 {
		t.Errorf("%d connections (%s) were still open long after the timeout", r.stillOpen, what)
	}
	if len(r.errs) > 0 {
		t.Errorf("%d connections (%s) failed, e.g. %v", len(r.errs), what, r.errs[0])
	}
	if len(r.closedAfter) < r.closedEarly {
		t.Errorf("more connections (%s) were closed during their handshake or request (%d) than after it (%d)", what, r.closedEarly, len(r.closedAfter))
	}
	if n := len(r.closedAfter); n > 0 && r.closedAfter[n-1] > limit {
		t.Errorf("a connection (%s) was closed %s after its last exchange, more than %s", what, r.closedAfter[n-1], limit)
	}
}

var errStillOpen = errors.New("still open")

// holdConns runs n connections at once (each one call of conn) and
// collects what they report.
func holdConns(n int, conn func() (time.Duration, error)) connResults {
	var mu sync.Mutex
	var r connResults
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := conn()
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, errStillOpen):
				r.stillOpen++
			case closedByPeer(err):
				r.closedEarly++
			case err != nil:
				r.errs = append(r.errs, err)
			default:
				r.closedAfter = append(r.closedAfter, d)
			}
		}()
	}
	wg.Wait()
	slices.Sort(r.closedAfter)
	return r
}

// closedByPeer: the server closed the connection (EOF, reset, broken
// pipe).
func closedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// requestThenIdle sends one request on a new connection, checks its
// status, then waits for the server to close the connection.
func requestThenIdle(addr string, cfg *tls.Config, want int, wait time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := (&tls.Dialer{Config: cfg}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Minute))
	if _, err := io.WriteString(conn, "GET /bounds HTTP/1.1\r\nHost: leafsync\r\n\r\n"); err != nil {
		return 0, err
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		return 0, fmt.Errorf("status %d, want %d", resp.StatusCode, want)
	}
	return waitClosed(conn, br, wait)
}

// waitClosed waits for the server to close conn (EOF or reset), up to
// wait: errStillOpen after that.
func waitClosed(conn net.Conn, r io.Reader, wait time.Duration) (time.Duration, error) {
	if r == nil {
		r = conn
	}
	start := time.Now()
	_ = conn.SetReadDeadline(start.Add(wait))
	n, err := r.Read(make([]byte, 1))
	var ne net.Error
	switch {
	case n > 0:
		return 0, errors.New("the server sent data to an idle connection")
	case errors.As(err, &ne) && ne.Timeout():
		return 0, errStillOpen
	case err == nil:
		return 0, errors.New("read returned nothing")
	}
	return time.Since(start), nil
}

// rssKiB is a process's resident set size (VmRSS).
func rssKiB(t *testing.T, pid int) int64 {
	t.Helper()
	kib, err := readRSS(pid)
	if err != nil {
		t.Fatal(err)
	}
	return kib
}

func readRSS(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range bytes.Lines(data) {
		if f := strings.Fields(string(line)); len(f) >= 2 && f[0] == "VmRSS:" {
			return strconv.ParseInt(f[1], 10, 64)
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// sampleRSS records the highest RSS of pid into peak every 100ms until
// the returned stop is called (read peak only after that).
func sampleRSS(pid int, peak *int64) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			if kib, err := readRSS(pid); err == nil && kib > *peak {
				*peak = kib
			}
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return func() { close(done); <-finished }
}

// raiseFileLimit makes room for n open connections in the test process.
func raiseFileLimit(t *testing.T, n uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur < n {
		lim.Cur = min(n, lim.Max)
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			t.Fatal(err)
		}
	}
	if lim.Cur < n {
		t.Fatalf("this test needs %d open files; the hard limit is %d", n, lim.Max)
	}
}
