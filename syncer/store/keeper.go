package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/leafsync/leafsync/syncer/podsync/deletes"
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
	// Clock drives coalescing, backoff and the figures (real when nil).
	Clock clock.WithTicker
}

// CallEvent describes one store call.
type CallEvent struct {
	Backend string
	// Op is "put", "delete", "get", "scan" or "term".
	Op       string
	Cluster  string
	Duration time.Duration
	// Err is nil on success; Reason(Err) classifies it.
	Err error
}

// Keeper is the one writer of the store in a leafsync process (the leader).
// Components change a cluster's state in memory with Update and read it with
// State; the Keeper writes the latest state of each changed cluster in the
// background, coalescing any number of changes into one write, and retries
// with backoff while the store is unavailable. Decisions never wait for the
// store, and nothing queued is lost while the process lives.
//
// Writes go through a client-go workqueue keyed by cluster: a change adds
// its cluster after the Coalesce delay (a cluster already waiting keeps its
// earlier time, so a burst is one write), a failed write is retried after a
// per-cluster exponential backoff (and later changes wait for that retry),
// and the queue never hands one cluster to two workers at once, so a
// cluster's writes never race each other. Synchronous flushes (Flush,
// FlushCluster, ForgetNow) go through the same queue, ahead of coalescing
// and backoff, and need Run.
//
// Writes are fenced by a term: the Keeper takes a new term (Store.NextTerm)
// before its first write. When a write conflicts, the Keeper reads the
// store's term: a newer term means a newer leader took over, and this Keeper
// stops writing (ErrFenced) instead of overwriting it; otherwise the record
// was changed by an older writer (or by this one, when a reply was lost),
// and the Keeper merges it (mergeStates) and writes again.
type Keeper struct {
	store Store
	log   logr.Logger
	opts  KeeperOptions
	queue workqueue.TypedRateLimitingInterface[string]

	termMu    sync.Mutex // serializes taking the term
	mu        sync.Mutex
	entries   map[string]*entry
	waiters   map[string][]waiter // synchronous flushes, by cluster
	failing   map[string]bool     // queue keys whose last write failed
	stopped   bool                // Run ended: no more writes
	term      uint64
	fenced    error
	preloaded bool
	stats     Stats
}

// termKey is the queue key of taking the writer term (no cluster is named
// "").
const termKey = ""

// errStopped answers flushes after Run ended.
var errStopped = errors.New("store: the keeper has stopped")

// entry is the Keeper's view of one cluster.
type entry struct {
	mem   ClusterState      // what components see
	objs  map[string]object // its records as of the last read or write (when known)
	parts int               // ledger parts of the last layout written
	// ledger counts changes of mem.Deletes; laidOut is the last layout
	// and laidOutAt the count it was made at, so that a snapshot checkpoint
	// does not encode a long ledger again, and a change only its parts.
	ledger, laidOutAt uint64
	laidOut           *ledgerLayout
	known             bool // objs reflect the store (read or written here)
	dirty             bool
	dirtyAt           time.Time
	seq               uint64 // bumped by every Update
	flushed           uint64 // seq of the last write that succeeded
	gone              bool   // deregistered: delete the record
}

func (e *entry) pending() bool { return e.dirty || e.gone }

// waiter is a synchronous flush waiting for a cluster's state as of seq.
type waiter struct {
	cluster string
	seq     uint64
	done    chan error // buffered: answering never blocks
}

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
	// written; OldestPending how long the oldest has waited.
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
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	backoff := jittered{workqueue.NewTypedItemExponentialFailureRateLimiter[string](o.MinBackoff, o.MaxBackoff)}
	return &Keeper{
		store: s, log: log, opts: o,
		queue:   workqueue.NewTypedRateLimitingQueueWithConfig(backoff, workqueue.TypedRateLimitingQueueConfig[string]{Clock: o.Clock}),
		entries: map[string]*entry{}, waiters: map[string][]waiter{}, failing: map[string]bool{},
		stats: Stats{Backend: s.Backend()},
	}
}

