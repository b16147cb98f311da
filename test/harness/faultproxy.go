package harness

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// FaultProxy is a real TCP proxy (toxiproxy, in-process) between a client
// under test and a server. Tests break the link at any moment:
//
//   - Cut: new connections are refused and open ones dropped (a partition
//     that the client notices at once).
//   - Blackhole: connections stay open but no byte passes either way (a
//     partition that the client notices only by timeouts).
//   - Latency: every response is delayed (each request takes d longer).
//   - ResetPeer: connections are reset by peer (RST) as soon as they carry data.
//
// Heal undoes all of it. The proxy listens on a fixed loopback port for its
// whole life, so clients never need to be re-pointed.
type FaultProxy struct {
	mu     sync.Mutex
	proxy  *toxiproxy.Proxy
	name   string
	cut    bool
	toxics []string
}

var toxiServer = sync.OnceValue(func() *toxiproxy.ApiServer {
	return toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.New(io.Discard))
})

// NewFaultProxy starts a proxy in front of upstream (host:port) on a free
// port of upstream's IP (loopback for every cluster but those a test
// node's pods call). It is stopped when the test ends.
func NewFaultProxy(t TB, name, upstream string) *FaultProxy {
	t.Helper()
	host, _, err := net.SplitHostPort(upstream)
	if err != nil {
		t.Fatalf("harness: fault proxy %s: upstream %q: %v", name, upstream, err)
	}
	p := toxiproxy.NewProxy(toxiServer(), name, net.JoinHostPort(host, "0"), upstream)
	if err := p.Start(); err != nil {
		t.Fatalf("harness: fault proxy %s: %v", name, err)
	}
	fp := &FaultProxy{proxy: p, name: name}
	t.Cleanup(func() { p.Stop() })
	return fp
}

// Addr is where clients connect (ip:port).
func (f *FaultProxy) Addr() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.proxy.Listen
}

// Cut refuses new connections and drops open ones.
func (f *FaultProxy) Cut() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.cut {
		f.proxy.Stop()
		f.cut = true
	}
}

// Blackhole keeps connections open but lets no data through.
func (f *FaultProxy) Blackhole() error {
	return f.addToxic("blackhole", "timeout", "downstream", map[string]any{"timeout": 0}, "upstream")
}

// Latency delays all data from the server by d (with jitter), so every
// request takes d longer.
func (f *FaultProxy) Latency(d, jitter time.Duration) error {
	attrs := map[string]any{"latency": d.Milliseconds(), "jitter": jitter.Milliseconds()}
	return f.addToxic("latency", "latency", "downstream", attrs, "")
}

// ResetPeer resets connections (TCP RST) once they carry data.
func (f *FaultProxy) ResetPeer() error {
	return f.addToxic("reset", "reset_peer", "downstream", map[string]any{"timeout": 0}, "upstream")
}

func (f *FaultProxy) addToxic(name, typ, stream string, attrs map[string]any, alsoStream string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range []string{stream, alsoStream} {
		if s == "" {
			continue
		}
		toxicName := name + "-" + s
		body := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"toxicity":1,"attributes":%s}`, toxicName, typ, s, jsonAttrs(attrs))
		if _, err := f.proxy.Toxics.AddToxicJson(strings.NewReader(body)); err != nil {
			return fmt.Errorf("fault proxy %s: adding %s: %w", f.name, toxicName, err)
		}
		f.toxics = append(f.toxics, toxicName)
	}
	return nil
}

func jsonAttrs(attrs map[string]any) string {
	parts := make([]string, 0, len(attrs))
	for k, v := range attrs {
		parts = append(parts, fmt.Sprintf("%q:%v", k, v))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// Heal removes every fault: the proxy accepts connections again on the same
// port and passes data unchanged.
func (f *FaultProxy) Heal() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, name := range f.toxics {
		if err := f.proxy.Toxics.RemoveToxic(context.Background(), name); err != nil {
			return fmt.Errorf("fault proxy %s: removing %s: %w", f.name, name, err)
		}
	}
	f.toxics = nil
	if f.cut {
		if err := f.proxy.Start(); err != nil {
			return fmt.Errorf("fault proxy %s: restarting listener on %s: %w", f.name, f.proxy.Listen, err)
		}
		f.cut = false
	}
	return nil
}
