package verify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/runner"
	"github.com/leafsync/leafsync/internal/syncer/clusters"
	"github.com/leafsync/leafsync/internal/syncer/engage"
	"github.com/leafsync/leafsync/internal/syncer/member"
	"github.com/leafsync/leafsync/internal/syncer/metrics"
	"github.com/leafsync/leafsync/internal/syncer/registration"
)

// CanaryFunc runs the canary pod in a member (package canary), with the
// registration's annotations (its options): failure is "" when the pod
// passed, else what failed and what to do; an error is no verdict (the
// member could not be asked), not a failure.
type CanaryFunc func(ctx context.Context, member kubernetes.Interface, annotations map[string]string) (failure string, err error)

// Options configure the Controller.
type Options struct {
	Registry *clusters.Registry
	// Secrets reads and annotates the registration Secrets (host).
	Secrets client.Client
	// Recorder puts the result's Events on the registration Secret.
	Recorder events.EventRecorder
	// KubeletAPI: the leaves' kubelet API is served, so its rights are
	// checked too.
	KubeletAPI bool
	// Canary runs the canary check (nil: never). The registration's
	// leafsync.io/verify-canary "false" skips it for one member.
	Canary CanaryFunc
	// Interval re-verifies a verified member this often (0: never).
	Interval time.Duration
	// RetryMin and RetryMax bound the backoff of a member not verified.
	RetryMin, RetryMax time.Duration
	// OnChange hears that a member's taint changed (the leaves rewrite it).
	OnChange func(cluster string)
	Clock    clock.WithTicker
	Logger   logr.Logger
}

// Controller verifies every registered member and keeps its verdict. It is
// a manager.Runnable that needs leader election: it writes the Secrets.
type Controller struct {
	opts   Options
	log    logr.Logger
	runner *runner.Runner[string]
	engage *engage.Runner

	mu      sync.Mutex
	members map[string]*state
}

// state is one member's verification.
type state struct {
	mu          sync.Mutex
	member      clusters.Member
	fingerprint string // of the credentials and identity the verdict holds for
	verdict     Verdict
	// reported is the verdict last written to the Secret and announced.
	reported Verdict
	// engaged: Engage has seen the member since this state was made.
	engaged bool
	// unsyncedSince is when a run first found the member's caches not
	// synced (zero once they are).
	unsyncedSince time.Time
}

// New returns a Controller; Start runs it.
func New(o Options) *Controller {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	c := &Controller{opts: o, log: o.Logger.WithName("verify"), members: map[string]*state{}}
	c.runner = runner.New[string](c, runner.Options[string]{Name: "verify", Workers: 4,
		MinBackoff: o.RetryMin, MaxBackoff: o.RetryMax, Clock: o.Clock, Logger: c.log})
	c.engage = engage.NewRunner(c, c.log)
	return c
}

// NeedLeaderElection: only the leader verifies and writes results;
// sharded, every replica verifies the members it acts on.
func (c *Controller) NeedLeaderElection() bool { return !c.opts.Registry.Sharded() }

// Start follows the registry until ctx ends.
func (c *Controller) Start(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { c.runner.Run(ctx) })
	sub := c.opts.Registry.Subscribe()
	defer sub.Close()
	c.engage.Run(ctx, sub.Events())
	wg.Wait()
	return nil
}

// Unverified is the value of m's leafsync.io/unverified taint ("": none).
// A member not seen before starts from the result recorded on its Secret,
// if it holds for the same credentials and identity, so a restart of
// leafsync does not taint verified leaves.
func (c *Controller) Unverified(m clusters.Member) string {
	st := c.state(m)
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.verdict.Taint()
}

// state returns m's state, created from its Secret's record if new.
func (c *Controller) state(m clusters.Member) *state {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.members[m.Cluster()]; st != nil {
		return st
	}
	st := &state{member: m, verdict: Verdict{Phase: Pending}}
	var s corev1.Secret
	if err := c.opts.Secrets.Get(context.Background(), m.Spec.Secret, &s); err == nil {
		st.fingerprint = fingerprint(m.Spec.ConnectionHash, s.Annotations[registration.AnnotationMemberIdentity])
		if s.Annotations[registration.AnnotationVerified] == "true" && s.Annotations[registration.AnnotationVerifiedFor] == st.fingerprint {
			st.verdict = Verdict{Phase: Verified}
		}
	}
	st.reported = st.verdict
	c.members[m.Cluster()] = st
	return st
}

