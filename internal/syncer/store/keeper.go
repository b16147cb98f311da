package store

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/leafsync/leafsync/internal/runner"
)

// KeeperOptions tune a Keeper; zero values take the defaults.
type KeeperOptions struct {
	// Writer names this process in the records it writes (pod name).
	Writer string
	// CallTimeout bounds one store call (default 10s).
	CallTimeout time.Duration
	// Coalesce is how long the Keeper waits after a change before writing,
	// so that a burst of changes becomes one write (default 50ms).
	Coalesce time.Duration
	// MinBackoff and MaxBackoff bound the retry delay of a cluster while
	// its writes fail (defaults 500ms and 30s; jittered).
	MinBackoff, MaxBackoff time.Duration
	// Parallel is how many clusters are written at once (default 4).
	Parallel int
	// OnCall, if set, is called after every store call (for metrics). It
	// must not block.
	OnCall func(CallEvent)
	// Verify is how often the records of a member with ledger parts are
	// read back while nothing changes (default 1m), so that a part
	// deleted by hand is written again from memory. Members without
	// parts are not read: a head deleted by hand conflicts at its next
	// write and is rebuilt then.
	Verify time.Duration
	// Clock drives coalescing, backoff and the figures (real when nil).
	Clock clock.WithTicker
	// Owners, when set, shards the members across replicas: each member
	// is written with its own writer term (no process-wide term is
	// taken), only while this replica is its writer, and a member another
	// replica took is fenced alone. Nil: this Keeper is its process's one
	// writer, fenced by the store's term.
	Owners Owners
}

// Keeper is the one writer of the store in a leafsync process (the leader).
// Components change a cluster's state in memory through their sections
// (Section.Set, Ledger.Update) and read it back from memory (Section.Get,
// Ledger.Items); the Keeper writes the latest state of each changed cluster
// in the background, coalescing any number of changes into one write, and
// retries with backoff while the store is unavailable. Decisions never wait
// for the store, and nothing queued is lost while the process lives.
//
// With KeeperOptions.Owners (members sharded across replicas), every
// replica runs a Keeper, and each writes only the members it is the writer
// of, with their own writer terms (owners.go).
//
// It composes four parts, one concept each: when to write (writeBehind, on
// internal/runner), the store calls (calls), the writer term (fence; per
// member when sharded: owners), and
// how a cluster's records are written and merged with another writer's
// (records.go, merge.go; the layout of its ledger in ledger.go).
type Keeper struct {
	log    logr.Logger
	opts   KeeperOptions
	calls  *calls
	fence  *fence
	owners *owners // nil unless sharded
	wb     *writeBehind

	mu        sync.Mutex
	entries   map[string]*entry
	preloaded bool
	conflicts uint64 // writes that found records changed by an older writer
}

// termKey is the queue key of taking the writer term (no cluster is named
// "").
const termKey = ""

// entry is the Keeper's view of one cluster: its state in memory and its
// records in the store as last read or written.
type entry struct {
	mem     state // what components see
	dirty   bool
	dirtyAt time.Time
	seq     uint64 // bumped by every change
	flushed uint64 // seq of the last write that succeeded
	gone    bool   // deregistered: delete the records
	// ledger counts changes of mem's ledgers, so that a value checkpoint
	// does not lay a long ledger out again.
	ledger uint64
	// actedIn (sharded) is the member term in which this replica last read
	// or wrote the records as the member's writer: in a newer term they
	// are read again first (another replica may have written them since).
	actedIn uint64

	recordSet
}

func (e *entry) pending() bool { return e.dirty || e.gone }

// Stats are the Keeper's figures, for metrics and health.
type Stats struct {
	Backend string
	// Term is this writer's term (0 until taken); Fenced once a newer
	// writer took over.
	Term   uint64
	Fenced bool
	// Writes and Deletes count successful store writes; Errors failed
	// store calls; Conflicts writes that found the record changed by an
	// older writer and were merged.
	Writes, Deletes, Errors, Conflicts uint64
	// Pending is the number of clusters whose latest state is not yet
	// written (sharded: of the members this replica writes now);
	// OldestPending how long the oldest has waited.
	Pending       int
	OldestPending time.Duration
	// LastError is the last failure ("" once every failing write
	// succeeded again); FailingSince when writes started failing (zero
	// when healthy).
	LastError    string
	FailingSince time.Time
	// LastCall is how long the last store call took.
	LastCall time.Duration
}

