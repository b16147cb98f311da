package engage

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	"k8s.io/client-go/tools/cache"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/syncer/clusters"
	"github.com/leafsync/leafsync/internal/syncer/registration"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// journal records calls and handler (de)registrations in order.
type journal struct {
	mu    sync.Mutex
	lines []string
}

func (j *journal) add(format string, args ...any) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.lines = append(j.lines, fmt.Sprintf(format, args...))
}

func (j *journal) get() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.lines)
}

// filter keeps the lines that start with prefix.
func (j *journal) filter(prefix string) []string {
	var out []string
	for _, l := range j.get() {
		if len(l) >= len(prefix) && l[:len(prefix)] == prefix {
			out = append(out, l)
		}
	}
	return out
}

type fakeInformer struct {
	name string
	j    *journal
}

type fakeReg struct {
	cache.ResourceEventHandlerRegistration
}

func (f *fakeInformer) AddEventHandler(cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	f.j.add("add %s", f.name)
	return fakeReg{}, nil
}

func (f *fakeInformer) RemoveEventHandler(cache.ResourceEventHandlerRegistration) error {
	f.j.add("remove %s", f.name)
	return nil
}

// engager journals its calls; the informer of generation g is informers[g].
// Engage of a cluster in block waits until block is closed.
type engager struct {
	j         *journal
	informers map[int]*fakeInformer
	block     map[string]chan struct{}
}

func newEngager() *engager {
	j := &journal{}
	return &engager{j: j, informers: map[int]*fakeInformer{
		1: {name: "inf1", j: j},
		2: {name: "inf2", j: j},
	}}
}

func (e *engager) Engage(_ context.Context, m clusters.Member) []Handler {
	if ch := e.block[m.Cluster()]; ch != nil {
		<-ch
	}
	e.j.add("%s engage %d", m.Cluster(), m.Generation)
	return []Handler{{Informer: e.informers[m.Generation], Handler: cache.ResourceEventHandlerFuncs{}}}
}

func (e *engager) Decided(m clusters.Member) {
	e.j.add("%s state %s", m.Cluster(), m.Readiness.Status.State)
}

func (e *engager) Disengage(cluster string) { e.j.add("%s disengage", cluster) }

func member(cluster string, gen int) clusters.Member {
	return clusters.Member{Spec: &registration.Spec{Cluster: cluster}, Generation: gen}
}

func ev(t clusters.EventType, cluster string, gen int) clusters.Event {
	e := clusters.Event{Type: t, Cluster: cluster, Member: member(cluster, gen)}
	if t == clusters.Decided {
		e.Member.Readiness.Status.State = hysteresis.Suspect
	}
	return e
}

// start runs a Runner on events; the returned stop ends it and waits.
func start(t *testing.T, e Engager) (*Runner, chan clusters.Event, func()) {
	t.Helper()
	r := NewRunner(e, logr.Discard())
	events := make(chan clusters.Event)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx, events) }()
	return r, events, func() { cancel(); <-done }
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestOrderPerMemberAndNoBlockingAcrossMembers(t *testing.T) {
	e := newEngager()
	release := make(chan struct{})
	e.block = map[string]chan struct{}{"slow": release}
	_, events, stop := start(t, e)
	defer stop()

	events <- ev(clusters.MemberAdded, "slow", 1)
	events <- ev(clusters.Decided, "slow", 0)
	events <- ev(clusters.MemberReplaced, "slow", 2)
	events <- ev(clusters.MemberAdded, "fast", 1)
	events <- ev(clusters.Decided, "fast", 0)
	// "fast" is served while "slow" is stuck in Engage.
	eventually(t, "fast engaged", func() bool { return len(e.j.filter("fast state")) == 1 })
	if got := e.j.filter("slow"); len(got) != 0 {
		t.Fatalf("slow called before its Engage returned: %v", got)
	}
	close(release)
	events <- ev(clusters.MemberRemoved, "slow", 2)
	want := []string{"slow engage 1", "slow state Suspect", "slow engage 2", "slow disengage"}
	eventually(t, "slow's calls", func() bool { return len(e.j.filter("slow")) == len(want) })
	if got := e.j.filter("slow"); !slices.Equal(got, want) {
		t.Fatalf("slow's calls: got %v, want %v", got, want)
	}
}

func TestSwapMovesHandlersMakeBeforeBreak(t *testing.T) {
	e := newEngager()
	_, events, stop := start(t, e)
	events <- ev(clusters.MemberAdded, "a", 1)
	events <- ev(clusters.MemberUpdated, "a", 1) // same runtime: handlers stay
	events <- ev(clusters.MemberReplaced, "a", 2)
	eventually(t, "swap", func() bool { return len(e.j.filter("remove")) == 1 })
	stop()
	want := []string{
		"a engage 1", "add inf1",
		"a engage 1",
		"a engage 2", "add inf2", "remove inf1",
		"remove inf2", "a disengage", // shutdown
	}
	if got := e.j.get(); !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestDisengageOnRemoveAndOnRequest(t *testing.T) {
	e := newEngager()
	r, events, stop := start(t, e)
	defer stop()
	ctx := context.Background()

	if err := r.Disengage(ctx, "unknown"); err != nil {
		t.Fatal(err)
	}
	events <- ev(clusters.MemberAdded, "a", 1)
	events <- ev(clusters.MemberRemoved, "a", 1)
	eventually(t, "a disengaged", func() bool { return len(e.j.filter("a disengage")) == 1 })
	if got := e.j.filter("remove"); !slices.Equal(got, []string{"remove inf1"}) {
		t.Fatalf("handlers not removed on MemberRemoved: %v", e.j.get())
	}
	events <- ev(clusters.Decided, "a", 0) // not engaged: dropped

	// A deregistration hook's Disengage returns once the work is stopped,
	// after the member's earlier events.
	events <- ev(clusters.MemberAdded, "b", 1)
	eventually(t, "b engaged", func() bool { return len(e.j.filter("b engage")) == 1 })
	if err := r.Disengage(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if got := e.j.filter("b"); !slices.Equal(got, []string{"b engage 1", "b disengage"}) {
		t.Fatalf("b: %v", got)
	}
	if got := e.j.filter("a state"); len(got) != 0 {
		t.Fatalf("Decided reached a disengaged member: %v", got)
	}
	// Registered again: engaged again.
	events <- ev(clusters.MemberAdded, "b", 2)
	eventually(t, "b engaged again", func() bool { return len(e.j.filter("b engage")) == 2 })
}

func TestShutdownDisengagesEveryMember(t *testing.T) {
	e := newEngager()
	r, events, stop := start(t, e)
	events <- ev(clusters.MemberAdded, "a", 1)
	events <- ev(clusters.MemberAdded, "b", 1)
	eventually(t, "engaged", func() bool { return len(e.j.filter("add")) == 2 })
	stop()
	got := e.j.get()
	for _, c := range []string{"a", "b"} {
		if !slices.Contains(got, c+" disengage") {
			t.Fatalf("%s not disengaged at shutdown: %v", c, got)
		}
	}
	if n := len(e.j.filter("remove")); n != 2 {
		t.Fatalf("%d handlers removed at shutdown, want 2: %v", n, got)
	}
	// After shutdown a hook's Disengage has nothing to wait for.
	if err := r.Disengage(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
}
