package kubeletapi

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
)

// authGate is a listener that holds at most max connections that have
// not authenticated yet. Beyond it, Accept waits for a slot, so new
// connections queue in the kernel's backlog instead of leafsync's memory
// (each open TLS connection costs a goroutine, buffers and a file
// descriptor). A connection gives its slot back when a request on it
// authenticates, or when it closes: an authenticated stream never holds
// one, so strangers that connect and say nothing cannot starve the host
// API server's streams, only delay its new connections while they last
// (HandshakeTimeout each).
type authGate struct {
	net.Listener
	slots     chan struct{}
	closed    chan struct{}
	closeOnce sync.Once
}

func newAuthGate(l net.Listener, max int) *authGate {
	return &authGate{Listener: l, slots: make(chan struct{}, max), closed: make(chan struct{})}
}

// Accept waits for a free slot, then for a connection.
func (g *authGate) Accept() (net.Conn, error) {
	select {
	case g.slots <- struct{}{}:
	case <-g.closed:
		return nil, net.ErrClosed
	}
	c, err := g.Listener.Accept()
	if err != nil {
		<-g.slots
		return nil, err
	}
	return &gatedConn{Conn: c, release: sync.OnceFunc(func() { <-g.slots })}, nil
}

func (g *authGate) Close() error {
	g.closeOnce.Do(func() { close(g.closed) })
	return g.Listener.Close()
}

// gatedConn holds a slot of its gate until it authenticates or closes.
type gatedConn struct {
	net.Conn
	release func()
}

func (c *gatedConn) Close() error {
	c.release()
	return c.Conn.Close()
}

type connKey struct{}

// withConn keeps a request's connection in its context
// (http.Server.ConnContext), for authenticated.
func withConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// authenticated gives back the gate slot of the request's connection: a
// request on it has authenticated.
func authenticated(ctx context.Context) {
	c, _ := ctx.Value(connKey{}).(net.Conn)
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn()
	}
	if g, ok := c.(*gatedConn); ok {
		g.release()
	}
}