// NewKeeper returns a Keeper over a Store; Run writes. At most one
// KeeperOptions may be given.
func NewKeeper(s Store, log logr.Logger, opts ...KeeperOptions) *Keeper {
	var o KeeperOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 10 * time.Second
	}
	if o.Coalesce <= 0 {
		o.Coalesce = 50 * time.Millisecond
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 500 * time.Millisecond
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(30*time.Second, o.MinBackoff)
	}
	if o.Parallel <= 0 {
		o.Parallel = 4
	}
	if o.Verify <= 0 {
		o.Verify = time.Minute
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	c := &calls{store: s, timeout: o.CallTimeout, clock: o.Clock, onCall: o.OnCall}
	k := &Keeper{log: log, opts: o, calls: c, fence: &fence{calls: c, log: log}, entries: map[string]*entry{}}
	if o.Owners != nil {
		k.owners = &owners{of: o.Owners, calls: c, log: log, fenced: map[string]writerStamp{}}
	}
	k.wb = newWriteBehind(k.reconcile, o, log)
	return k
}

// Backend names the store's backend.
func (k *Keeper) Backend() string { return k.calls.store.Backend() }

// Sharded reports whether members are sharded across replicas (Owners set).
func (k *Keeper) Sharded() bool { return k.owners != nil }

// stamp is the term and writer of a cluster's records now: unsharded, the
// process's term (and the fencing error once fenced); sharded, the
// member's term and this replica's incarnation, or errNotActing.
func (k *Keeper) stamp(cluster string) (uint64, string, error) {
	if k.owners == nil {
		term, fenced := k.fence.state()
		return term, k.opts.Writer, fenced
	}
	return k.owners.stamp(cluster)
}

// checkWriter is the check after a conflicting write or a record of a
// newer term: unsharded, the store's term (a newer one fences this Keeper
// for good); sharded, Confirm (another writer fences this one member, and
// its state leaves memory: the records are the new writer's).
func (k *Keeper) checkWriter(ctx context.Context, cluster string) error {
	if k.owners == nil {
		return k.fence.check(ctx)
	}
	err := k.owners.confirm(ctx, cluster)
	if errors.Is(err, ErrFenced) {
		k.mu.Lock()
		delete(k.entries, cluster)
		k.mu.Unlock()
	}
	return err
}

func (k *Keeper) entryLocked(cluster string) *entry {
	e := k.entries[cluster]
	if e == nil {
		e = &entry{mem: newState()}
		k.entries[cluster] = e
	}
	return e
}

// Load reads a cluster's records from the store into memory, once: when
// the cluster is first seen by this leader. A missing record is an empty
// state. Changes made before Load are kept and merged with the records.
// Sharded, the records are read again whenever they may have been written
// by another replica since: on every Load while this replica is not the
// member's writer, and on the first Load in each term it is.
func (k *Keeper) Load(ctx context.Context, cluster string) error {
	k.mu.Lock()
	e := k.entries[cluster]
	done := e != nil && (e.gone || e.known && k.currentLocked(cluster, e))
	dirty := k.owners != nil && e != nil && e.known && e.dirty
	k.mu.Unlock()
	if done {
		return nil
	}
	if dirty {
		// Sharded, with changes not written yet. As the member's
		// writer, writing them reads and merges the records first, in
		// the worker that owns the member's writes; otherwise they are
		// merged here (nothing writes them).
		if _, _, err := k.owners.stamp(cluster); err == nil {
			return k.FlushCluster(ctx, cluster)
		}
		return k.resolve(ctx, cluster, false)
	}
	recs, err := k.calls.list(ctx, cluster)
	if err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if e := k.entries[cluster]; e != nil && e.known && !e.dirty && !k.currentLocked(cluster, e) {
		delete(k.entries, cluster) // read anew: nothing of it is left to write
	}
	k.absorbLocked(cluster, decodeRecords(recs))
	return nil
}

