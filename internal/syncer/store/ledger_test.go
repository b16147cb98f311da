package store_test

import (
	"testing"

	"github.com/leafsync/leafsync/internal/syncer/store"
	"github.com/leafsync/leafsync/internal/syncer/store/storetest"
)

// TestOneRecordBound measures how many deferred deletes with replacements
// fit in one record beside a hysteresis snapshot (the whole state of a
// member before ledger parts, and one ledger part now), and keeps
// storetest.OneRecordBound at or just under it.
func TestOneRecordBound(t *testing.T) {
	fits := func(n int) bool {
		_, _, err := store.Encode(storetest.Record(storetest.State{Hysteresis: storetest.Snapshot(1), Deletes: storetest.Deferred(0, n), Term: 12, Writer: "leafsync-7c9d6f5b8-x2k4q/1"}))
		return err == nil
	}
	lo, hi := 1, 100_000
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if fits(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	t.Logf("one record (%d KiB encoded at most) holds %d deferred deletes with replacements", store.MaxRecordBytes>>10, lo)
	if storetest.OneRecordBound > lo || storetest.OneRecordBound < lo*95/100 {
		t.Errorf("storetest.OneRecordBound is %d, measured %d", storetest.OneRecordBound, lo)
	}
}