func (c *Controller) lookup(cluster string) *state {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.members[cluster]
}

// Engage starts verifying the member, and again on every change of its
// registration; a change of credentials or identity taints its leaf first.
func (c *Controller) Engage(_ context.Context, m clusters.Member) []engage.Handler {
	st := c.state(m)
	var s corev1.Secret
	identity := ""
	if err := c.opts.Secrets.Get(context.Background(), m.Spec.Secret, &s); err == nil {
		identity = s.Annotations[registration.AnnotationMemberIdentity]
	}
	st.mu.Lock()
	st.member, st.unsyncedSince = m, time.Time{} // maybe a new runtime
	changed := st.reset(fingerprint(m.Spec.ConnectionHash, identity))
	// A pass recorded before a restart is not checked again at once (no
	// canary pod in every member at every restart); any later change of
	// the registration (its options may change the verdict) is.
	trusted := !st.engaged && st.verdict.Phase == Verified
	st.engaged = true
	st.mu.Unlock()
	if changed {
		c.changed(m.Cluster())
	}
	switch {
	case !trusted:
		c.runner.Add(m.Cluster())
	case c.opts.Interval > 0:
		c.runner.AddAfter(m.Cluster(), c.opts.Interval)
	}
	return nil
}

// Decided follows the member's readiness: verification waits while the
// member is not Ready, and resumes when it is again.
func (c *Controller) Decided(m clusters.Member) {
	st := c.lookup(m.Cluster())
	if st == nil {
		return
	}
	st.mu.Lock()
	st.member = m
	waiting := st.verdict.Phase != Verified
	st.mu.Unlock()
	if waiting && len(m.Readiness.Transitions) > 0 && m.Readiness.Status.State == hysteresis.Ready {
		c.runner.Add(m.Cluster())
	}
}

// Disengage forgets the member (its series go with the leaf's, at
// deregistration: metrics.ForgetCluster).
func (c *Controller) Disengage(cluster string) {
	c.mu.Lock()
	delete(c.members, cluster)
	c.mu.Unlock()
}

// reset starts over from Pending when the credentials or the identity
// changed; st.mu is held. It reports whether the taint changed.
func (st *state) reset(fp string) bool {
	if fp == st.fingerprint {
		return false
	}
	before := st.verdict.Taint()
	st.fingerprint, st.verdict = fp, Verdict{Phase: Pending}
	return st.verdict.Taint() != before
}

func (c *Controller) changed(cluster string) {
	if c.opts.OnChange != nil {
		c.opts.OnChange(cluster)
	}
}

// A run waits for a new member's caches, looking every cacheSyncPoll for
// at most cacheSyncWait, then backs off like a failure.
const (
	cacheSyncPoll = 200 * time.Millisecond
	cacheSyncWait = 10 * time.Second
)

// errNotVerified asks the runner to try again with backoff.
var errNotVerified = errors.New("not verified")