// currentLocked reports whether a known cluster's records in memory are as
// this Keeper last read or wrote them as their writer: always unsharded;
// sharded, only while this replica is the member's writer in the term it
// read or wrote them in.
func (k *Keeper) currentLocked(cluster string, e *entry) bool {
	if k.owners == nil {
		return true
	}
	term, _, err := k.owners.stamp(cluster)
	return err == nil && e.actedIn == term
}

// Preload reads every record once (one Scan), so that a new leader does not
// read clusters one by one. It returns the number of clusters read.
func (k *Keeper) Preload(ctx context.Context) (int, error) {
	recs, err := k.calls.scan(ctx)
	if err != nil {
		return 0, err
	}
	byCluster := map[string][]Record{}
	for _, r := range recs {
		byCluster[r.Cluster] = append(byCluster[r.Cluster], r)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for c, rs := range byCluster {
		k.absorbLocked(c, decodeRecords(rs))
	}
	k.preloaded = true
	return len(byCluster), nil
}

// Preloaded reports whether Preload has read every record.
func (k *Keeper) Preloaded() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.preloaded
}

// absorbLocked takes a cluster's records read from the store as the base
// of a cluster not known yet; memory changed before (a change before Load)
// is merged.
func (k *Keeper) absorbLocked(cluster string, recs []stored) {
	e := k.entryLocked(cluster)
	if e.known || e.gone {
		return
	}
	st := assemble(cluster, recs)
	if e.dirty {
		e.mem = mergeStates(newState(), st, e.mem)
	} else {
		e.mem = st.clone()
	}
	term, _, notWriter := k.stamp(cluster)
	claim := e.index(cluster, recs, term, k.log)
	e.verifiedAt = k.opts.Clock.Now()
	e.ledger++
	if k.owners != nil && notWriter == nil {
		e.actedIn = term
	}
	if claim && (k.owners == nil || notWriter == nil) {
		// Claim the records: write them back with this Keeper's term, so
		// that an older writer still running (a leader resumed after a
		// pause) conflicts on its next write, finds the newer term and is
		// fenced, instead of writing over records this Keeper has only
		// read. A head written before ledger parts existed (ledgers in
		// it) is rewritten the same way: its items move to parts.
		// Sharded, a replica claims only the members it writes.
		k.changedLocked(cluster, e)
	}
}

// changedLocked marks a cluster's memory changed and schedules its write.
func (k *Keeper) changedLocked(cluster string, e *entry) {
	if !e.dirty {
		e.dirty, e.dirtyAt = true, k.opts.Clock.Now()
	}
	e.seq++
	if _, fenced := k.fence.state(); fenced == nil {
		k.wb.schedule(cluster)
	}
}

// CheckWriter confirms, with one read of the store's term, that this Keeper
// is still the writer: its term is taken and no newer one was handed out.
// Destructive calls (deleting a member pod) check it first, so that a
// deposed leader resumed after a pause cannot act on its stale caches.
// Sharded, it confirms that this replica is still the cluster's writer
// (Owners.Confirm; an error wrapping ErrFenced if not).
func (k *Keeper) CheckWriter(ctx context.Context, cluster string) error {
	if k.owners != nil {
		return k.checkWriter(ctx, cluster)
	}
	if err := k.fence.ensure(ctx); err != nil {
		return err
	}
	return k.fence.check(ctx)
}

// Known reports whether a cluster's records have been read (or written) by
// this Keeper; sharded, as the member's writer in its current term.
func (k *Keeper) Known(cluster string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	e := k.entries[cluster]
	return e != nil && e.known && k.currentLocked(cluster, e)
}

// value is a cluster's value section in memory.
func (k *Keeper) value(cluster, name string) []byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	if e := k.entries[cluster]; e != nil {
		return append([]byte(nil), e.mem.values[name]...)
	}
	return nil
}

// ledger is a cluster's ledger section in memory (nil if empty).
func (k *Keeper) ledger(cluster, name string) items {
	k.mu.Lock()
	defer k.mu.Unlock()
	if e := k.entries[cluster]; e != nil {
		return e.mem.ledgers[name]
	}
	return nil
}

