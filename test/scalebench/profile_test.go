//go:build e2e

package scalebench

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// profiles is $SCALEBENCH_PROFILE: which of leafsync's profiles the bench
// takes while leaves are updated ("cpu" or "trace"), "" none. Taken in
// slices of profileSlice, one file each, in the report's directory: the
// updates of one step last longer than one slice, and a slice ends on its
// own when the updates do.
func profiles(t *testing.T) string {
	switch p := os.Getenv("SCALEBENCH_PROFILE"); p {
	case "", "cpu", "trace":
		return p
	default:
		t.Fatalf("SCALEBENCH_PROFILE: %q is not one of cpu, trace", p)
		return ""
	}
}

const profileSlice = 5 * time.Second

// pprofAddr is a free localhost address for a replica's pprof endpoint.
func pprofAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// profileDuring takes kind's profile of each replica (addrs) in slices
// while f runs, into dir as <label>-r<i>-<slice>.<kind>.
func profileDuring(t *testing.T, kind string, addrs []string, dir, label string, f func() error) error {
	if kind == "" {
		return f()
	}
	path := map[string]string{"cpu": "profile", "trace": "trace"}[kind]
	done := make(chan struct{})
	var wg sync.WaitGroup
	for i, addr := range addrs {
		wg.Go(func() {
			for k := 0; ; k++ {
				select {
				case <-done:
					return
				default:
				}
				url := fmt.Sprintf("http://%s/debug/pprof/%s?seconds=%d", addr, path, int(profileSlice/time.Second))
				file := filepath.Join(dir, fmt.Sprintf("%s-r%d-%02d.%s", label, i, k, kind))
				if err := fetchTo(url, file); err != nil {
					t.Logf("profile %s: %v", file, err)
					return
				}
			}
		})
	}
	err := f()
	close(done)
	wg.Wait()
	return err
}

func fetchTo(url, file string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	out, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, resp.Body); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
