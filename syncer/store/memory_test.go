package store_test

import (
	"testing"

	"github.com/leafsync/leafsync/syncer/store"
	"github.com/leafsync/leafsync/syncer/store/storetest"
)

func TestMemoryConformance(t *testing.T) {
	m := store.NewMemory()
	storetest.Run(t, func(*testing.T) store.Store { return m })
}
