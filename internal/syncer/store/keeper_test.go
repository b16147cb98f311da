package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/leafsync/leafsync/internal/syncer/podsync/deletes"
	"github.com/leafsync/leafsync/internal/syncer/store"
	"github.com/leafsync/leafsync/internal/syncer/store/storetest"
)

func owed(name string) deletes.PendingDelete {
	return deletes.PendingDelete{Kind: deletes.Owed, Namespace: "ns", Name: name, HostUID: "uid-" + name,
		Cause: "DeletionByTaintManager", Since: time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)}
}

func names(ds []deletes.PendingDelete) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Name)
	}
	return out
}

func runKeeper(t *testing.T, k *store.Keeper) context.CancelFunc {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); k.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return cancel
}

// startKeeper runs a Keeper on a fake clock that the test moves: changes
// are written by explicit flushes only, unless the test moves the clock past
// the coalescing delay or a backoff.
func startKeeper(t *testing.T, s store.Store, opts ...store.KeeperOptions) (*store.Keeper, *clocktesting.FakeClock) {
	var o store.KeeperOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	clk := clocktesting.NewFakeClock(time.Now())
	o.Clock = clk
	k := store.NewKeeper(s, testr.New(t), o)
	runKeeper(t, k)
	return k, clk
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func mustGet(t *testing.T, s store.Store, c string) storetest.State {
	t.Helper()
	cs, err := store.ReadCluster(context.Background(), s, c)
	if err != nil {
		t.Fatalf("Get %s: %v", c, err)
	}
	st, err := storetest.Read(cs)
	if err != nil {
		t.Fatalf("decoding %s: %v", c, err)
	}
	return st
}

// getHead reads a cluster's head record alone.
func getHead(t *testing.T, s store.Store, c string) (storetest.State, error) {
	t.Helper()
	cs, _, err := s.Get(context.Background(), c)
	if err != nil {
		return storetest.State{}, err
	}
	return storetest.Read(cs)
}

func TestKeeperCoalescesChanges(t *testing.T) {
	ctx := context.Background()
	m := store.NewMemory()
	k, clk := startKeeper(t, m, store.KeeperOptions{Coalesce: 100 * time.Millisecond, Parallel: 1})
	waitFor(t, "term", func() bool { return k.Stats().Term != 0 })
	for i := range 200 {
		storetest.Update(k, "a", func(st *storetest.State) { st.Deletes = append(st.Deletes, owed(fmt.Sprint(i))) })
	}
	clk.Step(99 * time.Millisecond)
	barrier(t, k, "b")
	if _, _, err := m.Get(ctx, "a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a written before the coalescing delay passed (%v)", err)
	}
	before := m.Puts()
	clk.Step(time.Millisecond)
	waitFor(t, "written", func() bool { return k.Pending() == 0 })
	if got := len(mustGet(t, m, "a").Deletes); got != 200 {
		t.Fatalf("record holds %d deletes, want 200", got)
	}
	if n := m.Puts() - before; n != 2 {
		t.Errorf("200 changes made %d writes, want them coalesced into 2 (the head and one ledger part)", n)
	}
}

// barrier changes cluster c and flushes it: with one worker, the flush
// returns only once every write queued before it is done, so a write
// queued too early has happened by then.
func barrier(t *testing.T, k *store.Keeper, c string) error {
	t.Helper()
	storetest.Update(k, c, func(st *storetest.State) { st.Hysteresis = []byte(`{"barrier":true}`) })
	return k.FlushCluster(context.Background(), c)
}