// update changes a cluster's state in memory and schedules a write; fn
// reports whether a ledger changed.
func (k *Keeper) update(cluster string, fn func(*state) bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	e := k.entryLocked(cluster)
	if fn(&e.mem) {
		e.ledger++
	}
	e.gone = false
	k.changedLocked(cluster, e)
}

// Forget drops a deregistered cluster and deletes its records in the
// background.
func (k *Keeper) Forget(cluster string) {
	k.mu.Lock()
	e := k.entryLocked(cluster)
	e.mem, e.dirty, e.gone = newState(), false, true
	e.seq++
	k.mu.Unlock()
	k.wb.schedule(cluster)
}

// ForgetNow is Forget, then deletes the records at once; an error means a
// record is still there (the background retries go on).
func (k *Keeper) ForgetNow(ctx context.Context, cluster string) error {
	k.Forget(cluster)
	return k.FlushCluster(ctx, cluster)
}

// FlushCluster writes one cluster's latest state now and returns nil once
// it is in the store (nil at once if nothing is pending), e.g. before an
// action that must not happen unless a pending delete is durable.
func (k *Keeper) FlushCluster(ctx context.Context, cluster string) error {
	return k.flush(ctx, func(c string) bool { return c == cluster })
}

// Flush writes every changed cluster now.
func (k *Keeper) Flush(ctx context.Context) error {
	return k.flush(ctx, func(string) bool { return true })
}

// flush has the workers write the pending clusters chosen now, ahead of
// coalescing and backoff, and waits until each one's state as of the call
// is in the store or its write failed.
func (k *Keeper) flush(ctx context.Context, chosen func(string) bool) error {
	if _, fenced := k.fence.state(); fenced != nil {
		return fenced
	}
	k.mu.Lock()
	want := map[string]uint64{}
	for c, e := range k.entries {
		if chosen(c) && e.pending() {
			want[c] = e.seq
		}
	}
	k.mu.Unlock()
	return k.wb.flush(ctx, want)
}

// Pending is the number of clusters whose latest state is not yet written
// (sharded: of the members this replica writes now).
func (k *Keeper) Pending() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n, _ := k.pendingLocked()
	return n
}

// writesLocked reports whether this Keeper writes a cluster now: always
// unsharded; sharded, while this replica is the member's writer (the
// changes of other members wait, and are not counted pending).
func (k *Keeper) writesLocked(cluster string) bool {
	if k.owners == nil {
		return true
	}
	_, _, err := k.owners.stamp(cluster)
	return err == nil
}

func (k *Keeper) pendingLocked() (int, time.Time) {
	n := 0
	var oldest time.Time
	for c, e := range k.entries {
		if e.pending() && k.writesLocked(c) {
			n++
			if e.dirty && (oldest.IsZero() || e.dirtyAt.Before(oldest)) {
				oldest = e.dirtyAt
			}
		}
	}
	return n, oldest
}

// Stats returns the Keeper's figures.
func (k *Keeper) Stats() Stats {
	s := Stats{Backend: k.Backend()}
	k.calls.figures(&s)
	var fenced error
	s.Term, fenced = k.fence.state()
	s.Fenced = fenced != nil
	s.FailingSince, s.LastError = k.wb.health()
	k.mu.Lock()
	defer k.mu.Unlock()
	s.Conflicts = k.conflicts
	var oldest time.Time
	s.Pending, oldest = k.pendingLocked()
	if !oldest.IsZero() {
		s.OldestPending = k.opts.Clock.Since(oldest)
	}
	return s
}

// Health returns nil while the store takes writes, otherwise an error that
// says what is wrong and what leafsync does about it (for a health detail;
// leafsync keeps deciding from memory either way).
func (k *Keeper) Health() error {
	s := k.Stats()
	switch {
	case s.Fenced:
		return fmt.Errorf("state store (%s): a newer leafsync writer (term > %d) took over; this replica no longer writes", s.Backend, s.Term)
	case !s.FailingSince.IsZero():
		return fmt.Errorf("state store (%s) failing for %s: %s; %d cluster(s) with state pending in memory (oldest %s), retrying with backoff; decisions continue from memory",
			s.Backend, k.opts.Clock.Since(s.FailingSince).Round(time.Second), s.LastError, s.Pending, s.OldestPending.Round(time.Second))
	}
	return nil
}

