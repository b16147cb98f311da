package clusters

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/leafsync/leafsync/internal/syncer/registration"
)

// ownership is a fake sharding: the test says which members are assigned
// to this replica and whether a take succeeds.
type ownership struct {
	mu       sync.Mutex
	assigned map[string]bool
	acting   map[string]bool
	warm     map[string]bool
	mayTake  map[string]bool
	takes    map[string]int
	released []string
	waiting  map[string]chan struct{}
}

func newOwnership() *ownership {
	return &ownership{assigned: map[string]bool{}, acting: map[string]bool{}, warm: map[string]bool{}, mayTake: map[string]bool{}, takes: map[string]int{},
		waiting: map[string]chan struct{}{}}
}

func (o *ownership) Changed(c string) <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.waiting[c] == nil {
		o.waiting[c] = make(chan struct{})
	}
	return o.waiting[c]
}

// passOver lets a take of c succeed and wakes those waiting on Changed(c),
// as the sharding does when its informer shows the holder passed c here.
func (o *ownership) passOver(c string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.mayTake[c] = true
	if ch := o.waiting[c]; ch != nil {
		close(ch)
		delete(o.waiting, c)
	}
}

func (o *ownership) Assigned(c string) bool { o.mu.Lock(); defer o.mu.Unlock(); return o.assigned[c] }
func (o *ownership) Acting(c string) bool   { o.mu.Lock(); defer o.mu.Unlock(); return o.acting[c] }
func (o *ownership) KeepWarm(c string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.warm[c] && o.assigned[c]
}

func (o *ownership) Take(_ context.Context, c string) (bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.takes[c]++
	if o.mayTake[c] {
		o.acting[c] = true
	}
	return o.acting[c], nil
}

// TakeBack is Take: the test says whether the writer is a former
// incarnation of this replica (warm) and whether the take succeeds.
func (o *ownership) TakeBack(ctx context.Context, c string) (bool, error) { return o.Take(ctx, c) }

func (o *ownership) Release(_ context.Context, c string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.released = append(o.released, c)
	o.acting[c] = false
	return nil
}

func (o *ownership) set(f func(o *ownership)) { o.mu.Lock(); defer o.mu.Unlock(); f(o) }

func (o *ownership) takesOf(c string) int { o.mu.Lock(); defer o.mu.Unlock(); return o.takes[c] }

// newShardedEnv is newEnv with members sharded by own.
func newShardedEnv(t *testing.T, own Ownership) *env {
	e := newEnv(t)
	o := e.options()
	o.Ownership = own
	ctl, err := New(e.c, o)
	if err != nil {
		t.Fatal(err)
	}
	e.ctl = ctl
	t.Cleanup(ctl.Shutdown)
	return e
}

// connectedShardedMember registers member east, assigned to this replica
// and taken, and counts the cleanup hooks run.
func connectedShardedMember(t *testing.T) (*ownership, *env, *int) {
	own := newOwnership()
	own.set(func(o *ownership) { o.assigned["east"], o.mayTake["east"] = true, true })
	e := newShardedEnv(t, own)
	hooks := new(int)
	e.ctl.Registry().OnDeregister("leaf-node", func(context.Context, Deregistration) error { *hooks++; return nil })
	e.create("east", "east", e.srv.Kubeconfig("token"), nil, time.Minute)
	e.eventually("east", "Connected", func() bool {
		e.clk.Step(takeRetry)
		return e.phase("east") == "Connected/MemberConnected"
	})
	return own, e, hooks
}

// assignedShardedMember registers member east, assigned to this replica
// and not taken yet: its runtime starts and tries to take it.
func assignedShardedMember(t *testing.T) (*ownership, *env) {
	own := newOwnership()
	own.set(func(o *ownership) { o.assigned["east"] = true })
	e := newShardedEnv(t, own)
	e.create("east", "east", e.srv.Kubeconfig("token"), nil, time.Minute)
	e.mustReconcile("east")
	return own, e
}

