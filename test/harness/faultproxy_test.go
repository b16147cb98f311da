package harness

import (
	"bufio"
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// echoServer answers every line with the same line.
func echoServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

// roundTrip sends one line through a new connection and reads the echo.
func roundTrip(addr string, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return 0, err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return 0, err
	}
	if line != "ping\n" {
		return 0, errors.New("bad echo " + line)
	}
	return time.Since(start), nil
}

func TestFaultProxy(t *testing.T) {
	fp := NewFaultProxy(t, t.Name(), echoServer(t))
	addr := fp.Addr()
	if _, err := roundTrip(addr, 2*time.Second); err != nil {
		t.Fatalf("healthy proxy: %v", err)
	}

	// A connection opened before the cut is dropped by it.
	open, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	fp.Cut()
	if _, err := roundTrip(addr, 2*time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("cut proxy: want connection refused, got %v", err)
	}
	_ = open.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := open.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("connection open across the cut: want it closed, got %v", err)
	}

	if err := fp.Heal(); err != nil {
		t.Fatal(err)
	}
	if fp.Addr() != addr {
		t.Fatalf("healed proxy moved from %s to %s", addr, fp.Addr())
	}
	if _, err := roundTrip(addr, 2*time.Second); err != nil {
		t.Fatalf("healed proxy: %v", err)
	}

	if err := fp.Blackhole(); err != nil {
		t.Fatal(err)
	}
	if _, err := roundTrip(addr, 500*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("blackholed proxy: want a timeout, got %v", err)
	}
	if err := fp.Heal(); err != nil {
		t.Fatal(err)
	}

	base, err := roundTrip(addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := fp.Latency(300*time.Millisecond, 0); err != nil {
		t.Fatal(err)
	}
	slow, err := roundTrip(addr, 5*time.Second)
	if err != nil {
		t.Fatalf("proxy with latency: %v", err)
	}
	if slow < 300*time.Millisecond {
		t.Fatalf("proxy with 300ms latency each way: round trip took %s (baseline %s)", slow, base)
	}

	if err := fp.Heal(); err != nil {
		t.Fatal(err)
	}
	if err := fp.ResetPeer(); err != nil {
		t.Fatal(err)
	}
	if _, err := roundTrip(addr, 2*time.Second); err == nil {
		t.Fatal("reset_peer proxy: want an error, got an echo")
	}
	if err := fp.Heal(); err != nil {
		t.Fatal(err)
	}
	if _, err := roundTrip(addr, 2*time.Second); err != nil {
		t.Fatalf("healed proxy: %v", err)
	}
}