// Reconcile verifies the member once.
func (c *Controller) Reconcile(ctx context.Context, cluster string) (runner.Result, error) {
	st := c.lookup(cluster)
	if st == nil || !c.opts.Registry.Acting(cluster) {
		return runner.Result{}, nil
	}
	st.mu.Lock()
	m := st.member
	st.mu.Unlock()
	if m.Runtime == nil || !m.Readiness.Status.State.LeafReady() {
		return runner.Result{}, nil // Decided kicks it when the member is Ready
	}
	if !m.Runtime.HasSynced() {
		// A new member's caches sync within a second or so: looked at
		// again soon, not after a failure's backoff, for a while; a
		// runtime that does not sync (its member refused) backs off.
		st.mu.Lock()
		if st.unsyncedSince.IsZero() {
			st.unsyncedSince = c.opts.Clock.Now()
		}
		waited := c.opts.Clock.Since(st.unsyncedSince)
		st.mu.Unlock()
		if waited < cacheSyncWait {
			return runner.Result{RequeueAfter: cacheSyncPoll}, nil
		}
		return runner.Result{}, fmt.Errorf("member %s: %w (its caches have not synced for %s)", cluster, errNotVerified, waited.Round(time.Second))
	}
	st.mu.Lock()
	st.unsyncedSince = time.Time{}
	st.mu.Unlock()
	start := c.opts.Clock.Now()
	if id, err := member.Identity(ctx, m.Runtime.Client()); err == nil {
		st.mu.Lock()
		changed := st.reset(fingerprint(m.Spec.ConnectionHash, id))
		st.mu.Unlock()
		if changed {
			c.changed(cluster)
		}
	}
	results := c.run(ctx, m)
	st.mu.Lock()
	prev := st.verdict
	st.verdict = Decide(prev, results)
	now, fp := st.verdict, st.fingerprint
	st.mu.Unlock()
	if now.Taint() != prev.Taint() {
		c.changed(cluster)
	}
	metrics.ObserveVerification(cluster, outcomeLabel(now, results), c.opts.Clock.Since(start), failedChecks(results))
	if now.Phase != Pending {
		metrics.SetVerified(cluster, now.Phase == Verified)
	}
	if err := c.report(ctx, st, m, now, fp); err != nil {
		return runner.Result{}, err
	}
	if now.Phase == Verified && !anyOutcome(results, Inconclusive) {
		return runner.Result{RequeueAfter: c.opts.Interval}, nil
	}
	if ctx.Err() != nil {
		return runner.Result{}, nil
	}
	return runner.Result{}, fmt.Errorf("member %s: %w (%s)", cluster, errNotVerified, describe(now, results))
}

// run runs every check on m.
func (c *Controller) run(ctx context.Context, m clusters.Member) []Result {
	return []Result{
		checkRights(ctx, m.Runtime.Client(), Rights(c.opts.KubeletAPI)),
		checkCapacity(m.Runtime, m.Spec.Annotations),
		c.runCanary(ctx, m),
	}
}

func (c *Controller) runCanary(ctx context.Context, m clusters.Member) Result {
	if c.opts.Canary == nil {
		return Result{Check: CheckCanary, Outcome: Skipped, Message: "the canary is off (verification.canary)"}
	}
	if on, err := strconv.ParseBool(m.Spec.Annotations[registration.AnnotationVerifyCanary]); err == nil && !on {
		return Result{Check: CheckCanary, Outcome: Skipped, Message: registration.AnnotationVerifyCanary + ` is "false"`}
	}
	failure, err := c.opts.Canary(ctx, m.Runtime.Client(), m.Spec.Annotations)
	switch {
	case err != nil:
		return Result{Check: CheckCanary, Outcome: Inconclusive, Message: err.Error()}
	case failure != "":
		return Result{Check: CheckCanary, Outcome: Failed, Message: failure}
	}
	return Result{Check: CheckCanary, Outcome: Passed}
}

// fingerprint identifies the credentials (the registration's connection
// hash) and the member identity a verdict holds for.
func fingerprint(connectionHash, identity string) string {
	sum := sha256.Sum256([]byte(connectionHash + "/" + identity))
	return hex.EncodeToString(sum[:8])
}

func anyOutcome(results []Result, o Outcome) bool {
	for _, r := range results {
		if r.Outcome == o {
			return true
		}
	}
	return false
}

func failedChecks(results []Result) []string {
	var out []string
	for _, r := range results {
		if r.Outcome == Failed {
			out = append(out, string(r.Check))
		}
	}
	return out
}

// outcomeLabel is the result label of leafsync_verifications_total.
func outcomeLabel(v Verdict, results []Result) string {
	switch {
	case anyOutcome(results, Failed):
		return "failed"
	case anyOutcome(results, Inconclusive):
		return "inconclusive"
	}
	return "verified"
}

// describe says why a run did not verify, for the log.
func describe(v Verdict, results []Result) string {
	if s := v.Summary(); s != "" {
		return s
	}
	for _, r := range results {
		if r.Outcome == Inconclusive {
			return fmt.Sprintf("%s could not be checked: %s", r.Check, r.Message)
		}
	}
	return string(v.Phase)
}