// untouched fails the test if the Secret carries anything of leafsync's
// or has an Event.
func (e *env) untouched(name string) {
	e.t.Helper()
	s := e.get(name)
	if controllerutil.ContainsFinalizer(s, registration.Finalizer) || s.Annotations[registration.AnnotationStatus] != "" {
		e.t.Errorf("Secret %s written by a replica that does not act on its member: finalizers %v, annotations %v", name, s.Finalizers, s.Annotations)
	}
	e.rec.mu.Lock()
	defer e.rec.mu.Unlock()
	if len(e.rec.events) > 0 {
		e.t.Errorf("Events by a replica that does not act on the member: %v", e.rec.events)
	}
}

// TestShardedMemberOfAnotherReplica: a member neither assigned to this
// replica nor held by it runs nowhere here, and its Secret is not written.
func TestShardedMemberOfAnotherReplica(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	own := newOwnership()
	e := newShardedEnv(t, own)
	e.create("east", "east", e.srv.Kubeconfig("token"), nil, time.Minute)
	e.mustReconcile("east")
	if _, ok := e.ctl.Registry().Member("east"); ok || e.ctl.runtimes.has("east") {
		t.Fatal("a runtime runs for a member of another replica")
	}
	if n := own.takesOf("east"); n != 0 {
		t.Errorf("%d takes of a member not assigned here", n)
	}
	e.untouched("east")
	e.ctl.Shutdown()
	e.srv.Close()
}

// TestShardedTakeBeforePublish: an assigned member's runtime connects
// first, and the member is published (leaves and pod sync engage) and its
// Secret written only once the take succeeded.
func TestShardedTakeBeforePublish(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	own, e := assignedShardedMember(t)
	if !e.ctl.runtimes.has("east") {
		t.Fatal("no runtime for an assigned member")
	}
	// The take is tried, and refused (the writer is another replica).
	deadline := time.Now().Add(10 * time.Second)
	for own.takesOf("east") < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the runtime never tried to take its member")
		}
		time.Sleep(10 * time.Millisecond)
		e.tick()
		e.clk.Step(takeRetry)
	}
	e.mustReconcile("east")
	if _, ok := e.ctl.Registry().Member("east"); ok {
		t.Fatal("member published before this replica took it")
	}
	e.untouched("east")

	own.set(func(o *ownership) { o.mayTake["east"] = true })
	e.eventually("east", "the member taken and published", func() bool {
		e.clk.Step(takeRetry)
		_, ok := e.ctl.Registry().Member("east")
		return ok
	})
	e.eventually("east", "Connected", func() bool { return e.phase("east") == "Connected/MemberConnected" })
	if !controllerutil.ContainsFinalizer(e.get("east"), registration.Finalizer) {
		t.Error("no finalizer once the member is this replica's")
	}
	e.ctl.Shutdown()
	e.srv.Close()
}

// TestShardedTakeFollowsThePassOver: a member whose holder was asked for
// it is taken and published as soon as the sharding says the holder passed
// it over (Changed), not at the next timed try: no clock moves here.
func TestShardedTakeFollowsThePassOver(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	own, e := assignedShardedMember(t)
	// The first try asks the holder, which has not passed the member yet.
	for deadline := time.Now().Add(10 * time.Second); own.takesOf("east") < 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the runtime never tried to take its member")
		}
	}
	own.passOver("east")
	published := func() bool { _, ok := e.ctl.Registry().Member("east"); return ok }
	for deadline := time.Now().Add(10 * time.Second); !published(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the member was not taken on the pass-over (%d tries): it waits for the next timed try", own.takesOf("east"))
		}
	}
	if n := own.takesOf("east"); n != 2 {
		t.Errorf("%d tries to take the member, want 2: the request and the take after the pass-over", n)
	}
	e.ctl.Shutdown()
	e.srv.Close()
}