func TestKeeperKeepsStateWhileStoreDown(t *testing.T) {
	m := store.NewMemory()
	f := &storetest.Faulty{Store: m}
	const minBackoff, maxBackoff = 20 * time.Millisecond, 200 * time.Millisecond
	k, clk := startKeeper(t, f, store.KeeperOptions{MinBackoff: minBackoff, MaxBackoff: maxBackoff, Coalesce: time.Millisecond, Parallel: 1})
	waitFor(t, "term", func() bool { return k.Stats().Term != 0 })
	f.Fail(storetest.ErrDown)
	storetest.Update(k, "a", func(st *storetest.State) { st.Deletes = []deletes.PendingDelete{owed("p1")} })
	storetest.Update(k, "b", func(st *storetest.State) { st.Deletes = []deletes.PendingDelete{owed("b")} })
	clk.Step(time.Millisecond)
	waitFor(t, "failed writes", func() bool { return k.Stats().Errors == 2 })
	if k.Health() == nil {
		t.Fatal("Health is nil while the store is down")
	}
	// Changes while the store is down stay in memory, readable at once,
	// and wait for their cluster's retry instead of writing again.
	before := f.Calls()
	for i := range 50 {
		storetest.Update(k, "a", func(st *storetest.State) { st.Deletes = append(st.Deletes, owed(fmt.Sprint("q", i))) })
		storetest.Update(k, "b", func(st *storetest.State) { st.Deletes = []deletes.PendingDelete{owed(fmt.Sprint("b", i))} })
	}
	if got := len(storetest.Memory(k, "a").Deletes); got != 51 {
		t.Fatalf("memory holds %d deletes, want 51", got)
	}
	clk.Step(minBackoff/2 - 2*time.Millisecond) // past the coalescing delay, before any retry
	for range 2 {                               // twice: the second after the queue has taken in the step
		if err := barrier(t, k, "c"); err == nil {
			t.Fatal("a flush while the store is down succeeded")
		}
	}
	if n := f.Calls() - before; n != 2 {
		t.Fatalf("%d store calls for changes made while backing off, want none before the retry (and the two flushes' reads)", n-2)
	}
	// A second of store time: backoff 20ms→200ms is about seven attempts
	// a cluster, not one per change or per step.
	for range 100 {
		clk.Step(10 * time.Millisecond)
		time.Sleep(time.Millisecond)
	}
	calls := f.Calls() - before
	if calls > 3*10 { // a, b and the barrier c: about seven attempts each

		t.Errorf("%d store calls in 1s while down: not backing off", calls)
	}
	st := k.Stats()
	if st.Pending != 3 || st.FailingSince.IsZero() || st.LastError == "" { // a, b and the barrier c
		t.Errorf("stats while down: %+v", st)
	}
	t.Logf("store down: %d calls in 1s, stats %+v, health: %v", calls, st, k.Health())
	f.Fail(nil)
	waitFor(t, "written after recovery", func() bool {
		clk.Step(10 * time.Millisecond)
		return k.Pending() == 0
	})
	if got := len(mustGet(t, m, "a").Deletes); got != 51 {
		t.Fatalf("record of a holds %d deletes after recovery, want 51", got)
	}
	if got := names(mustGet(t, m, "b").Deletes); len(got) != 1 || got[0] != "b49" {
		t.Fatalf("record of b = %v, want [b49]", got)
	}
	if err := k.Health(); err != nil {
		t.Errorf("Health after recovery: %v", err)
	}
}

func TestKeeperFencedByNewerWriter(t *testing.T) {
	ctx := context.Background()
	m := store.NewMemory()
	old, _ := startKeeper(t, m, store.KeeperOptions{Writer: "old"})
	storetest.Update(old, "a", func(st *storetest.State) { st.Deletes = []deletes.PendingDelete{owed("p1")} })
	if err := old.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// A new leader takes over: reads, takes a newer term, writes.
	leader, _ := startKeeper(t, m, store.KeeperOptions{Writer: "new"})
	if err := leader.Load(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	storetest.Update(leader, "a", func(st *storetest.State) { st.Hysteresis = []byte(`{"by":"new"}`) })
	if err := leader.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// The old one, still running, must not overwrite it.
	storetest.Update(old, "a", func(st *storetest.State) { st.Hysteresis = []byte(`{"by":"old"}`) })
	err := old.Flush(ctx)
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("old writer's flush: %v, want ErrFenced", err)
	}
	rec := mustGet(t, m, "a")
	if string(rec.Hysteresis) != `{"by":"new"}` || rec.Writer != "new" {
		t.Fatalf("record after the old writer's attempt: %s by %s", rec.Hysteresis, rec.Writer)
	}
	if !old.Stats().Fenced || old.Health() == nil {
		t.Errorf("old writer not reported fenced: %+v", old.Stats())
	}
	// Fenced for good, for every cluster.
	storetest.Update(old, "b", func(st *storetest.State) { st.Hysteresis = []byte(`{"by":"old"}`) })
	if err := old.Flush(ctx); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("fenced writer's flush of another cluster: %v", err)
	}
	if _, _, err := m.Get(ctx, "b"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("fenced writer created a record: %v", err)
	}
}

