package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/leafsync/leafsync/internal/syncer/podsync/deletes"
	"github.com/leafsync/leafsync/internal/syncer/store"
	"github.com/leafsync/leafsync/internal/syncer/store/storetest"
)

// Two replicas writing disjoint members never fence each other; each
// member's records carry its own writer term and the writer's incarnation,
// and no process-wide term is taken.
func TestShardedKeepersOfDisjointMembersDoNotFenceEachOther(t *testing.T) {
	ctx := context.Background()
	m := store.NewMemory()
	r := storetest.NewRing()
	r.Take("a", "one")
	r.Take("b", "two")
	r.Take("b", "two") // b's term is 2
	one, _ := startKeeper(t, m, store.KeeperOptions{Owners: r.Owners("one")})
	storetest.Update(one, "a", func(st *storetest.State) { st.Deletes = []deletes.PendingDelete{owed("a0")} })
	if err := one.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	two, _ := startKeeper(t, m, store.KeeperOptions{Owners: r.Owners("two")})
	storetest.Update(two, "b", func(st *storetest.State) { st.Deletes = []deletes.PendingDelete{owed("b0")} })
	if err := two.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	storetest.Update(one, "a", func(st *storetest.State) { st.Deletes = append(st.Deletes, owed("a1")) })
	if err := one.Flush(ctx); err != nil {
		t.Errorf("replica one writing a after two wrote b: %v", err)
	}
	if err := one.CheckWriter(ctx, "a"); err != nil {
		t.Errorf("replica one, writer of a: %v", err)
	}
	if err := two.CheckWriter(ctx, "b"); err != nil {
		t.Errorf("replica two, writer of b: %v", err)
	}
	if err := two.CheckWriter(ctx, "a"); !errors.Is(err, store.ErrFenced) {
		t.Errorf("replica two about a, which one writes: %v, want ErrFenced", err)
	}
	for _, k := range []*store.Keeper{one, two} {
		if err := k.Health(); err != nil {
			t.Errorf("health: %v", err)
		}
	}
	wantRecord(t, m, "a", 1, "one", "[a0 a1]")
	wantRecord(t, m, "b", 2, "two", "[b0]")
	if term, _ := m.Term(ctx); term != 0 {
		t.Errorf("store term %d: a sharded Keeper took a process-wide term", term)
	}
}