// TestShardedHandOverStopsWithoutCleanup: when another replica becomes
// the member's writer, this one stops the member's runtime, runs no
// cleanup hook, and leaves the Secret (finalizer included) to the writer.
func TestShardedHandOverStopsWithoutCleanup(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	own, e, hooks := connectedShardedMember(t)
	sub := e.ctl.Registry().Subscribe()
	defer sub.Close()

	// Rebalanced: another replica took the member.
	own.set(func(o *ownership) { o.assigned["east"], o.acting["east"], o.mayTake["east"] = false, false, false })
	e.mustReconcile("east")
	if _, ok := e.ctl.Registry().Member("east"); ok || e.ctl.runtimes.has("east") {
		t.Fatal("the member still runs here after another replica took it")
	}
	if *hooks != 0 {
		t.Errorf("%d cleanup hooks ran on a hand-over: the leaf and its pods are the new writer's", *hooks)
	}
	s := e.get("east")
	if !controllerutil.ContainsFinalizer(s, registration.Finalizer) {
		t.Error("the finalizer was removed on a hand-over")
	}
	removed := false
	for !removed {
		select {
		case ev := <-sub.Events():
			removed = ev.Type == MemberRemoved && ev.Cluster == "east"
		case <-time.After(10 * time.Second):
			t.Fatal("no MemberRemoved: leaves and pod sync keep acting on the member")
		}
	}
	e.ctl.Shutdown()
	e.srv.Close()
}

// TestShardedDeregistrationTakesTheMember: a deleted Secret whose member's
// writer is gone is cleaned up by the replica it is assigned to, after a
// take; the member's Lease is released.
func TestShardedDeregistrationTakesTheMember(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	own, e, hooks := connectedShardedMember(t)
	// The writer lost its shard Lease; the Secret is deleted meanwhile.
	own.set(func(o *ownership) { o.acting["east"], o.mayTake["east"] = false, false })
	if err := e.c.Delete(e.ctx, e.get("east")); err != nil {
		t.Fatal(err)
	}
	if res, err := e.reconcile("east"); err != nil || res.RequeueAfter <= 0 || *hooks != 0 || e.get("east") == nil {
		t.Fatalf("deregistered without being the writer: %+v, %v, %d hooks", res, err, *hooks)
	}
	own.set(func(o *ownership) { o.mayTake["east"] = true })
	e.mustReconcile("east")
	if *hooks != 1 || e.get("east") != nil {
		t.Fatalf("after the take: %d hooks, Secret %v", *hooks, e.get("east"))
	}
	if len(own.released) != 1 || own.released[0] != "east" {
		t.Errorf("released = %v, want the member's Lease released", own.released)
	}
	e.ctl.Shutdown()
	e.srv.Close()
}

// TestShardedControllerRunsOnEveryReplica: sharded, the Secret controller
// does not wait for leadership (controller-runtime's default), so every
// replica reconciles its members' Secrets even if a manager elects.
func TestShardedControllerRunsOnEveryReplica(t *testing.T) {
	e := newShardedEnv(t, newOwnership())
	if o := e.ctl.controllerOptions(); o.NeedLeaderElection == nil || *o.NeedLeaderElection || e.ctl.NeedLeaderElection() {
		t.Fatalf("sharded: the Secret controller waits for leadership (%v)", o.NeedLeaderElection)
	}
	e.srv.Close()
	unsharded := newEnv(t)
	if o := unsharded.ctl.controllerOptions(); o.NeedLeaderElection == nil || !*o.NeedLeaderElection || o.MaxConcurrentReconciles != 1 {
		t.Fatalf("unsharded: the Secret controller must run on the leader only, with one worker: %+v", o)
	}
	unsharded.srv.Close()
}

// removedEvents counts the MemberRemoved events of c queued on sub so far.
func removedEvents(sub *Subscription, c string) int {
	n := 0
	for {
		select {
		case ev := <-sub.Events():
			if ev.Type == MemberRemoved && ev.Cluster == c {
				n++
			}
		case <-time.After(100 * time.Millisecond):
			return n
		}
	}
}

