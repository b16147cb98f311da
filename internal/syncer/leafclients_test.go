package syncer

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// TestLeafWritesNotThrottledByTheClient: a member change seen by every
// leaf of that member is one status write per leaf, all at once (200
// leaves at 400 registrations in make bench-scale). A client-side limit
// of 50/s burst 100 queued them for 4s (leaf update p99 4.0s); the
// leaves' workers bound the writes in flight, the host's API Priority
// and Fairness the server's load. 300 writes through the leaves' host
// client, 16 at a time as the leaves' workers send them, take at least
// 4s behind such a limiter and a fraction of that without.
func TestLeafWritesNotThrottledByTheClient(t *testing.T) {
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Node","apiVersion":"v1","metadata":{"name":"leaf"}}`))
	}))
	defer srv.Close()
	nodes, err := leafClient(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	const writes, workers = 300, 16
	var wg sync.WaitGroup
	work := make(chan int, writes)
	for i := range writes {
		work <- i
	}
	close(work)
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for range work {
				_, err := nodes.CoreV1().Nodes().Patch(context.Background(), "leaf", types.StrategicMergePatchType,
					[]byte(`{"status":{}}`), metav1.PatchOptions{}, "status")
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	t.Logf("%d leaf writes, %d at a time: %s", served.Load(), workers, took)
	if took >= 4*time.Second {
		t.Errorf("%d leaf writes took %s: the leaves' host client throttles them", writes, took)
	}
}