// Run writes changes with Parallel workers until ctx ends, then makes a
// last attempt to flush once the workers are done. It takes the writer
// term at once, so that an older leader still running is fenced as early
// as possible (sharded: no process-wide term).
func (k *Keeper) Run(ctx context.Context) {
	if k.owners == nil {
		k.wb.runner.Add(termKey)
	}
	k.wb.runner.Run(ctx)
	k.finalFlush()
}

// reconcile is the runner's work on one key: the term, or a cluster's
// write. A fenced Keeper is done, not retried.
func (k *Keeper) reconcile(ctx context.Context, key string) (runner.Result, error) {
	if ctx.Err() != nil {
		return runner.Result{}, nil // stopping: the final flush writes it
	}
	var err error
	if key == termKey {
		err = k.fence.ensure(ctx)
		k.wb.outcome(key, err)
	} else {
		err = k.write(ctx, key)
	}
	switch {
	case errors.Is(err, ErrFenced), errors.Is(err, ErrNotOwner):
		// Fenced, or (sharded) not this replica's to write now: the
		// changes wait for a change or a Load while it is the writer.
		return runner.Result{}, nil
	case err != nil:
		return runner.Result{}, err
	}
	return runner.Result{RequeueAfter: k.verifyIn(key)}, nil
}

// verifyIn is when a cluster's records are due to be read back: only a
// cluster with ledger parts is (0: never).
func (k *Keeper) verifyIn(cluster string) time.Duration {
	k.mu.Lock()
	defer k.mu.Unlock()
	e := k.entries[cluster]
	if e == nil || !e.known || e.parts == 0 {
		return 0
	}
	if d := e.verifiedAt.Add(k.opts.Verify).Sub(k.opts.Clock.Now()); d > 0 {
		return d
	}
	return k.opts.Verify
}

// verifyDue reports whether a cluster with nothing to write is due to have
// its records read back.
func (k *Keeper) verifyDue(cluster string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	e := k.entries[cluster]
	return e != nil && e.known && !e.pending() && e.parts > 0 &&
		!k.opts.Clock.Now().Before(e.verifiedAt.Add(k.opts.Verify))
}

// write writes one cluster and answers the flushes waiting for it. Only a
// worker, or the final flush once the workers are done, calls it: one
// cluster is never written twice at once.
func (k *Keeper) write(ctx context.Context, cluster string) error {
	err := k.writable(ctx, cluster)
	if err == nil && k.verifyDue(cluster) {
		err = k.resolve(ctx, cluster, false)
	}
	if err == nil {
		if err = k.sync(ctx, cluster); err != nil {
			err = fmt.Errorf("cluster %s: %w", cluster, err)
		}
	}
	k.mu.Lock()
	flushed := ^uint64(0)
	if e := k.entries[cluster]; e != nil && e.pending() {
		flushed = e.flushed
	}
	k.mu.Unlock()
	k.wb.written(cluster, err, flushed)
	return err
}

// writable: unsharded, the process's term is taken (once); sharded, this
// replica is the cluster's writer now. A deregistered cluster another
// replica writes leaves memory: that replica deletes its records.
func (k *Keeper) writable(ctx context.Context, cluster string) error {
	if k.owners == nil {
		return k.fence.ensure(ctx)
	}
	_, _, err := k.owners.stamp(cluster)
	if err != nil {
		k.mu.Lock()
		if e := k.entries[cluster]; e != nil && e.gone {
			delete(k.entries, cluster)
		}
		k.mu.Unlock()
	}
	return err
}

// finalFlush writes what is still pending once the workers are done, then
// answers the flushes still waiting.
func (k *Keeper) finalFlush() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	k.mu.Lock()
	var work []string
	for c, e := range k.entries {
		if e.pending() {
			work = append(work, c)
		}
	}
	k.mu.Unlock()
	sort.Strings(work)
	if _, fenced := k.fence.state(); fenced == nil {
		workqueue.ParallelizeUntil(ctx, k.opts.Parallel, len(work), func(i int) {
			if err := k.write(ctx, work[i]); err != nil && !errors.Is(err, ErrNotOwner) {
				k.log.Error(err, "last write of leafsync state before stopping failed")
			}
		})
	}
	k.wb.stop()
}