func TestKeeperMergesRecordOfOlderWriter(t *testing.T) {
	ctx := context.Background()
	m := store.NewMemory()
	old, _ := startKeeper(t, m, store.KeeperOptions{Writer: "old"})
	storetest.Update(old, "a", func(st *storetest.State) {
		st.Hysteresis = []byte(`{"by":"old"}`)
		st.Deletes = []deletes.PendingDelete{owed("p0"), owed("p1")}
	})
	if err := old.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	leader, _ := startKeeper(t, m, store.KeeperOptions{Writer: "new"})
	if err := leader.Load(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	// The old leader, in its last moments, executes p0 and records p2,
	// before the new one has claimed the record (taken its term, written
	// the record back), so no conflict for the old one.
	storetest.Update(old, "a", func(st *storetest.State) {
		st.Deletes = []deletes.PendingDelete{owed("p1"), owed("p2")}
	})
	if err := old.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// The new leader records p3 and checkpoints its engine: its write (the
	// claim) conflicts, the record is by an older term, so it merges.
	storetest.Update(leader, "a", func(st *storetest.State) {
		st.Hysteresis = []byte(`{"by":"new"}`)
		st.Deletes = append(st.Deletes, owed("p3"))
	})
	if err := leader.Flush(ctx); err != nil {
		t.Fatalf("merge after conflict: %v", err)
	}
	rec := mustGet(t, m, "a")
	if got := fmt.Sprint(names(rec.Deletes)); got != "[p1 p3 p2]" {
		t.Errorf("merged deletes %s, want [p1 p3 p2] (p0 executed by the old leader, p2 added by it)", got)
	}
	if string(rec.Hysteresis) != `{"by":"new"}` || rec.Writer != "new" {
		t.Errorf("merged record: hysteresis %s by %s", rec.Hysteresis, rec.Writer)
	}
	if got := fmt.Sprint(names(storetest.Memory(leader, "a").Deletes)); got != "[p1 p3 p2]" {
		t.Errorf("leader's memory after merge: %s", got)
	}
	if leader.Stats().Conflicts != 1 {
		t.Errorf("conflicts = %d, want 1", leader.Stats().Conflicts)
	}
	// Now the old leader is fenced.
	storetest.Update(old, "a", func(st *storetest.State) { st.Deletes = nil })
	if err := old.Flush(ctx); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("old writer after the new one wrote: %v, want ErrFenced", err)
	}
}

func TestKeeperLostReply(t *testing.T) {
	ctx := context.Background()
	m := store.NewMemory()
	f := &storetest.Faulty{Store: m}
	k, _ := startKeeper(t, f)
	storetest.Update(k, "a", func(st *storetest.State) { st.Deletes = []deletes.PendingDelete{owed("p1")} })
	f.LoseReply()
	if err := k.Flush(ctx); err == nil {
		t.Fatal("flush with a lost reply succeeded")
	}
	storetest.Update(k, "a", func(st *storetest.State) { st.Deletes = append(st.Deletes, owed("p2")) })
	if err := k.Flush(ctx); err != nil {
		t.Fatalf("flush after a lost reply: %v", err)
	}
	if got := fmt.Sprint(names(mustGet(t, m, "a").Deletes)); got != "[p1 p2]" {
		t.Fatalf("record %s, want [p1 p2]", got)
	}
}

