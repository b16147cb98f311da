package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/leafsync/leafsync/internal/syncer/podsync/deletes"
	"github.com/leafsync/leafsync/internal/syncer/store"
)

// OneRecordBound is how many deferred deletes with replacements (Deferred)
// fit in one record beside a full hysteresis snapshot: the most a member's
// state held when it was one record (measured by TestOneRecordBound).
const OneRecordBound = 14_100

// Deferred returns n deletes as a stale eviction under DeferUntilReplaced
// leaves them, numbered from `from`: pod names of a ReplicaSet, random host
// and replacement UIDs (the same for the same numbers).
func Deferred(from, n int) []deletes.PendingDelete {
	grace := int64(30)
	since := time.Date(2026, 11, 24, 22, 0, 0, 0, time.UTC)
	out := make([]deletes.PendingDelete, n)
	for i := range n {
		r := rand.New(rand.NewPCG(uint64(from+i), 7))
		uid := func() string {
			return fmt.Sprintf("%08x-%04x-4%03x-%04x-%012x", r.Uint32(), r.Uint32()&0xffff, r.Uint32()&0xfff, r.Uint32()&0xffff|0x8000, r.Uint64()&(1<<48-1))
		}
		out[i] = deletes.PendingDelete{
			Kind: deletes.Deferred, Namespace: "shop", Name: fmt.Sprintf("web-7c9d6f5b8-%05x", from+i),
			HostUID: uid(), Cause: "DeletionByTaintManager", Owner: "ReplicaSet/web-7c9d6f5b8",
			Since: since.Add(time.Duration(from+i) * time.Millisecond), HostDeletedAt: since.Add(-time.Duration(from+i) * time.Millisecond),
			Replacement: uid(), GracePeriodSeconds: &grace,
		}
	}
	return out
}

// Snapshot is a hysteresis snapshot of a member with every availability
// bucket filled (about 3 KiB, as a long outage leaves it).
func Snapshot(checkpoint int) []byte {
	buckets := make([]string, 60)
	for i := range buckets {
		buckets[i] = fmt.Sprintf(`{"ok":%d,"fail":%d}`, 1000+i, 30+i)
	}
	return fmt.Appendf(nil, `{"version":1,"checkpoint":%d,"state":"NotReady","since":"2026-11-24T22:00:00Z","lastError":"dial tcp 10.0.0.1:6443: i/o timeout","buckets":[%s]}`,
		checkpoint, join(buckets))
}

func join(ss []string) string {
	out := ""
	for i, s := range ss {
		if i > 0 {
			out += ","
		}
		out += s
	}
	return out
}

// ledgerTwiceTheOldLimit has a Keeper write a member with twice
// OneRecordBound deferred deletes, then checks that its snapshot is still
// saved (one write, the head), that a new owed delete (reaping) is written
// (one write, a ledger part), and that executing half of them shrinks the
// ledger; every state read back through another store.
func ledgerTwiceTheOldLimit(t *testing.T, open func(t *testing.T) store.Store, c string) {
	ctx := context.Background()
	var (
		mu   sync.Mutex
		puts int
	)
	k := runKeeper(t, store.NewKeeper(open(t), logr.Discard(), store.KeeperOptions{Writer: "ledger", OnCall: func(ev store.CallEvent) {
		if ev.Op == "put" && ev.Err == nil {
			mu.Lock()
			puts++
			mu.Unlock()
		}
	}}))
	written := func(what string) int {
		t.Helper()
		mu.Lock()
		before := puts
		mu.Unlock()
		start := time.Now()
		if err := k.Flush(ctx); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		mu.Lock()
		defer mu.Unlock()
		t.Logf("%s: %d record write(s) in %s", what, puts-before, time.Since(start).Round(time.Millisecond))
		return puts - before
	}
	check := func(what string, snapshot []byte, n int) []store.Record {
		t.Helper()
		r := open(t)
		st, err := readCluster(r, c)
		if err != nil || string(st.Hysteresis) != string(snapshot) || len(st.Deletes) != n {
			t.Fatalf("%s: read back snapshot %.40s… and %d deletes (%v), want %.40s… and %d", what, st.Hysteresis, len(st.Deletes), err, snapshot, n)
		}
		recs, err := r.List(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		return recs
	}

	n := 2 * OneRecordBound
	Update(k, c, func(st *State) { st.Hysteresis, st.Deletes = Snapshot(1), Deferred(0, n) })
	written(fmt.Sprintf("%d deferred deletes", n))
	recs := check("the first write", Snapshot(1), n)
	if len(recs) < 3 {
		t.Errorf("%d deletes in %d records, want the head and at least 2 ledger parts", n, len(recs))
	}
	t.Logf("%d deletes in %d records (the head and %d ledger parts)", n, len(recs), len(recs)-1)

	Update(k, c, func(st *State) { st.Hysteresis = Snapshot(2) })
	if w := written("a checkpoint of the snapshot"); w != 1 {
		t.Errorf("a snapshot change made %d writes, want 1 (the head only)", w)
	}
	check("after the checkpoint", Snapshot(2), n)

	reaped := Deferred(n, 1)[0]
	reaped.Kind, reaped.Replacement = deletes.Owed, ""
	Update(k, c, func(st *State) { st.Deletes = append(st.Deletes, reaped) })
	if w := written("an owed delete recorded by reaping"); w != 1 {
		t.Errorf("one owed delete made %d writes, want 1 (its ledger part)", w)
	}
	check("after reaping", Snapshot(2), n+1)

	Update(k, c, func(st *State) { st.Deletes = st.Deletes[n/2:] })
	written("half of the deletes executed")
	recs = check("after executing half", Snapshot(2), n/2+1)
	t.Logf("%d deletes left in %d records", n/2+1, len(recs))

	if err := k.ForgetNow(ctx, c); err != nil {
		t.Fatal(err)
	}
	if recs, err := open(t).List(ctx, c); err != nil || len(recs) != 0 {
		t.Errorf("after deregistration: %d records left (%v), want none", len(recs), err)
	}
}
