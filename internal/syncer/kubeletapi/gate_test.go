package kubeletapi

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"
)

// TestAuthGate: at most max connections are held before they
// authenticate; one that authenticates or closes lets the next in, and a
// connection gives its slot back once only.
func TestAuthGate(t *testing.T) {
	t.Parallel() // real network deadlines: independent, each on its own listeners
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gate := newAuthGate(tcp, 2)
	defer gate.Close()
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := gate.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func() {
		c, err := net.Dial("tcp", tcp.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
	}
	next := func(what string) net.Conn {
		t.Helper()
		select {
		case c := <-accepted:
			return c
		case <-time.After(5 * time.Second): // liveness
			t.Fatalf("%s: not accepted", what)
			return nil
		}
	}
	// held: no connection is accepted while the gate is full (watched
	// for a while: a safety property, so the window is a lower bound).
	held := func(what string) {
		t.Helper()
		select {
		case <-accepted:
			t.Fatalf("%s: accepted beyond the cap", what)
		case <-time.After(300 * time.Millisecond):
		}
	}
	for range 3 {
		dial()
	}
	c0, c1 := next("first"), next("second")
	held("third, with two strangers held")

	// A request on c0 authenticated (through TLS, as the server sees it).
	authenticated(withConn(context.Background(), tls.Server(c0, &tls.Config{})))
	c2 := next("third, after the first authenticated")
	defer c2.Close()
	dial()
	held("fourth, with two strangers held")
	c1.Close()
	c3 := next("fourth, after the second closed")
	defer c3.Close()
	dial()
	c0.Close() // authenticated already: its slot is not given twice
	held("fifth, after an authenticated connection closed")
}
