package store_test

import (
	"testing"

	"github.com/leafsync/leafsync/internal/syncer/store"
	"github.com/leafsync/leafsync/internal/syncer/store/storetest"
)

func TestMemoryConformance(t *testing.T) {
	m := store.NewMemory()
	storetest.Run(t, func(*testing.T) store.Store { return m })
}