// A member another replica took is fenced alone for the replica that wrote
// it before, even while its cache still says it writes it: its stale
// change is not written, its memory of the member is dropped, CheckWriter
// refuses, and its other members keep writing.
func TestShardedKeeperFencedForATakenMemberOnly(t *testing.T) {
	ctx := context.Background()
	m := store.NewMemory()
	r := storetest.NewRing()
	r.Take("a", "one")
	r.Take("c", "one")
	one, _ := startKeeper(t, m, store.KeeperOptions{Owners: r.Owners("one")})
	for _, c := range []string{"a", "c"} {
		storetest.Update(one, c, func(st *storetest.State) { st.Deletes = []deletes.PendingDelete{owed(c + "0"), owed(c + "1")} })
	}
	if err := one.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Two takes a (make before break: one's cache has not seen it yet),
	// reads it and claims it.
	r.Take("a", "two")
	two, _ := startKeeper(t, m, store.KeeperOptions{Owners: r.Owners("two")})
	if err := two.Load(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := two.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if a := mustGet(t, m, "a"); a.Writer != "two" || a.Term != 2 {
		t.Fatalf("a not claimed by two: writer %q term %d", a.Writer, a.Term)
	}
	// One, with stale memory, drops a0 of a and c0 of c.
	for _, c := range []string{"a", "c"} {
		storetest.Update(one, c, func(st *storetest.State) { st.Deletes = []deletes.PendingDelete{owed(c + "1")} })
	}
	if err := one.FlushCluster(ctx, "a"); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("one's write of a after two took it: %v, want ErrFenced", err)
	}
	if err := one.FlushCluster(ctx, "c"); err != nil {
		t.Fatalf("one's write of c, still its own: %v", err)
	}
	if got := fmt.Sprint(names(mustGet(t, m, "a").Deletes)); got != "[a0 a1]" {
		t.Errorf("record of a %s, want [a0 a1] (one's stale change not written)", got)
	}
	if got := fmt.Sprint(names(mustGet(t, m, "c").Deletes)); got != "[c1]" {
		t.Errorf("record of c %s, want [c1]", got)
	}
	if got := storetest.Memory(one, "a").Deletes; len(got) != 0 {
		t.Errorf("one still holds a in memory: %v", names(got))
	}
	if err := one.CheckWriter(ctx, "a"); !errors.Is(err, store.ErrFenced) {
		t.Errorf("CheckWriter of one about a: %v, want ErrFenced", err)
	}
	if err := one.CheckWriter(ctx, "c"); err != nil {
		t.Errorf("CheckWriter of one about c: %v", err)
	}
	if err := one.Health(); err != nil {
		t.Errorf("one's health after one member was fenced: %v", err)
	}
	// Fenced in its term, one writes nothing more of a, even before its
	// cache sees the take.
	puts := m.Puts()
	storetest.Update(one, "a", func(st *storetest.State) { st.Hysteresis = []byte(`{"by":"one"}`) })
	if err := one.FlushCluster(ctx, "a"); !errors.Is(err, store.ErrNotOwner) {
		t.Errorf("one's write of a fenced member: %v, want ErrNotOwner", err)
	}
	if n := m.Puts() - puts; n != 0 {
		t.Errorf("one wrote %d records of a member fenced for it", n)
	}
	if err := one.Health(); err != nil {
		t.Errorf("one's health with a change of a member it does not write: %v", err)
	}
	// Taken back, a is one's to write again.
	r.Take("a", "one", "two")
	if err := one.Load(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := one.FlushCluster(ctx, "a"); err != nil {
		t.Fatalf("one's write of a after taking it back: %v", err)
	}
	wantRecord(t, m, "a", 3, "one", "[a0 a1]")
}

// A member whose writer changed is read again by the next Load in each
// term this replica writes it: what another replica wrote meanwhile is in
// memory before anything is decided; a change this replica made while it
// was not the writer is not written, and, older than the other's records,
// is dropped when it reads them as the writer again.
func TestShardedKeeperReadsAMemberAgainWhenItComesBack(t *testing.T) {
	ctx := context.Background()
	m := store.NewMemory()
	r := storetest.NewRing()
	r.Take("a", "one")
	one, _ := startKeeper(t, m, store.KeeperOptions{Owners: r.Owners("one")})
	if err := one.Load(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	storetest.Update(one, "a", func(st *storetest.State) { st.Deletes = []deletes.PendingDelete{owed("p0")} })
	if err := one.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	r.Take("a", "two", "one")
	two, _ := startKeeper(t, m, store.KeeperOptions{Owners: r.Owners("two")})
	if err := two.Load(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	storetest.Update(two, "a", func(st *storetest.State) {
		st.Deletes, st.Hysteresis = append(st.Deletes, owed("p1")), []byte(`{"by":"two"}`)
	})
	if err := two.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// One is not a's writer: its change waits, unwritten.
	puts := m.Puts()
	storetest.Update(one, "a", func(st *storetest.State) {
		st.Deletes, st.Hysteresis = append(st.Deletes, owed("p2")), []byte(`{"by":"one, late"}`)
	})
	if err := one.FlushCluster(ctx, "a"); !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("one's write of a, written by two: %v, want ErrNotOwner", err)
	}
	if n := m.Puts() - puts; n != 0 {
		t.Fatalf("one wrote %d records of a member it does not write", n)
	}
	if n := one.Pending(); n != 0 {
		t.Errorf("one counts %d members pending: a change of a member it does not write is not its to write", n)
	}
	if one.Known("a") {
		t.Error("Known(a) for a member one does not write now")
	}
	// A comes back to one.
	r.Take("a", "one", "two")
	if err := one.Load(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(sortedNames(storetest.Memory(one, "a").Deletes)); got != "[p0 p1]" {
		t.Errorf("one's memory of a after taking it back: %s, want [p0 p1] (two's p1 read, its own unwritten p2 dropped)", got)
	}
	if got := string(storetest.Memory(one, "a").Hysteresis); got != `{"by":"two"}` {
		t.Errorf("one's engine snapshot of a after taking it back: %s, want two's", got)
	}
	if !one.Known("a") {
		t.Error("Known(a) false after one read it as its writer")
	}
	if err := one.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	wantRecord(t, m, "a", 3, "one", "[p0 p1]")
}

func sortedNames(ds []deletes.PendingDelete) []string { return slices.Sorted(slices.Values(names(ds))) }

// wantRecord checks who wrote a member's records and its deletes (sorted).
func wantRecord(t *testing.T, m store.Store, c string, term uint64, writer, deletes string) {
	t.Helper()
	rec := mustGet(t, m, c)
	if got := fmt.Sprint(sortedNames(rec.Deletes)); rec.Term != term || rec.Writer != writer || got != deletes {
		t.Errorf("record of %s: term %d by %q, deletes %s; want term %d by %q, %s", c, rec.Term, rec.Writer, got, term, writer, deletes)
	}
}

// A member read with no records, taken again in a newer term, is written:
// reading it again finds nothing, which must still count as read.
func TestShardedKeeperWritesAMemberWithoutRecordsInANewTerm(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m := store.NewMemory()
	r := storetest.NewRing()
	r.Take("x", "one")
	one, _ := startKeeper(t, m, store.KeeperOptions{Owners: r.Owners("one")})
	if err := one.Load(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	r.Take("x", "one") // a new incarnation of one took it again
	storetest.Update(one, "x", func(st *storetest.State) { st.Deletes = []deletes.PendingDelete{owed("p0")} })
	if err := one.FlushCluster(ctx, "x"); err != nil {
		t.Fatalf("writing x in its new term: %v", err)
	}
	wantRecord(t, m, "x", 2, "one", "[p0]")
}

// A member another replica held in between, and did not write (nothing to
// save), comes back to a replica with changes it never wrote: they are
// older than what the other replica knew, so the member starts afresh
// instead of being rebuilt from them as if its records had been deleted
// by hand (TestSharding: a paused replica restored a Suspect state from
// before its pause on taking its member back).
func TestShardedKeeperDropsUnwrittenChangesOfAMemberHeldByAnotherInBetween(t *testing.T) {
	ctx := context.Background()
	m := store.NewMemory()
	r := storetest.NewRing()
	r.Take("x", "one")
	one, _ := startKeeper(t, m, store.KeeperOptions{Owners: r.Owners("one")})
	if err := one.Load(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	r.Take("x", "two", "one") // two writes x now, and writes nothing
	storetest.Update(one, "x", func(st *storetest.State) {
		st.Deletes, st.Hysteresis = []deletes.PendingDelete{owed("stale")}, []byte(`{"by":"one, before two"}`)
	})
	r.Take("x", "one", "two") // x comes back to one
	if err := one.Load(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if got := storetest.Memory(one, "x"); len(got.Deletes) != 0 || len(got.Hysteresis) != 0 {
		t.Errorf("one's memory of x after two held it: deletes %v, snapshot %s; want nothing (its unwritten changes predate two's term)",
			sortedNames(got.Deletes), got.Hysteresis)
	}
}