// TestShardedLapseKeepsTheMemberWarm: this replica's shard Lease lapses
// while nobody else takes its member (the member's writer is a former
// incarnation of this replica): the member stays published with the same
// runtime, writing nothing, and is taken back as soon as the Lease is held
// again; no new runtime, no MemberRemoved, no cleanup.
func TestShardedLapseKeepsTheMemberWarm(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	own, e, hooks := connectedShardedMember(t)
	before, _ := e.ctl.Registry().Member("east")
	sub := e.ctl.Registry().Subscribe()
	defer sub.Close()

	// The shard Lease lapsed: not acting, the writer a former incarnation.
	own.set(func(o *ownership) { o.acting["east"], o.mayTake["east"], o.warm["east"] = false, false, true })
	e.mustReconcile("east")
	m, ok := e.ctl.Registry().Member("east")
	if !ok || m.Runtime != before.Runtime {
		t.Fatalf("the member's runtime was stopped (published %v) while only this replica's shard Lease lapsed", ok)
	}
	if n := removedEvents(sub, "east"); n != 0 {
		t.Fatalf("%d MemberRemoved while the member was kept warm", n)
	}

	// Held again: the member is taken back from the former incarnation.
	takes := own.takesOf("east")
	own.passOver("east")
	e.eventually("east", "the member taken back", func() bool { return own.Acting("east") })
	if own.takesOf("east") <= takes {
		t.Error("acting again without a take")
	}
	m, ok = e.ctl.Registry().Member("east")
	if !ok || m.Runtime != before.Runtime {
		t.Fatalf("after the take back: published %v, same runtime %v", ok, ok && m.Runtime == before.Runtime)
	}
	if n := removedEvents(sub, "east"); n != 0 || *hooks != 0 {
		t.Errorf("after the take back: %d MemberRemoved, %d cleanup hooks", n, *hooks)
	}
	e.eventually("east", "Connected", func() bool { return e.phase("east") == "Connected/MemberConnected" })
	e.ctl.Shutdown()
	e.srv.Close()
}

// TestShardedLapseTakenBackOnChange: the take back of a member kept warm
// starts when the sharding says the member's view changed (OnChange, which
// is EnqueueClusters), not when its Secret comes up in the registration
// queue (one worker: after a lapse at 600 registrations the last take
// backs waited 60-85s behind other reconciles, past their leaf Leases).
// The queue does not run in these tests: only OnChange can take it back.
func TestShardedLapseTakenBackOnChange(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for _, changed := range [][]string{{"east"}, nil} {
		own, e, hooks := connectedShardedMember(t)
		before, _ := e.ctl.Registry().Member("east")
		own.set(func(o *ownership) { o.acting["east"], o.mayTake["east"], o.warm["east"] = false, false, true })
		takes := own.takesOf("east")
		e.ctl.EnqueueClusters(changed)
		own.passOver("east")
		deadline := time.Now().Add(10 * time.Second)
		for !own.Acting("east") && time.Now().Before(deadline) {
			e.clk.Step(takeRetry)
			time.Sleep(10 * time.Millisecond)
		}
		if !own.Acting("east") || own.takesOf("east") <= takes {
			t.Errorf("OnChange(%v): not taken back without a reconcile of its Secret (acting %v, takes %d -> %d)", changed, own.Acting("east"), takes, own.takesOf("east"))
		}
		if m, ok := e.ctl.Registry().Member("east"); !ok || m.Runtime != before.Runtime || *hooks != 0 {
			t.Errorf("OnChange(%v): published %v, same runtime %v, %d cleanup hooks", changed, ok, ok && m.Runtime == before.Runtime, *hooks)
		}
		e.ctl.Shutdown()
		e.srv.Close()
	}
}

// TestShardedMemberTakenDuringALapseIsHandedOver: the shard Lease lapsed
// and another replica's incarnation took the member meanwhile: its runtime
// stops as on any hand-over (a new one starts to take it back, as it is
// still assigned here).
func TestShardedMemberTakenDuringALapseIsHandedOver(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	own, e, hooks := connectedShardedMember(t)
	before, _ := e.ctl.Registry().Member("east")
	own.set(func(o *ownership) { o.acting["east"], o.mayTake["east"], o.warm["east"] = false, false, false })
	e.mustReconcile("east")
	if _, ok := e.ctl.Registry().Member("east"); ok {
		t.Fatal("the member is still published after another replica took it")
	}
	own.set(func(o *ownership) { o.mayTake["east"] = true })
	e.eventually("east", "taken again", func() bool {
		e.clk.Step(takeRetry)
		_, ok := e.ctl.Registry().Member("east")
		return ok
	})
	if m, _ := e.ctl.Registry().Member("east"); m.Runtime == before.Runtime || *hooks != 0 {
		t.Errorf("taken again with the same runtime %v, %d cleanup hooks", m.Runtime == before.Runtime, *hooks)
	}
	e.ctl.Shutdown()
	e.srv.Close()
}
