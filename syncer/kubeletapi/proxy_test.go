package kubeletapi

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestFirstAnswerTimeout: a member that does not answer fails the request
// after the timeout; one that answers may then stream for longer.
func TestFirstAnswerTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/silent" {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		time.Sleep(300 * time.Millisecond) // longer than the timeout, after the answer
		io.WriteString(w, "late line")
	}))
	defer srv.Close()
	defer close(release)
	rt := &firstAnswerTimeout{next: http.DefaultTransport, d: 100 * time.Millisecond}

	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/silent", nil)
	start := time.Now()
	if _, err := rt.RoundTrip(req); err == nil || !strings.Contains(err.Error(), "did not answer within 100ms") {
		t.Fatalf("silent member: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("silent member failed after %s", took)
	}

	req, _ = http.NewRequest(http.MethodGet, srv.URL+"/stream", nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(body) != "late line" {
		t.Fatalf("stream: %q, %v", body, err)
	}
}