// jittered spreads each retry delay over [d/2, d], so that clusters failing
// together do not retry in lockstep.
type jittered struct {
	workqueue.TypedRateLimiter[string]
}

func (j jittered) When(key string) time.Duration {
	d := j.TypedRateLimiter.When(key)
	return d/2 + rand.N(d/2+1)
}

// Backend names the store's backend.
func (k *Keeper) Backend() string { return k.store.Backend() }

func (k *Keeper) entryLocked(cluster string) *entry {
	e := k.entries[cluster]
	if e == nil {
		e = &entry{}
		k.entries[cluster] = e
	}
	return e
}

// schedule queues a changed cluster for a write after the coalescing
// delay. A cluster whose write failed is already queued for its retry,
// with backoff: the change waits for it. It never takes k.mu.
func (k *Keeper) schedule(cluster string) {
	if k.queue.NumRequeues(cluster) == 0 {
		k.queue.AddAfter(cluster, k.opts.Coalesce)
	}
}

// Load reads a cluster's state from the store into memory (once, when the
// cluster is first seen by this leader; afterwards it returns memory) and
// returns it. A missing record is an empty state. Changes made with Update
// before Load are kept and merged with the record.
func (k *Keeper) Load(ctx context.Context, cluster string) (ClusterState, error) {
	k.mu.Lock()
	if e := k.entries[cluster]; e != nil && (e.known || e.gone) {
		st := clone(e.mem)
		k.mu.Unlock()
		return st, nil
	}
	k.mu.Unlock()
	recs, err := k.list(ctx, cluster)
	if err != nil {
		return ClusterState{}, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.absorbLocked(cluster, recs)
	return clone(k.entries[cluster].mem), nil
}

// Preload reads every record once (one Scan), so that a new leader does not
// read clusters one by one. It returns the number of clusters read.
func (k *Keeper) Preload(ctx context.Context) (int, error) {
	start := k.opts.Clock.Now()
	ctx, cancel := context.WithTimeout(ctx, k.opts.CallTimeout)
	recs, err := k.store.Scan(ctx)
	cancel()
	k.called("scan", "", start, err)
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
		k.absorbLocked(c, rs)
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
// of a cluster not known yet; memory changed before (Update before Load) is
// merged.
func (k *Keeper) absorbLocked(cluster string, recs []Record) {
	e := k.entryLocked(cluster)
	if e.known {
		return
	}
	st := Assemble(cluster, recs)
	switch {
	case e.gone:
		// Deregistered meanwhile: memory stays empty, the records go.
	case e.dirty:
		e.mem = mergeStates(ClusterState{}, st, e.mem)
	default:
		e.mem = clone(st)
	}
	claim := false
	e.objs, e.parts, claim = k.objectsLocked(cluster, recs)
	e.known = true
	e.ledger++
	if claim && !e.gone {
		// Claim the records: write them back with this Keeper's term, so
		// that an older writer still running (a leader resumed after a
		// pause) conflicts on its next write, finds the newer term and is
		// fenced, instead of writing over records this Keeper has only
		// read. A head written before ledger parts existed (deletes in
		// it) is rewritten the same way: its deletes move to parts.
		if !e.dirty {
			e.dirty, e.dirtyAt = true, k.opts.Clock.Now()
		}
		e.seq++
		k.schedule(cluster)
	}
}

// objectsLocked indexes a cluster's records by name. claim says whether
// one needs writing back: written in another term, in the one-record format
// of earlier versions, or undecodable.
func (k *Keeper) objectsLocked(cluster string, recs []Record) (objs map[string]object, parts int, claim bool) {
	objs = map[string]object{}
	for _, r := range recs {
		if r.Name != cluster {
			parts++
		}
		if r.Err != nil {
			k.log.Error(r.Err, "saved state cannot be decoded; it will be replaced", "cluster", cluster, "record", r.Name)
			objs[r.Name] = object{version: r.Version}
			claim = true
			continue
		}
		o, _, err := summed(r.State)
		if err != nil {
			o = object{}
		}
		o.st, o.version = r.State, r.Version
		objs[r.Name] = o
		if k.term == 0 || r.State.Term != k.term || (r.Name == cluster && len(r.State.Deletes) > 0) {
			claim = true
		}
	}
	return objs, parts, claim
}

// CheckWriter confirms, with one read of the store's term, that this Keeper
// is still the writer: its term is taken and no newer one was handed out.
// Destructive calls (deleting a member pod) check it first, so that a
// deposed leader resumed after a pause cannot act on its stale caches.
func (k *Keeper) CheckWriter(ctx context.Context) error {
	if err := k.ensureTerm(ctx); err != nil {
		return err
	}
	return k.checkTerm(ctx)
}

// checkTerm reads the store's term: a newer one than this Keeper's fences
// it for good.
func (k *Keeper) checkTerm(ctx context.Context) error {
	start := k.opts.Clock.Now()
	cctx, cancel := context.WithTimeout(ctx, k.opts.CallTimeout)
	cur, err := k.store.Term(cctx)
	cancel()
	k.called("term", "", start, err)
	if err != nil {
		return fmt.Errorf("reading the writer term: %w", err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if cur > k.term && k.fenced == nil {
		k.fenced = fmt.Errorf("%w (store term %d, ours %d)", ErrFenced, cur, k.term)
		k.log.Error(k.fenced, "another leafsync process took over the state store; this one stops writing")
	}
	return k.fenced
}

// Known reports whether a cluster's record has been read (or written) by
// this Keeper.
func (k *Keeper) Known(cluster string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	e := k.entries[cluster]
	return e != nil && e.known
}

// State returns a copy of a cluster's state in memory.
func (k *Keeper) State(cluster string) ClusterState {
	k.mu.Lock()
	defer k.mu.Unlock()
	if e := k.entries[cluster]; e != nil {
		return clone(e.mem)
	}
	return ClusterState{}
}

// Update changes a cluster's state in memory and schedules a write. fn must
// not call the Keeper.
func (k *Keeper) Update(cluster string, fn func(*ClusterState)) {
	k.mu.Lock()
	e := k.entryLocked(cluster)
	st := clone(e.mem)
	fn(&st)
	if !sameDeletes(e.mem.Deletes, st.Deletes) {
		e.ledger++
	}
	e.mem = st
	e.gone = false
	if !e.dirty {
		e.dirty, e.dirtyAt = true, k.opts.Clock.Now()
	}
	e.seq++
	fenced := k.fenced != nil
	k.mu.Unlock()
	if !fenced {
		k.schedule(cluster)
	}
}

// Forget drops a deregistered cluster and deletes its record in the
// background.
func (k *Keeper) Forget(cluster string) {
	k.mu.Lock()
	e := k.entryLocked(cluster)
	e.mem, e.dirty, e.gone = ClusterState{}, false, true
	e.seq++
	k.mu.Unlock()
	k.schedule(cluster)
}

// ForgetNow is Forget, then deletes the record at once; an error means the
// record is still there (the background retries go on).
func (k *Keeper) ForgetNow(ctx context.Context, cluster string) error {
	k.Forget(cluster)
	return k.FlushCluster(ctx, cluster)
}

// FlushCluster writes one cluster's latest state now and returns nil once
// it is in the store (nil at once if nothing is pending), e.g. before an
// action that must not happen unless a pending delete is durable.
func (k *Keeper) FlushCluster(ctx context.Context, cluster string) error {
	return k.flush(ctx, []string{cluster})
}

// Flush writes every changed cluster now.
func (k *Keeper) Flush(ctx context.Context) error {
	k.mu.Lock()
	var work []string
	for c, e := range k.entries {
		if e.pending() {
			work = append(work, c)
		}
	}
	k.mu.Unlock()
	sort.Strings(work)
	return k.flush(ctx, work)
}

// flush has the workers write clusters now, ahead of coalescing and
// backoff, and waits until each one's state as of the call is in the store
// or its write failed.
func (k *Keeper) flush(ctx context.Context, clusters []string) error {
	k.mu.Lock()
	switch {
	case k.fenced != nil:
		k.mu.Unlock()
		return k.fenced
	case k.stopped:
		k.mu.Unlock()
		return errStopped
	}
	var ws []waiter
	for _, c := range clusters {
		if e := k.entries[c]; e != nil && e.pending() {
			w := waiter{cluster: c, seq: e.seq, done: make(chan error, 1)}
			k.waiters[c] = append(k.waiters[c], w)
			ws = append(ws, w)
		}
	}
	k.mu.Unlock()
	var errs []error
	for _, w := range ws {
		k.queue.Add(w.cluster)
	}
	for _, w := range ws {
		select {
		case err := <-w.done:
			if err != nil {
				errs = append(errs, err)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for _, err := range errs {
		if errors.Is(err, ErrFenced) {
			return err
		}
	}
	if len(errs) > 3 {
		return fmt.Errorf("%w (and %d more clusters)", errors.Join(errs[:3]...), len(errs)-3)
	}
	return errors.Join(errs...)
}

// Written reports whether a cluster has no change waiting to be written.
func (k *Keeper) Written(cluster string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	e := k.entries[cluster]
	return e == nil || !e.pending()
}

// Pending is the number of clusters whose latest state is not yet written.
func (k *Keeper) Pending() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n, _ := k.pendingLocked()
	return n
}

func (k *Keeper) pendingLocked() (int, time.Time) {
	n := 0
	var oldest time.Time
	for _, e := range k.entries {
		if e.pending() {
			n++
			if e.dirty && (oldest.IsZero() || e.dirtyAt.Before(oldest)) {
				oldest = e.dirtyAt
			}
		}
	}
	return n, oldest
}

// Err is the last write error, nil once every failing write succeeded
// again.
func (k *Keeper) Err() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.fenced != nil {
		return k.fenced
	}
	if k.stats.LastError != "" {
		return errors.New(k.stats.LastError)
	}
	return nil
}

// Stats returns the Keeper's figures.
func (k *Keeper) Stats() Stats {
	k.mu.Lock()
	defer k.mu.Unlock()
	s := k.stats
	s.Term, s.Fenced = k.term, k.fenced != nil
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
// last attempt to flush. It takes the writer term at once, so that an
// older leader still running is fenced as early as possible.
func (k *Keeper) Run(ctx context.Context) {
	k.queue.Add(termKey)
	var wg sync.WaitGroup
	for range k.opts.Parallel {
		wg.Go(func() {
			for k.processNext(ctx) {
			}
		})
	}
	<-ctx.Done()
	k.queue.ShutDown()
	wg.Wait()
	k.finalFlush()
}

// processNext writes the next cluster the queue hands out; false once the
// queue is shut down.
func (k *Keeper) processNext(ctx context.Context) bool {
	key, shutdown := k.queue.Get()
	if shutdown {
		return false
	}
	defer k.queue.Done(key)
	if ctx.Err() != nil {
		return true // stopping: the final flush writes it
	}
	var err error
	if key == termKey {
		err = k.ensureTerm(ctx)
		k.record(key, err)
	} else {
		err = k.write(ctx, key)
	}
	switch {
	case err == nil, errors.Is(err, ErrFenced):
		k.queue.Forget(key)
	case ctx.Err() == nil:
		k.queue.AddRateLimited(key)
		k.log.Error(err, "writing leafsync state; keeping it in memory and retrying", "cluster", key, "retries", k.queue.NumRequeues(key), "pending", k.Pending())
	}
	return true
}

// write writes one cluster, records the outcome and answers the flushes
// waiting for it. Only a worker, or the final flush once the workers are
// done, calls it: one cluster is never written twice at once.
func (k *Keeper) write(ctx context.Context, cluster string) error {
	err := k.ensureTerm(ctx)
	if err == nil {
		if err = k.flushOne(ctx, cluster); err != nil {
			err = fmt.Errorf("cluster %s: %w", cluster, err)
		}
	}
	k.record(cluster, err)
	k.mu.Lock()
	defer k.mu.Unlock()
	e := k.entries[cluster]
	var left []waiter
	for _, w := range k.waiters[cluster] {
		switch {
		case err != nil:
			w.done <- err
		case e == nil || !e.pending() || e.flushed >= w.seq:
			w.done <- nil
		default: // changed again since the state written: a later turn answers
			left = append(left, w)
		}
	}
	if len(left) > 0 {
		k.waiters[cluster] = left
	} else {
		delete(k.waiters, cluster)
	}
	return err
}

// record keeps the health figures: failing since the first failure, healthy
// again once every key that failed has succeeded.
func (k *Keeper) record(key string, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	switch {
	case errors.Is(err, ErrFenced):
	case err != nil:
		if k.stats.FailingSince.IsZero() {
			k.stats.FailingSince = k.opts.Clock.Now()
		}
		k.stats.LastError = err.Error()
		k.failing[key] = true
	default:
		delete(k.failing, key)
		if len(k.failing) == 0 {
			k.stats.FailingSince, k.stats.LastError = time.Time{}, ""
		}
	}
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
	fenced := k.fenced != nil
	k.mu.Unlock()
	if !fenced {
		workqueue.ParallelizeUntil(ctx, k.opts.Parallel, len(work), func(i int) {
			if err := k.write(ctx, work[i]); err != nil {
				k.log.Error(err, "last write of leafsync state before stopping failed")
			}
		})
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stopped = true
	for c, ws := range k.waiters {
		for _, w := range ws {
			w.done <- errStopped
		}
		delete(k.waiters, c)
	}
}

// ensureTerm takes the writer term if not taken yet (once: a second term
// taken by this same Keeper would fence it).
func (k *Keeper) ensureTerm(ctx context.Context) error {
	k.termMu.Lock()
	defer k.termMu.Unlock()
	k.mu.Lock()
	term, fenced := k.term, k.fenced
	k.mu.Unlock()
	if fenced != nil {
		return fenced
	}
	if term != 0 {
		return nil
	}
	start := k.opts.Clock.Now()
	cctx, cancel := context.WithTimeout(ctx, k.opts.CallTimeout)
	t, err := k.store.NextTerm(cctx)
	cancel()
	k.called("term", "", start, err)
	if err != nil {
		return fmt.Errorf("taking a writer term: %w", err)
	}
	k.mu.Lock()
	if k.term == 0 {
		k.term = t
		k.log.Info("took the state store's writer term", "term", t, "backend", k.store.Backend())
	}
	k.mu.Unlock()
	return nil
}

// flushOne writes (or deletes) one cluster's records: the head with the
// hysteresis snapshot, and the ledger parts its deletes need (layout). Only
// records that changed are written. Writes that drop a delete from a record
// wait until every other write succeeded, so a delete moving between
// records (or out of a head of the one-record format) is never missing from
// the store; a failing ledger write never holds back the head.
func (k *Keeper) flushOne(ctx context.Context, cluster string) error {
	for attempt := 0; ; attempt++ {
		k.mu.Lock()
		if k.fenced != nil {
			k.mu.Unlock()
			return k.fenced
		}
		e := k.entries[cluster]
		if e == nil || !e.pending() {
			k.mu.Unlock()
			return nil
		}
		if !e.known {
			k.mu.Unlock()
			if err := k.resolve(ctx, cluster, false); err != nil {
				return err
			}
			continue
		}
		gone, seq, prev := e.gone, e.seq, e.parts
		st := clone(e.mem)
		st.Term, st.Writer = k.term, k.opts.Writer
		ledger, last, unchanged := e.ledger, e.laidOut, e.laidOutAt == e.ledger
		have := make(map[string]object, len(e.objs))
		for name, o := range e.objs {
			have[name] = o
		}
		k.mu.Unlock()

		want, parts := map[string]object{}, 0
		if !gone {
			var err error
			if want, parts, err = layout(cluster, st, prev, last, unchanged); err != nil {
				return err
			}
			k.mu.Lock()
			e.laidOut, e.laidOutAt = &ledgerLayout{objs: want, parts: parts, term: st.Term}, ledger
			k.mu.Unlock()
		}
		conflict, err := k.writeObjects(ctx, cluster, e, want, have)
		switch {
		case err != nil:
			return err
		case !conflict:
			k.mu.Lock()
			e.flushed, e.parts = seq, parts
			if e.seq == seq {
				e.dirty = false
				if gone {
					delete(k.entries, cluster)
				}
			}
			k.mu.Unlock()
			return nil
		case attempt >= 3:
			return fmt.Errorf("%w (still conflicting after %d merges)", ErrConflict, attempt)
		}
		if err := k.resolve(ctx, cluster, true); err != nil {
			return err
		}
	}
}

// change is one record write: want nil deletes the record.
type change struct {
	name string
	want *object
	have object
	lose bool
}

// writeObjects writes the records that differ between want and have:
// first those that drop no delete (the head first), then, if all of them
// succeeded, those that do (deletions last). It stops at a conflict
// (conflict true: the caller merges and tries again).
func (k *Keeper) writeObjects(ctx context.Context, cluster string, e *entry, want, have map[string]object) (conflict bool, err error) {
	var changes []change
	for name, w := range want {
		h := have[name]
		if h.version != "" && h.sum == w.sum {
			continue
		}
		changes = append(changes, change{name: name, want: &w, have: h, lose: loses(h, &w)})
	}
	for name, h := range have {
		if _, ok := want[name]; !ok && h.version != "" {
			changes = append(changes, change{name: name, have: h, lose: true})
		}
	}
	sort.Slice(changes, func(i, j int) bool {
		a, b := changes[i], changes[j]
		if a.lose != b.lose {
			return !a.lose
		}
		if (a.want == nil) != (b.want == nil) {
			return a.want != nil
		}
		return partIndex(a.name, cluster) < partIndex(b.name, cluster) // head first
	})
	var errs []error
	for _, c := range changes {
		if c.lose && len(errs) > 0 {
			break
		}
		var (
			nv  Version
			err error
		)
		if c.want == nil {
			err = k.del(ctx, c.name, c.have.version)
		} else {
			nv, err = k.put(ctx, c.name, c.want.st, c.have.version)
		}
		switch {
		case errors.Is(err, ErrConflict):
			return true, nil
		case err != nil:
			errs = append(errs, fmt.Errorf("record %s: %w", c.name, err))
			continue
		}
		k.mu.Lock()
		if c.want == nil {
			delete(e.objs, c.name)
		} else {
			o := *c.want
			o.version = nv
			e.objs[c.name] = o
		}
		k.mu.Unlock()
	}
	return false, errors.Join(errs...)
}

// resolve reads a cluster's records and merges them into memory: after a
// conflicting write (conflict: fenced if a newer term exists, otherwise the
// records were changed by an older writer), or before the first write of a
// cluster never read.
func (k *Keeper) resolve(ctx context.Context, cluster string, conflict bool) error {
	if conflict {
		if err := k.checkTerm(ctx); err != nil {
			return err
		}
	}
	recs, err := k.list(ctx, cluster)
	if err != nil {
		return err
	}
	if !conflict && newerTerm(recs, k.Stats().Term) {
		// Written by a newer leader: checkTerm fences this Keeper.
		if err := k.checkTerm(ctx); err != nil {
			return err
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	e := k.entryLocked(cluster)
	if e.known && len(recs) == 0 {
		// Every record is gone (deleted by hand: no writer of an older
		// term deletes records it did not forget). Merging with nothing
		// would drop every delete this Keeper knew; memory is the record
		// now, and is written afresh.
		e.objs = map[string]object{}
		k.stats.Conflicts++
		k.log.Info("state record was deleted outside leafsync; rebuilding it from memory", "cluster", cluster, "deletes", len(e.mem.Deletes))
		return nil
	}
	theirs := Assemble(cluster, recs)
	base := ClusterState{}
	if e.known {
		base = assembleObjects(cluster, e.objs)
	}
	if !e.gone {
		e.mem = mergeStates(base, theirs, e.mem)
		e.ledger++
	}
	e.objs, _, _ = k.objectsLocked(cluster, recs)
	e.known = true
	if conflict {
		k.stats.Conflicts++
		k.log.Info("state record changed by an older writer; merged it and writing again",
			"cluster", cluster, "recordTerm", theirs.Term, "recordWriter", theirs.Writer, "term", k.term)
	}
	return nil
}

// sameDeletes reports whether two ledgers are the same, in the same order.
func sameDeletes(a, b []deletes.PendingDelete) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Kind != y.Kind || x.Namespace != y.Namespace || x.Name != y.Name || x.HostUID != y.HostUID ||
			x.Cause != y.Cause || x.Owner != y.Owner || !x.Since.Equal(y.Since) ||
			!x.HostDeletedAt.Equal(y.HostDeletedAt) || x.Replacement != y.Replacement ||
			(x.GracePeriodSeconds == nil) != (y.GracePeriodSeconds == nil) ||
			(x.GracePeriodSeconds != nil && *x.GracePeriodSeconds != *y.GracePeriodSeconds) {
			return false
		}
	}
	return true
}

func newerTerm(recs []Record, term uint64) bool {
	for _, r := range recs {
		if r.State.Term > term {
			return true
		}
	}
	return false
}

// assembleObjects is Assemble over the Keeper's index of records.
func assembleObjects(cluster string, objs map[string]object) ClusterState {
	recs := make([]Record, 0, len(objs))
	for name, o := range objs {
		recs = append(recs, Record{Name: name, Cluster: cluster, State: o.st, Version: o.version})
	}
	return Assemble(cluster, recs)
}

func (k *Keeper) list(ctx context.Context, cluster string) ([]Record, error) {
	start := k.opts.Clock.Now()
	cctx, cancel := context.WithTimeout(ctx, k.opts.CallTimeout)
	recs, err := k.store.List(cctx, cluster)
	cancel()
	k.called("get", cluster, start, err)
	return recs, err
}

func (k *Keeper) put(ctx context.Context, name string, st ClusterState, v Version) (Version, error) {
	start := k.opts.Clock.Now()
	cctx, cancel := context.WithTimeout(ctx, k.opts.CallTimeout)
	nv, err := k.store.Put(cctx, name, st, v)
	cancel()
	k.called("put", ClusterOf(name), start, err)
	return nv, err
}

func (k *Keeper) del(ctx context.Context, name string, v Version) error {
	start := k.opts.Clock.Now()
	cctx, cancel := context.WithTimeout(ctx, k.opts.CallTimeout)
	err := k.store.Delete(cctx, name, v)
	cancel()
	k.called("delete", ClusterOf(name), start, err)
	return err
}

func (k *Keeper) called(op, cluster string, start time.Time, err error) {
	d := k.opts.Clock.Since(start)
	k.mu.Lock()
	k.stats.LastCall = d
	switch {
	case err != nil:
		k.stats.Errors++
	case op == "put":
		k.stats.Writes++
	case op == "delete":
		k.stats.Deletes++
	}
	k.mu.Unlock()
	if k.opts.OnCall != nil {
		k.opts.OnCall(CallEvent{Backend: k.store.Backend(), Op: op, Cluster: cluster, Duration: d, Err: err})
	}
}

// mergeStates merges a record changed by an older writer since this Keeper
// last knew it (base) with the store's version (theirs) and memory (mine).
// The hysteresis snapshot is mine: the current leader's engine decides, and
// it was restored from the store before its first probe; theirs is kept only
// if this Keeper has none yet. Pending deletes merge by pod sync's rule
// (deletes.Merge), so an owed delete a dying leader recorded is never lost.
func mergeStates(base, theirs, mine ClusterState) ClusterState {
	out := clone(mine)
	if len(out.Hysteresis) == 0 && len(theirs.Hysteresis) > 0 {
		out.Hysteresis = append([]byte(nil), theirs.Hysteresis...)
	}
	out.Deletes = deletes.Merge(base.Deletes, theirs.Deletes, mine.Deletes)
	return out
}

func clone(st ClusterState) ClusterState {
	out := st
	out.Hysteresis = append([]byte(nil), st.Hysteresis...)
	if len(out.Hysteresis) == 0 {
		out.Hysteresis = nil
	}
	out.Deletes = deletes.Clone(st.Deletes)
	return out
}
