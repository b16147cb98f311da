// Package storetest is the conformance suite every state store backend
// passes: conditional writes, conflicts between racing writers, terms, scan
// and large records. The memory backend runs it in unit tests; the kube and
// etcd backends run it against a real kube-apiserver and a real etcd
// (test/e2e/store_test.go).
package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/leafsync/leafsync/internal/syncer/podsync/deletes"
	"github.com/leafsync/leafsync/internal/syncer/store"
)

// Run runs the suite against stores returned by open. Every store open
// returns must see the same data (two replicas of leafsync); cluster names
// are unique per run, so the backend need not be empty.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	ctx := context.Background()
	prefix := fmt.Sprintf("t%d-", rand.IntN(1e6))
	name := func(s string) string { return prefix + s }

	t.Run("get put delete", func(t *testing.T) {
		s := open(t)
		c := name("crud")
		if _, _, err := s.Get(ctx, c); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Get of a missing record: %v, want ErrNotFound", err)
		}
		st := sample(c, 2)
		v1, err := s.Put(ctx, c, st, "")
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		got, v, err := s.Get(ctx, c)
		if err != nil || v != v1 {
			t.Fatalf("Get after create: version %q (want %q), %v", v, v1, err)
		}
		if !sameState(got, st) {
			t.Fatalf("read back %+v, want %+v", got, st)
		}
		if _, err := s.Put(ctx, c, st, ""); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("create over an existing record: %v, want ErrConflict", err)
		}
		st = sample(c, 1)
		v2, err := s.Put(ctx, c, st, v1)
		if err != nil || v2 == v1 {
			t.Fatalf("update: version %q (old %q), %v", v2, v1, err)
		}
		if _, err := s.Put(ctx, c, st, v1); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("update with a stale version: %v, want ErrConflict", err)
		}
		if err := s.Delete(ctx, c, v1); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("delete with a stale version: %v, want ErrConflict", err)
		}
		if err := s.Delete(ctx, c, ""); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("delete of an existing record without its version: %v, want ErrConflict", err)
		}
		if err := s.Delete(ctx, c, v2); err != nil {
			t.Fatalf("delete: %v", err)
		}
		if _, _, err := s.Get(ctx, c); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Get after delete: %v, want ErrNotFound", err)
		}
		if err := s.Delete(ctx, c, v2); err != nil {
			t.Fatalf("delete of a record already gone: %v, want nil", err)
		}
		if _, err := s.Put(ctx, c, st, v2); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("update of a deleted record: %v, want ErrConflict", err)
		}
	})

	t.Run("two replicas race on the same key", func(t *testing.T) {
		a, b := open(t), open(t)
		c := name("race")
		v, err := a.Put(ctx, c, sample(c, 0), "")
		if err != nil {
			t.Fatal(err)
		}
		const rounds = 30
		wins := map[string]int{}
		for i := range rounds {
			// Both read the same version, then write at the same moment.
			var (
				wg    sync.WaitGroup
				start = make(chan struct{})
				errs  [2]error
				vers  [2]store.Version
			)
			for j, s := range []store.Store{a, b} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					st := sample(c, 1)
					st.Writer = fmt.Sprintf("replica-%d round %d", j, i)
					<-start
					vers[j], errs[j] = s.Put(ctx, c, st, v)
				}()
			}
			close(start)
			wg.Wait()
			ok := 0
			for j := range 2 {
				switch {
				case errs[j] == nil:
					ok++
					v = vers[j]
					wins[fmt.Sprintf("replica-%d", j)]++
				case !errors.Is(errs[j], store.ErrConflict):
					t.Fatalf("round %d: replica %d: %v, want success or ErrConflict", i, j, errs[j])
				}
			}
			if ok != 1 {
				t.Fatalf("round %d: %d writes won (errors %v, %v), want exactly 1", i, ok, errs[0], errs[1])
			}
			got, gv, err := b.Get(ctx, c)
			if err != nil || gv != v {
				t.Fatalf("round %d: read version %q, want the winner's %q (%v)", i, gv, v, err)
			}
			if !strings.HasSuffix(got.Writer, fmt.Sprintf("round %d", i)) {
				t.Fatalf("round %d: record written by %q", i, got.Writer)
			}
		}
		t.Logf("%d rounds, exactly one winner each: %v", rounds, wins)
	})

	t.Run("scan", func(t *testing.T) {
		s := open(t)
		want := map[string]store.ClusterState{}
		for i := range 7 {
			c := name(fmt.Sprintf("scan-%d", i))
			want[c] = sample(c, i%3)
			if _, err := s.Put(ctx, c, want[c], ""); err != nil {
				t.Fatal(err)
			}
		}
		recs, err := s.Scan(ctx)
		if err != nil {
			t.Fatal(err)
		}
		found := 0
		for _, r := range recs {
			w, ok := want[r.Cluster]
			if !ok {
				continue
			}
			found++
			if !sameState(r.State, w) {
				t.Errorf("scan %s: %+v, want %+v", r.Cluster, r.State, w)
			}
			if _, v, _ := s.Get(ctx, r.Cluster); v != r.Version {
				t.Errorf("scan %s: version %q, Get says %q", r.Cluster, r.Version, v)
			}
		}
		if found != len(want) {
			t.Errorf("scan found %d of %d records", found, len(want))
		}
	})

	t.Run("terms increase", func(t *testing.T) {
		a, b := open(t), open(t)
		t1, err := a.NextTerm(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t2, err := b.NextTerm(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if t2 <= t1 {
			t.Fatalf("terms %d then %d: not increasing", t1, t2)
		}
		cur, err := a.Term(ctx)
		if err != nil || cur != t2 {
			t.Fatalf("Term = %d (%v), want %d", cur, err, t2)
		}
		// Racing NextTerms all get distinct terms.
		var (
			mu   sync.Mutex
			seen = map[uint64]bool{}
			wg   sync.WaitGroup
		)
		for i := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := a
				if i%2 == 1 {
					s = b
				}
				tt, err := s.NextTerm(ctx)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					t.Error(err)
				} else if seen[tt] {
					t.Errorf("term %d handed out twice", tt)
				}
				seen[tt] = true
			}()
		}
		wg.Wait()
	})

	t.Run("a deposed leader's keeper is fenced", func(t *testing.T) {
		c := name("fence")
		old := runKeeper(t, store.NewKeeper(open(t), logr.Discard(), store.KeeperOptions{Writer: "old"}))
		Update(old, c, func(st *State) { st.Hysteresis = []byte(`{"by":"old"}`) })
		if err := old.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		leader := runKeeper(t, store.NewKeeper(open(t), logr.Discard(), store.KeeperOptions{Writer: "new"}))
		if err := leader.Load(ctx, c); err != nil {
			t.Fatal(err)
		}
		Update(leader, c, func(st *State) { st.Hysteresis = []byte(`{"by":"new"}`) })
		if err := leader.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		Update(old, c, func(st *State) { st.Hysteresis = []byte(`{"by":"old again"}`) })
		if err := old.Flush(ctx); !errors.Is(err, store.ErrFenced) {
			t.Fatalf("deposed keeper's write: %v, want ErrFenced", err)
		}
		got, err := get(open(t), c)
		if err != nil || string(got.Hysteresis) != `{"by":"new"}` || got.Writer != "new" {
			t.Fatalf("record %s by %s (%v), want the new leader's", got.Hysteresis, got.Writer, err)
		}
	})

	t.Run("sharded keepers fence one member at a time", func(t *testing.T) {
		a, b, c := name("shard-a"), name("shard-b"), name("shard-c")
		r := NewRing()
		r.Take(a, "one")
		r.Take(c, "one")
		r.Take(b, "two")
		one := runKeeper(t, store.NewKeeper(open(t), logr.Discard(), store.KeeperOptions{Owners: r.Owners("one")}))
		two := runKeeper(t, store.NewKeeper(open(t), logr.Discard(), store.KeeperOptions{Owners: r.Owners("two")}))
		for k, cs := range map[*store.Keeper][]string{one: {a, c}, two: {b}} {
			for _, cl := range cs {
				Update(k, cl, func(st *State) { st.Hysteresis = []byte(`{"by":"first"}`) })
			}
			if err := k.Flush(ctx); err != nil {
				t.Fatalf("first writes: %v", err)
			}
		}
		// Two takes a; one's cache has not seen it yet.
		r.Take(a, "two")
		if err := two.Load(ctx, a); err != nil {
			t.Fatal(err)
		}
		Update(two, a, func(st *State) { st.Hysteresis = []byte(`{"by":"two"}`) })
		if err := two.Flush(ctx); err != nil {
			t.Fatalf("two's write of a after taking it: %v", err)
		}
		Update(one, a, func(st *State) { st.Hysteresis = []byte(`{"by":"one, stale"}`) })
		Update(one, c, func(st *State) { st.Hysteresis = []byte(`{"by":"one"}`) })
		if err := one.FlushCluster(ctx, a); !errors.Is(err, store.ErrFenced) {
			t.Fatalf("one's stale write of a: %v, want ErrFenced", err)
		}
		if err := one.FlushCluster(ctx, c); err != nil {
			t.Fatalf("one's write of c: %v", err)
		}
		if err := one.CheckWriter(ctx, a); !errors.Is(err, store.ErrFenced) {
			t.Errorf("one's CheckWriter of a: %v, want ErrFenced", err)
		}
		for cl, want := range map[string]State{a: {Hysteresis: []byte(`{"by":"two"}`), Term: 2, Writer: "two"},
			b: {Hysteresis: []byte(`{"by":"first"}`), Term: 1, Writer: "two"}, c: {Hysteresis: []byte(`{"by":"one"}`), Term: 1, Writer: "one"}} {
			got, err := get(open(t), cl)
			if err != nil || string(got.Hysteresis) != string(want.Hysteresis) || got.Term != want.Term || got.Writer != want.Writer {
				t.Errorf("record %s: %s, term %d by %q (%v); want %s, term %d by %q", cl, got.Hysteresis, got.Term, got.Writer, err,
					want.Hysteresis, want.Term, want.Writer)
			}
		}
	})

	t.Run("large record compressed, too large refused", func(t *testing.T) {
		s := open(t)
		c := name("large")
		st := sample(c, 3000) // ~600KiB of JSON
		if _, err := s.Put(ctx, c, st, ""); err != nil {
			t.Fatalf("3000 pending deletes: %v", err)
		}
		got, _, err := s.Get(ctx, c)
		if err != nil || !sameState(got, st) {
			t.Fatalf("read back large record: %v", err)
		}
		huge := Record(State{Hysteresis: []byte(`{"x":"` + randomText(1536<<10) + `"}`)})
		if _, err := s.Put(ctx, name("huge"), huge, ""); !errors.Is(err, store.ErrTooLarge) {
			t.Fatalf("incompressible 1.5MiB record: %v, want ErrTooLarge", err)
		}
	})

	t.Run("list gives one cluster's records", func(t *testing.T) {
		s := open(t)
		c, other := name("list"), name("list-x")
		for _, n := range []string{c, store.PartName(c, 1), store.PartName(c, 2), other, store.PartName(other, 1)} {
			if _, err := s.Put(ctx, n, sample(store.ClusterOf(n), 1), ""); err != nil {
				t.Fatalf("put %s: %v", n, err)
			}
		}
		recs, err := s.List(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range recs {
			if r.Cluster != c {
				t.Errorf("record %s listed with cluster %q", r.Name, r.Cluster)
			}
			got = append(got, r.Name)
		}
		sort.Strings(got)
		if want := []string{c, store.PartName(c, 1), store.PartName(c, 2)}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("List(%s) = %v, want %v", c, got, want)
		}
		if recs, err := s.List(ctx, name("none")); err != nil || len(recs) != 0 {
			t.Errorf("List of a cluster without records: %d records, %v", len(recs), err)
		}
	})

	t.Run("a ledger twice the one-record limit", func(t *testing.T) {
		ledgerTwiceTheOldLimit(t, open, name("ledger"))
	})

	t.Run("a record of the one-record format is read and moved", func(t *testing.T) {
		s := open(t)
		c := name("oldformat")
		old := State{Hysteresis: []byte(`{"version":1,"state":"NotReady"}`), Term: 1, Writer: "before-ledger-parts"}
		old.Deletes = Deferred(0, OneRecordBound)
		if _, err := s.Put(ctx, c, Record(old), ""); err != nil {
			t.Fatalf("a one-record state at the old bound (%d deletes): %v", OneRecordBound, err)
		}
		k := runKeeper(t, store.NewKeeper(open(t), logr.Discard(), store.KeeperOptions{Writer: "upgraded"}))
		err := k.Load(ctx, c)
		if st := Memory(k, c); err != nil || len(st.Deletes) != OneRecordBound || string(st.Hysteresis) != string(old.Hysteresis) {
			t.Fatalf("loaded %d deletes, snapshot %s (%v); want %d and the old snapshot", len(st.Deletes), st.Hysteresis, err, OneRecordBound)
		}
		Update(k, c, func(st *State) { st.Deletes = append(st.Deletes, Deferred(OneRecordBound, 1)...) })
		if err := k.Flush(ctx); err != nil {
			t.Fatalf("first write after the upgrade: %v", err)
		}
		head, err := get(s, c)
		if err != nil || len(head.Deletes) != 0 || string(head.Hysteresis) != string(old.Hysteresis) || head.Writer != "upgraded" {
			t.Fatalf("head after the upgrade: %d deletes, snapshot %s, writer %q (%v); want no deletes, the snapshot, the new writer",
				len(head.Deletes), head.Hysteresis, head.Writer, err)
		}
		got, err := readCluster(open(t), c)
		if err != nil || len(got.Deletes) != OneRecordBound+1 {
			t.Fatalf("read back %d deletes (%v), want %d", len(got.Deletes), err, OneRecordBound+1)
		}
	})
}

