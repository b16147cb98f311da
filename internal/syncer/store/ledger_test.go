package store_test

import (
	"testing"

	"github.com/leafsync/leafsync/internal/syncer/podsync/deletes"
	"github.com/leafsync/leafsync/internal/syncer/store"
	"github.com/leafsync/leafsync/internal/syncer/store/storetest"
)

// TestOneRecordBound measures how many deferred deletes with replacements
// fit in one record beside a hysteresis snapshot (the whole state of a
// member before ledger parts, and one ledger part now), and keeps
// storetest.OneRecordBound at or just under it.
func TestOneRecordBound(t *testing.T) {
	t.Parallel() // CPU-bound on a large ledger, on a store of its own
	fits := func(ds []deletes.PendingDelete) bool {
		_, _, err := store.Encode(storetest.Record(storetest.State{Hysteresis: storetest.Snapshot(1), Deletes: ds, Term: 12, Writer: "leafsync-7c9d6f5b8-x2k4q/1"}))
		return err == nil
	}
	lo, hi := 1, 100_000
	// fits is monotonic in n, so the search may start from the bound's own
	// two ends (the bound fits; 100/95 of it does not) without changing
	// what it measures; the deletes are made once (Deferred(0, n) is the
	// first n of any longer run).
	up := storetest.OneRecordBound*100/95 + 1
	ds := storetest.Deferred(0, up)
	if fits(ds[:storetest.OneRecordBound]) {
		lo = storetest.OneRecordBound
	}
	if !fits(ds) {
		hi = up - 1
	} else {
		ds = storetest.Deferred(0, hi)
	}
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if fits(ds[:mid]) {
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
