package syncer

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-logr/logr"

	"github.com/leafsync/leafsync/internal/syncer/enginestate"
	"github.com/leafsync/leafsync/internal/syncer/store"
)

type downStore struct{ *store.Memory }

var errRefused = fmt.Errorf("%w: connection refused", store.ErrUnavailable)

func (downStore) NextTerm(context.Context) (uint64, error) { return 0, errRefused }

// The store's readiness check details a problem on its own path only: the
// aggregate /readyz never fails because of the store.
func TestStateCheckIsADetail(t *testing.T) {
	k := store.NewKeeper(downStore{store.NewMemory()}, logr.Discard())
	s := &state{keeper: k, persister: enginestate.New(k, enginestate.Options{}), log: logr.Discard()}
	aggregate := httptest.NewRequest("GET", "/", nil) // /readyz, prefix stripped
	own := httptest.NewRequest("GET", "/"+StateCheckName, nil)
	if err := s.check(own); err != nil {
		t.Fatalf("healthy store reported: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go k.Run(ctx)
	_ = enginestate.Snapshot.Set(k, "a", []byte(`{}`))
	if err := k.Flush(ctx); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("flush: %v", err)
	}
	if err := s.check(aggregate); err != nil {
		t.Fatalf("aggregate readiness fails with the store down: %v", err)
	}
	err := s.check(own)
	if err == nil || !strings.Contains(err.Error(), "decisions continue from memory") || !strings.Contains(err.Error(), "1 cluster(s)") {
		t.Fatalf("detail: %v", err)
	}
	if metricReason(errRefused) != "unavailable" || metricReason(store.ErrFenced) != "conflict" || metricReason(store.ErrTooLarge) != "other" {
		t.Error("metric reasons")
	}
}
