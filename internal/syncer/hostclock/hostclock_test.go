package hostclock

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// TestOffsetFromAnswers: a real server's Date, read on a leafsync clock
// 60s behind or ahead, gives the offset within a second, and Now is the
// server's time.
func TestOffsetFromAnswers(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	for _, skew := range []time.Duration{-time.Minute, time.Minute} {
		local := skewed(skew)
		c := New(local)
		if c.Offset() != 0 {
			t.Fatalf("offset %s before any answer", c.Offset())
		}
		client := &http.Client{Transport: c.Wrap(http.DefaultTransport)}
		for range 5 {
			resp, err := client.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		if d := c.Offset() + skew; d < -time.Second || d > time.Second {
			t.Errorf("leafsync %s: offset %s, want %s ± 1s", skew, c.Offset(), -skew)
		}
		if d := time.Since(c.Now()); d < -time.Second || d > time.Second {
			t.Errorf("leafsync %s: host Now is %s off the server's", skew, d)
		}
	}
}

type skewed time.Duration

func (s skewed) Now() time.Time                  { return time.Now().Add(time.Duration(s)) }
func (s skewed) Since(t time.Time) time.Duration { return s.Now().Sub(t) }

// TestObserveNarrowsAndRestarts: answers narrow the offset to their
// intersection; one that cannot be reconciled (a clock stepped) starts
// the estimate again.
func TestObserveNarrowsAndRestarts(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	c := New(clocktesting.NewFakePassiveClock(t0))
	// Host 30.4s ahead; answers take 100ms.
	host := func(local time.Time) time.Time { return local.Add(30400 * time.Millisecond).Truncate(time.Second) }
	for i := range 20 {
		sent := t0.Add(time.Duration(i) * 370 * time.Millisecond)
		c.Observe(sent, sent.Add(100*time.Millisecond), host(sent.Add(50*time.Millisecond)))
	}
	if got := c.Offset(); got < 30200*time.Millisecond || got > 30600*time.Millisecond {
		t.Errorf("offset %s, want 30.4s ± 0.2s", got)
	}
	// leafsync's clock steps 2 min ahead: the host is now 89.6s behind.
	sent := t0.Add(time.Hour)
	c.Observe(sent, sent.Add(100*time.Millisecond), sent.Add(-89600*time.Millisecond).Truncate(time.Second))
	if got := c.Offset(); got < -90*time.Second || got > -89*time.Second {
		t.Errorf("offset after a step %s, want about -89.6s", got)
	}
}