func TestKeeperLoadKeepsEarlierUpdates(t *testing.T) {
	ctx := context.Background()
	m := store.NewMemory()
	prev, _ := startKeeper(t, m)
	storetest.Update(prev, "a", func(st *storetest.State) {
		st.Hysteresis = []byte(`{"saved":true}`)
		st.Deletes = []deletes.PendingDelete{owed("saved")}
	})
	if err := prev.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	k, _ := startKeeper(t, m)
	storetest.Update(k, "a", func(st *storetest.State) { st.Deletes = append(st.Deletes, owed("early")) })
	if err := k.Load(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	st := storetest.Memory(k, "a")
	if got := fmt.Sprint(names(st.Deletes)); got != "[early saved]" || string(st.Hysteresis) != `{"saved":true}` {
		t.Fatalf("Load after an Update: %s %s", got, st.Hysteresis)
	}
	if err := k.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(names(mustGet(t, m, "a").Deletes)); got != "[early saved]" {
		t.Fatalf("record %s", got)
	}
}

func TestKeeperForget(t *testing.T) {
	ctx := context.Background()
	m := store.NewMemory()
	k, _ := startKeeper(t, m)
	storetest.Update(k, "a", func(st *storetest.State) { st.Deletes = []deletes.PendingDelete{owed("p")} })
	if err := k.FlushCluster(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if k.Stats().Pending != 0 {
		t.Fatal("not Written after FlushCluster")
	}
	if err := k.ForgetNow(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.Get(ctx, "a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("record after ForgetNow: %v", err)
	}
	// A record this Keeper never read is deleted too.
	other, _ := startKeeper(t, m)
	storetest.Update(other, "b", func(st *storetest.State) { st.Deletes = []deletes.PendingDelete{owed("q")} })
	if err := other.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	k2, _ := startKeeper(t, m)
	if err := k2.ForgetNow(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.Get(ctx, "b"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("record of b after ForgetNow: %v", err)
	}
	if k2.Pending() != 0 {
		t.Fatalf("pending %d", k2.Pending())
	}
}

// corruptStore returns a record that cannot be decoded.
type corruptStore struct{ *store.Memory }

func (c corruptStore) Get(ctx context.Context, cl string) (store.ClusterState, store.Version, error) {
	_, v, err := c.Memory.Get(ctx, cl)
	if err != nil {
		return store.ClusterState{}, "", err
	}
	return store.ClusterState{}, v, fmt.Errorf("%w: bad JSON", store.ErrCorrupt)
}

func (c corruptStore) List(ctx context.Context, cl string) ([]store.Record, error) {
	return corrupt(c.Memory.List(ctx, cl))
}

func (c corruptStore) Scan(ctx context.Context) ([]store.Record, error) {
	return corrupt(c.Memory.Scan(ctx))
}

func corrupt(recs []store.Record, err error) ([]store.Record, error) {
	for i := range recs {
		recs[i].State, recs[i].Err = store.ClusterState{}, fmt.Errorf("%w: bad JSON", store.ErrCorrupt)
	}
	return recs, err
}

// A record that cannot be decoded does not block anything: the cluster
// starts fresh and the record is replaced.
func TestKeeperReplacesCorruptRecord(t *testing.T) {
	ctx := context.Background()
	m := store.NewMemory()
	if _, err := m.Put(ctx, "a", storetest.Record(storetest.State{Hysteresis: []byte(`{"old":1}`)}), ""); err != nil {
		t.Fatal(err)
	}
	for _, preload := range []bool{false, true} {
		k, _ := startKeeper(t, corruptStore{m})
		if preload {
			if _, err := k.Preload(ctx); err != nil {
				t.Fatalf("preload with a corrupt record: %v", err)
			}
		} else if err := k.Load(ctx, "a"); err != nil || len(storetest.Memory(k, "a").Hysteresis) != 0 {
			t.Fatalf("load of a corrupt record: %v %s", err, storetest.Memory(k, "a").Hysteresis)
		}
		storetest.Update(k, "a", func(st *storetest.State) { st.Hysteresis = []byte(fmt.Sprintf(`{"new":%v}`, preload)) })
		if err := k.Flush(ctx); err != nil {
			t.Fatalf("flush over a corrupt record (preload %v): %v", preload, err)
		}
		if got := string(mustGet(t, m, "a").Hysteresis); got != fmt.Sprintf(`{"new":%v}`, preload) {
			t.Fatalf("record %s", got)
		}
	}
}

// Concurrent first writes take one term, not several (a second term would
// fence the Keeper against itself).
func TestKeeperTakesOneTerm(t *testing.T) {
	ctx := context.Background()
	m := store.NewMemory()
	k, _ := startKeeper(t, m)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := fmt.Sprint("c", i)
			storetest.Update(k, c, func(st *storetest.State) { st.Hysteresis = []byte(`{}`) })
			if err := k.FlushCluster(ctx, c); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if term, _ := m.Term(ctx); term != 1 || k.Stats().Term != 1 {
		t.Fatalf("store term %d, keeper term %d: want one term", term, k.Stats().Term)
	}
}

// A record deleted by hand (kubectl delete configmap) is rebuilt from
// memory at the next write: its owed deletes are not merged with nothing.
func TestKeeperRebuildsADeletedRecord(t *testing.T) {
	ctx := context.Background()
	m := store.NewMemory()
	k, _ := startKeeper(t, m, store.KeeperOptions{Writer: "me"})
	storetest.Update(k, "a", func(st *storetest.State) { st.Deletes = []deletes.PendingDelete{owed("p0")} })
	if err := k.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	_, v, err := m.Get(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Delete(ctx, "a", v); err != nil {
		t.Fatal(err)
	}
	storetest.Update(k, "a", func(st *storetest.State) { st.Hysteresis = []byte(`{"checkpoint":2}`) })
	if err := k.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(names(mustGet(t, m, "a").Deletes)); got != "[p0]" {
		t.Errorf("record after it was deleted by hand: deletes %s, want [p0]", got)
	}
	if got := fmt.Sprint(names(storetest.Memory(k, "a").Deletes)); got != "[p0]" {
		t.Errorf("memory: %s, want [p0]", got)
	}
}

// A new leader that has only read a record claims it (writes it back with
// its term), so an older writer resumed after a pause is fenced at its next
// write instead of silently overwriting the record; and CheckWriter tells
// the old one, before any destructive call, that it is no longer the writer.
func TestKeeperClaimsReadRecordsAndFencesTheOldWriter(t *testing.T) {
	ctx := context.Background()
	m := store.NewMemory()
	old, _ := startKeeper(t, m, store.KeeperOptions{Writer: "old"})
	storetest.Update(old, "a", func(st *storetest.State) { st.Deletes = []deletes.PendingDelete{owed("p0"), owed("p1")} })
	if err := old.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := old.CheckWriter(ctx, "a"); err != nil {
		t.Fatalf("the only writer: %v", err)
	}
	leader, _ := startKeeper(t, m, store.KeeperOptions{Writer: "new"})
	if err := leader.Load(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if leader.Stats().Pending == 0 {
		t.Fatal("a record read from an older writer is not claimed")
	}
	if err := leader.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if rec := mustGet(t, m, "a"); rec.Writer != "new" {
		t.Fatalf("record not claimed: writer %q", rec.Writer)
	}
	// The old leader, resumed with stale memory, drops p0: fenced, nothing
	// written, and CheckWriter says so before it deletes anything.
	storetest.Update(old, "a", func(st *storetest.State) { st.Deletes = []deletes.PendingDelete{owed("p1")} })
	if err := old.Flush(ctx); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("old writer's flush after the claim: %v, want ErrFenced", err)
	}
	if got := fmt.Sprint(names(mustGet(t, m, "a").Deletes)); got != "[p0 p1]" {
		t.Errorf("record %s, want [p0 p1]", got)
	}
	if err := old.CheckWriter(ctx, "a"); !errors.Is(err, store.ErrFenced) {
		t.Errorf("CheckWriter of the deposed writer: %v, want ErrFenced", err)
	}
	if err := leader.CheckWriter(ctx, "a"); err != nil {
		t.Errorf("CheckWriter of the leader: %v", err)
	}
}

// partsRefused refuses every ledger part write, as a store at a quota of
// objects would.
type partsRefused struct{ *store.Memory }

func (p partsRefused) Put(ctx context.Context, name string, st store.ClusterState, v store.Version) (store.Version, error) {
	if name != store.ClusterOf(name) {
		return "", errors.New("exceeded quota: configmaps")
	}
	return p.Memory.Put(ctx, name, st, v)
}

// A ledger that cannot be written never holds back the snapshot: the head
// is its own record, written first.
func TestKeeperSnapshotNotHeldBackByTheLedger(t *testing.T) {
	ctx := context.Background()
	m := store.NewMemory()
	k, _ := startKeeper(t, partsRefused{m})
	for i := range 2 {
		snap := fmt.Appendf(nil, `{"checkpoint":%d}`, i)
		storetest.Update(k, "a", func(st *storetest.State) {
			st.Hysteresis = snap
			st.Deletes = append(st.Deletes, owed(fmt.Sprint("p", i)))
		})
		if err := k.Flush(ctx); err == nil {
			t.Fatal("flush with its ledger refused: no error")
		}
		if got, err := getHead(t, m, "a"); err != nil || string(got.Hysteresis) != string(snap) {
			t.Fatalf("head %s (%v), want the snapshot %s", got.Hysteresis, err, snap)
		}
	}
}

// A ledger twice the one-record bound: the snapshot checkpoint after it is
// saved. On 04d21e7 (one record per member) both flushes failed with
// ErrTooLarge and no snapshot was stored.
func TestKeeperLedgerTwiceTheOldLimitKeepsSnapshots(t *testing.T) {
	t.Parallel() // CPU-bound on a large ledger, on a store of its own
	ctx := context.Background()
	m := store.NewMemory()
	k, _ := startKeeper(t, m)
	ds := storetest.Deferred(0, 2*storetest.OneRecordBound)
	storetest.Update(k, "a", func(st *storetest.State) { st.Hysteresis = []byte(`{"checkpoint":1}`); st.Deletes = ds })
	if err := k.Flush(ctx); err != nil {
		t.Fatalf("flush of a ledger of %d: %v", len(ds), err)
	}
	storetest.Update(k, "a", func(st *storetest.State) { st.Hysteresis = []byte(`{"checkpoint":2}`) })
	err := k.Flush(ctx)
	got, gerr := getHead(t, m, "a")
	if err != nil || string(got.Hysteresis) != `{"checkpoint":2}` {
		t.Fatalf("snapshot checkpoint with a ledger of %d: flush %v; stored snapshot %s (%v)", len(ds), err, got.Hysteresis, gerr)
	}
	if n := len(mustGet(t, m, "a").Deletes); n != len(ds) {
		t.Errorf("%d deletes stored, want %d", n, len(ds))
	}
}

// A ledger part deleted by hand (kubectl delete configmap of one part) is
// noticed when the member's records are read back (Verify) and written
// again from memory: its deletes are not lost, even though no write of
// the member would touch that part. Before, the head's next checkpoint
// succeeded and the part's deletes stayed missing from the store.
func TestKeeperRebuildsADeletedLedgerPart(t *testing.T) {
	ctx := context.Background()
	m := store.NewMemory()
	const verify = time.Minute
	k, clk := startKeeper(t, m, store.KeeperOptions{Writer: "me", Verify: verify})
	storetest.Update(k, "a", func(st *storetest.State) {
		st.Hysteresis = []byte(`{"checkpoint":1}`)
		st.Deletes = []deletes.PendingDelete{owed("p0"), owed("p1")}
	})
	if err := k.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	part := store.PartName("a", 1)
	_, v, err := m.Get(ctx, part)
	if err != nil {
		t.Fatalf("ledger part: %v", err)
	}
	if err := m.Delete(ctx, part, v); err != nil {
		t.Fatal(err)
	}
	storetest.Update(k, "a", func(st *storetest.State) { st.Hysteresis = []byte(`{"checkpoint":2}`) })
	if err := k.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Step(verify)
	waitFor(t, "the deleted part written again", func() bool {
		_, _, err := m.Get(ctx, part)
		return err == nil
	})
	if got := fmt.Sprint(names(mustGet(t, m, "a").Deletes)); got != "[p0 p1]" {
		t.Errorf("record after a part was deleted by hand: deletes %s, want [p0 p1]", got)
	}
	if got := fmt.Sprint(names(storetest.Memory(k, "a").Deletes)); got != "[p0 p1]" {
		t.Errorf("memory: %s, want [p0 p1]", got)
	}
}
