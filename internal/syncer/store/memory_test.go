package store_test

import (
	"testing"

	"github.com/leafsync/leafsync/internal/syncer/store"
	"github.com/leafsync/leafsync/internal/syncer/store/storetest"
)

func TestMemoryConformance(t *testing.T) {
	t.Parallel() // CPU-bound on a large ledger, on a store of its own
	m := store.NewMemory()
	storetest.Run(t, func(*testing.T) store.Store { return m })
}