// runKeeper runs k until the test ends.
func runKeeper(t *testing.T, k *store.Keeper) *store.Keeper {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); k.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return k
}

// get reads one record.
func get(s store.Store, name string) (State, error) {
	cs, _, err := s.Get(context.Background(), name)
	if err != nil {
		return State{}, err
	}
	return Read(cs)
}

// readCluster reads a member's records assembled.
func readCluster(s store.Store, cluster string) (State, error) {
	cs, err := store.ReadCluster(context.Background(), s, cluster)
	if err != nil {
		return State{}, err
	}
	return Read(cs)
}

// sample is a record with a hysteresis snapshot and n pending deletes.
func sample(cluster string, n int) store.ClusterState {
	st := State{
		Hysteresis: []byte(fmt.Sprintf(`{"version":1,"cluster":%q,"state":"Suspect","failFor":"4.5s"}`, cluster)),
		Term:       1, Writer: "storetest",
	}
	grace := int64(30)
	for i := range n {
		st.Deletes = append(st.Deletes, deletes.PendingDelete{
			Kind: deletes.Owed, Namespace: "workload", Name: fmt.Sprintf("web-%d", i),
			HostUID: fmt.Sprintf("0b5c1d8e-%04d-4c52-9e1e-6f1c2a3b4c5d", i), Cause: "DeletionByTaintManager",
			Owner: "ReplicaSet/web-5d9c7", Since: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), GracePeriodSeconds: &grace,
		})
	}
	return Record(st)
}

func sameState(x, y store.ClusterState) bool {
	a, errA := Read(x)
	b, errB := Read(y)
	if errA != nil || errB != nil || string(a.Hysteresis) != string(b.Hysteresis) || len(a.Deletes) != len(b.Deletes) || a.Term != b.Term || a.Writer != b.Writer {
		return false
	}
	for i := range a.Deletes {
		x, y := a.Deletes[i], b.Deletes[i]
		if x.Name != y.Name || x.HostUID != y.HostUID || !x.Since.Equal(y.Since) || *x.GracePeriodSeconds != *y.GracePeriodSeconds {
			return false
		}
	}
	return true
}

func randomText(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[rand.IntN(len(alphabet))]
	}
	return string(b)
}
