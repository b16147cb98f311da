package clusters

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/syncer/member"
	"github.com/leafsync/leafsync/internal/syncer/member/membertest"
	"github.com/leafsync/leafsync/internal/syncer/registration"
)

const ns = "leafsync-system"

// recorder records Events.
type recorder struct {
	mu     sync.Mutex
	events []string // "Type Reason Secret: note"
}

func (r *recorder) Eventf(regarding, _ runtime.Object, eventtype, reason, action, note string, args ...any) {
	name := ""
	if o, ok := regarding.(client.Object); ok {
		name = o.GetName()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf("%s %s %s: %s", eventtype, reason, name, fmt.Sprintf(note, args...)))
}

func (r *recorder) find(reason, secret string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		f := strings.Fields(e)
		if len(f) >= 3 && f[1] == reason && f[2] == secret+":" {
			return e, true
		}
	}
	return "", false
}

// engine wraps a Fleet and counts Add/Remove, to prove state is kept
// across a reconnect.
type engine struct {
	*hysteresis.Fleet
	mu      sync.Mutex
	removed []string
	obs     map[string]int
}

func (e *engine) Remove(name string) {
	e.mu.Lock()
	e.removed = append(e.removed, name)
	e.mu.Unlock()
	e.Fleet.Remove(name)
}

func (e *engine) Step(name string, o hysteresis.Observation) (hysteresis.Decision, error) {
	e.mu.Lock()
	e.obs[name]++
	e.mu.Unlock()
	return e.Fleet.Step(name, o)
}

func (e *engine) removals() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.removed...)
}

type env struct {
	t   *testing.T
	ctx context.Context
	c   client.Client
	ctl *Controller
	eng *engine
	rec *recorder
	srv *membertest.Server
	// clk drives the probes and status times: a probe interval passes
	// when the test says so (tick, ticks).
	clk *clocktesting.FakeClock
}

// probeInterval of the members in these tests.
const probeInterval = 100 * time.Millisecond

// tick lets one probe interval pass, if a probe (or an identity check)
// waits for it.
func (e *env) tick() {
	if e.clk.HasWaiters() {
		e.clk.Step(probeInterval)
	}
}

// ticks lets n probe intervals pass, each once something waits for it (a
// probe runs between two).
func (e *env) ticks(n int) {
	e.t.Helper()
	for range n {
		deadline := time.Now().Add(10 * time.Second)
		for !e.clk.HasWaiters() {
			if time.Now().After(deadline) {
				e.t.Fatal("no probe waits for the clock")
			}
			time.Sleep(time.Millisecond)
		}
		e.clk.Step(probeInterval)
	}
}

// testHost is the host's identity in these tests.
const testHost = "host-uid"

// newEnv builds the test environment; funcs, if given, intercept the
// host client's calls.
func newEnv(t *testing.T, funcs ...interceptor.Funcs) *env {
	t.Helper()
	fc := hysteresis.DefaultFleetConfig()
	fc.ProbeInterval = hysteresis.D(probeInterval)
	fleet, err := hysteresis.NewFleet(fc)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{
		t:   t,
		ctx: context.Background(),
		c: fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system", UID: testHost}}).WithIndex(&corev1.Pod{}, "spec.nodeName", func(o client.Object) []string {
			return []string{o.(*corev1.Pod).Spec.NodeName}
		}).WithInterceptorFuncs(append(funcs, interceptor.Funcs{})[0]).Build(),
		eng: &engine{Fleet: fleet, obs: map[string]int{}},
		rec: &recorder{},
		srv: membertest.NewServer(t, []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}}, nil),
		clk: clocktesting.NewFakeClock(time.Now()),
	}
	e.ctl, err = New(e.c, e.options())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.ctl.Shutdown)
	return e
}

// options are the controller's options in these tests.
func (e *env) options() Options {
	return Options{
		Namespace:      ns,
		Engine:         e.eng,
		Recorder:       e.rec,
		Logger:         testr.New(e.t),
		StatusInterval: time.Nanosecond,
		Clock:          e.clk,
		Runtime: RuntimeSettings{
			UserAgent:    "leafsync/test",
			ProbeTimeout: time.Second,
			SwapTimeout:  5 * time.Second,
			Breaker:      member.BreakerSettings{ConsecutiveFailures: 100, OpenTimeout: time.Second, HalfOpenRequests: 1},
		},
	}
}

func (e *env) create(name, cluster string, kubeconfig []byte, annotations map[string]string, age time.Duration) {
	e.t.Helper()
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:         ns,
			Name:              name,
			Labels:            map[string]string{registration.LabelCluster: cluster},
			Annotations:       annotations,
			CreationTimestamp: metav1.NewTime(time.Now().Add(-age).Truncate(time.Second)),
		},
		Data: map[string][]byte{registration.KeyKubeconfig: kubeconfig},
	}
	if err := e.c.Create(e.ctx, s); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) get(name string) *corev1.Secret {
	e.t.Helper()
	var s corev1.Secret
	if err := e.c.Get(e.ctx, types.NamespacedName{Namespace: ns, Name: name}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		e.t.Fatal(err)
	}
	return &s
}

func (e *env) update(name string, mutate func(*corev1.Secret)) {
	e.t.Helper()
	s := e.get(name)
	mutate(s)
	if err := e.c.Update(e.ctx, s); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) reconcile(name string) (reconcile.Result, error) {
	// StatusInterval (1ns) has passed since the last status write.
	e.clk.Step(time.Nanosecond)
	return e.ctl.Reconcile(e.ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
}

func (e *env) mustReconcile(name string) {
	e.t.Helper()
	if _, err := e.reconcile(name); err != nil {
		e.t.Fatalf("reconcile %s: %v", name, err)
	}
}

// eventually reconciles name until cond holds (the controller's queue is
// not running in these tests, so status changes need a reconcile).
func (e *env) eventually(name, what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
		e.tick()
		e.mustReconcile(name)
	}
}

func (e *env) phase(name string) string {
	s := e.get(name)
	if s == nil {
		return "<gone>"
	}
	return s.Annotations[registration.AnnotationStatus] + "/" + s.Annotations[registration.AnnotationStatusReason]
}

func execKubeconfig(t *testing.T, server string) []byte {
	cfg := clientcmdapi.NewConfig()
	c := clientcmdapi.NewCluster()
	c.Server = server
	u := clientcmdapi.NewAuthInfo()
	u.Exec = &clientcmdapi.ExecConfig{Command: "/bin/sh", APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
	ctx := clientcmdapi.NewContext()
	ctx.Cluster, ctx.AuthInfo = "m", "u"
	cfg.Clusters["m"], cfg.AuthInfos["u"], cfg.Contexts["m"] = c, u, ctx
	cfg.CurrentContext = "m"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestRegisterConnectDeregister(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	e := newEnv(t)
	sub := e.ctl.Registry().Subscribe()
	defer sub.Close()

	var hookCalls []Deregistration
	failHook := true
	e.ctl.Registry().OnDeregister("leafnode", func(_ context.Context, d Deregistration) error {
		hookCalls = append(hookCalls, d)
		if failHook {
			return errors.New("host API unavailable")
		}
		return nil
	})

	e.create("east", "east", e.srv.Kubeconfig("token"), map[string]string{
		registration.AnnotationLeafName: "edge-east",
		"leafsync.io/not-ready-after":   "2m",
	}, time.Minute)
	e.mustReconcile("east")

	s := e.get("east")
	if !controllerutil.ContainsFinalizer(s, registration.Finalizer) {
		t.Fatal("finalizer not added")
	}
	m, ok := e.ctl.Registry().Member("east")
	if !ok || m.Spec.LeafName != "edge-east" || m.Generation != 1 {
		t.Fatalf("member = %+v, %v", m, ok)
	}
	if cfg, ok := e.eng.Config("east"); !ok || cfg.NotReadyAfter.Duration != 2*time.Minute {
		t.Fatalf("engine config = %+v, %v (override not applied)", cfg, ok)
	}
	if !m.Runtime.WaitForCacheSync(e.ctx) {
		t.Fatal("caches did not sync")
	}
	e.eventually("east", "Connected", func() bool { return e.phase("east") == "Connected/MemberConnected" })
	if ev, ok := e.rec.find(reasonConnected, "east"); !ok || !strings.HasPrefix(ev, "Normal") {
		t.Errorf("no Normal MemberConnected event: %v", e.rec.events)
	}
	st, ok := e.ctl.Registry().Status("east")
	if !ok || st.Phase != phaseConnected || !st.Synced || !st.LastProbe.OK || st.LeafName != "edge-east" {
		t.Errorf("status = %+v", st)
	}
	if hs, ok := e.ctl.Registry().Hysteresis("east"); !ok || hs.State != hysteresis.Ready {
		t.Errorf("hysteresis = %+v, %v", hs, ok)
	}
	if ev := <-sub.Events(); ev.Type != MemberAdded || ev.Cluster != "east" {
		t.Errorf("first event = %+v", ev)
	}

	// Delete: the finalizer holds the Secret until the hooks succeed.
	if err := e.c.Delete(e.ctx, e.get("east")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.reconcile("east"); err == nil {
		t.Fatal("reconcile succeeded although a cleanup hook failed")
	}
	if e.get("east") == nil {
		t.Fatal("Secret gone before cleanup succeeded")
	}
	if _, ok := e.rec.find(reasonCleanupFailed, "east"); !ok {
		t.Errorf("no CleanupFailed event: %v", e.rec.events)
	}
	if _, ok := e.ctl.Registry().Member("east"); ok {
		t.Error("member still registered while deregistering")
	}
	failHook = false
	e.mustReconcile("east")
	if e.get("east") != nil {
		t.Fatal("Secret still there after cleanup")
	}
	if len(hookCalls) != 2 || hookCalls[1].Cluster != "east" || hookCalls[1].LeafName != "edge-east" {
		t.Errorf("hook calls = %+v", hookCalls)
	}
	if _, ok := e.eng.Status("east"); ok {
		t.Error("hysteresis state kept after deregistration")
	}
	if _, ok := e.ctl.Registry().Status("east"); ok {
		t.Error("status kept after deregistration")
	}
	e.mustReconcile("east") // NotFound is fine

	// The subscriber saw the removal (and does not wait for ever if not).
	deadline := time.After(10 * time.Second)
	for removed := false; !removed; {
		select {
		case ev, ok := <-sub.Events():
			if !ok {
				t.Fatal("subscription closed before MemberRemoved")
			}
			removed = ev.Type == MemberRemoved
		case <-deadline:
			t.Fatal("the subscriber never saw MemberRemoved")
		case <-time.After(20 * time.Millisecond):
			e.tick()
		}
	}
	e.ctl.Shutdown()
	for i := 0; i < 200 && e.srv.OpenWatches() != 0; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if n := e.srv.OpenWatches(); n != 0 {
		t.Errorf("%d watches open after deregistration", n)
	}
	sub.Close()
	e.srv.Close()
}

func TestRefusedSecrets(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		name, cluster string
		kubeconfig    []byte
		annotations   map[string]string
		reason        string
	}{
		{"exec", "exec", execKubeconfig(t, e.srv.URL()), nil, registration.ReasonExecAuthRefused},
		{"garbage", "garbage", []byte("{{{"), nil, registration.ReasonInvalidKubeconfig},
		{"bad-name", "Bad_Name", e.srv.Kubeconfig("token"), nil, registration.ReasonInvalidClusterName},
		{"bad-threshold", "bad-threshold", e.srv.Kubeconfig("token"), map[string]string{"leafsync.io/ready-after": "-5s"}, registration.ReasonInvalidAnnotation},
		{"inconsistent", "inconsistent", e.srv.Kubeconfig("token"), map[string]string{"leafsync.io/cordon-after": "10m"}, registration.ReasonInvalidAnnotation},
		{"missing", "missing", nil, nil, registration.ReasonMissingKubeconfig},
	}
	for _, tc := range cases {
		e.create(tc.name, tc.cluster, tc.kubeconfig, tc.annotations, 0)
		e.mustReconcile(tc.name)
		s := e.get(tc.name)
		if got := e.phase(tc.name); got != "Refused/"+tc.reason {
			t.Errorf("%s: status %q, want Refused/%s", tc.name, got, tc.reason)
		}
		if len(s.Annotations[registration.AnnotationStatusMessage]) < 40 {
			t.Errorf("%s: message %q", tc.name, s.Annotations[registration.AnnotationStatusMessage])
		}
		if controllerutil.ContainsFinalizer(s, registration.Finalizer) {
			t.Errorf("%s: refused Secret got a finalizer", tc.name)
		}
		if ev, ok := e.rec.find(tc.reason, tc.name); !ok || !strings.HasPrefix(ev, "Warning") {
			t.Errorf("%s: no Warning %s event", tc.name, tc.reason)
		}
		if _, ok := e.ctl.Registry().Member(tc.cluster); ok {
			t.Errorf("%s: refused Secret registered a member", tc.name)
		}
	}
	// A good Secret next to the bad ones is unaffected.
	e.create("good", "good", e.srv.Kubeconfig("token"), map[string]string{"leafsync.io/typo": "x"}, 0)
	e.mustReconcile("good")
	e.eventually("good", "Connected", func() bool { return e.phase("good") == "Connected/MemberConnected" })
	if _, ok := e.rec.find(reasonUnknownAnnotation, "good"); !ok {
		t.Error("no UnknownAnnotation warning")
	}
	// Events are not repeated when nothing changed.
	n := len(e.rec.events)
	e.mustReconcile("exec")
	e.mustReconcile("good")
	if len(e.rec.events) != n {
		t.Errorf("events repeated: %v", e.rec.events[n:])
	}
	if got := len(e.ctl.Registry().Statuses()); got != len(cases)+1 {
		t.Errorf("%d statuses, want %d", got, len(cases)+1)
	}
}

func TestDuplicateClusterOlderWins(t *testing.T) {
	e := newEnv(t)
	e.create("new", "east", e.srv.Kubeconfig("token"), nil, time.Minute)
	e.create("old", "east", e.srv.Kubeconfig("token"), nil, time.Hour)
	e.mustReconcile("new")
	e.mustReconcile("old")
	if got := e.phase("new"); got != "Duplicate/"+reasonDuplicateCluster {
		t.Errorf("new: %q", got)
	}
	if ev, ok := e.rec.find(reasonDuplicateCluster, "new"); !ok || !strings.Contains(ev, "old") {
		t.Errorf("duplicate event %q does not name the winner", ev)
	}
	if controllerutil.ContainsFinalizer(e.get("new"), registration.Finalizer) {
		t.Error("the losing Secret has a finalizer")
	}
	st, _ := e.ctl.Registry().Status("east")
	if st.Secret.Name != "old" {
		t.Errorf("cluster owned by %s", st.Secret)
	}

	// The winner goes: the other Secret takes over.
	if err := e.c.Delete(e.ctx, e.get("old")); err != nil {
		t.Fatal(err)
	}
	e.mustReconcile("old")
	if e.get("old") != nil {
		t.Fatal("old Secret not deleted")
	}
	e.mustReconcile("new")
	e.eventually("new", "takeover", func() bool { return e.phase("new") == "Connected/MemberConnected" })
	if m, ok := e.ctl.Registry().Member("east"); !ok || m.Spec.Secret.Name != "new" {
		t.Errorf("member = %+v", m)
	}
}

func TestCredentialRotationKeepsHysteresisState(t *testing.T) {
	e := newEnv(t)
	sub := e.ctl.Registry().Subscribe()
	defer sub.Close()
	e.create("east", "east", e.srv.Kubeconfig("token"), nil, 0)
	e.mustReconcile("east")
	e.eventually("east", "Connected", func() bool { return e.phase("east") == "Connected/MemberConnected" })
	first, _ := e.ctl.Registry().Member("east")

	// The member revokes the token: probes fail with 401.
	e.srv.SetToken("rotated")
	e.eventually("east", "Unauthorized", func() bool { return e.phase("east") == "Unauthorized/"+reasonUnauthorized })
	if ev, ok := e.rec.find(reasonUnauthorized, "east"); !ok || !strings.HasPrefix(ev, "Warning") || !strings.Contains(ev, "register --create-service-account") {
		t.Errorf("unauthorized event = %q", ev)
	}
	hs, _ := e.eng.Status("east")
	if hs.State != hysteresis.Ready || hs.Reason != hysteresis.ReasonAuthFailure {
		t.Errorf("auth failures must never make the leaf NotReady: %+v", hs)
	}

	// The Secret gets the new token: a new runtime replaces the old one.
	e.update("east", func(s *corev1.Secret) { s.Data[registration.KeyKubeconfig] = e.srv.Kubeconfig("rotated") })
	e.mustReconcile("east")
	deadline := time.Now().Add(10 * time.Second)
	var replaced Event
	for replaced.Type != MemberReplaced {
		select {
		case replaced = <-sub.Events():
		case <-time.After(20 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("no MemberReplaced event")
			}
			e.tick()
		}
	}
	if replaced.Member.Runtime == first.Runtime || replaced.Member.Generation != 2 || replaced.Previous == nil {
		t.Errorf("replaced = %+v", replaced)
	}
	select {
	case <-first.Runtime.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("old runtime not stopped")
	}
	e.eventually("east", "Connected again", func() bool { return e.phase("east") == "Connected/MemberConnected" })
	if r := e.eng.removals(); len(r) != 0 {
		t.Errorf("hysteresis state removed on reconnect: %v", r)
	}
	hs2, ok := e.eng.Status("east")
	if !ok || hs2.LastObserved.Before(hs.LastObserved) {
		t.Errorf("hysteresis state did not carry over: before %+v after %+v", hs, hs2)
	}

	// An invalid update keeps the working connection.
	e.update("east", func(s *corev1.Secret) { s.Data[registration.KeyKubeconfig] = execKubeconfig(t, e.srv.URL()) })
	e.mustReconcile("east")
	if got := e.phase("east"); got != "Connected/"+registration.ReasonExecAuthRefused {
		t.Errorf("status after invalid update: %q", got)
	}
	if m, ok := e.ctl.Registry().Member("east"); !ok || m.Generation != 2 {
		t.Errorf("member after invalid update: %+v", m)
	}
	// Fixing it clears the refusal without a reconnect.
	e.update("east", func(s *corev1.Secret) { s.Data[registration.KeyKubeconfig] = e.srv.Kubeconfig("rotated") })
	e.eventually("east", "refusal cleared", func() bool { return e.phase("east") == "Connected/MemberConnected" })
	if m, _ := e.ctl.Registry().Member("east"); m.Generation != 2 {
		t.Errorf("generation %d after restoring the same kubeconfig", m.Generation)
	}
}

func TestUnreachableMember(t *testing.T) {
	e := newEnv(t)
	e.create("east", "east", e.srv.Kubeconfig("token"), nil, 0)
	e.mustReconcile("east")
	e.eventually("east", "Connected", func() bool { return e.phase("east") == "Connected/MemberConnected" })
	e.srv.SetReady(http.StatusServiceUnavailable)
	e.eventually("east", "server error", func() bool { return e.phase("east") == "Unreachable/"+reasonServerError })
	hs, _ := e.eng.Status("east")
	if hs.State != hysteresis.Suspect {
		t.Errorf("state %s after a short outage, want Suspect", hs.State)
	}
	e.srv.SetReady(http.StatusOK)
	e.eventually("east", "recovered", func() bool { return e.phase("east") == "Connected/MemberConnected" })
}

func TestLabelRemovedDeregisters(t *testing.T) {
	e := newEnv(t)
	called := 0
	e.ctl.Registry().OnDeregister("x", func(context.Context, Deregistration) error { called++; return nil })
	e.create("east", "east", e.srv.Kubeconfig("token"), nil, 0)
	e.mustReconcile("east")
	e.update("east", func(s *corev1.Secret) { delete(s.Labels, registration.LabelCluster) })
	e.mustReconcile("east")
	s := e.get("east")
	if s == nil || controllerutil.ContainsFinalizer(s, registration.Finalizer) || s.Annotations[registration.AnnotationStatus] != "" {
		t.Errorf("secret after unlabel: %+v", s)
	}
	if called != 1 {
		t.Errorf("hook called %d times", called)
	}
	if _, ok := e.ctl.Registry().Member("east"); ok {
		t.Error("still registered")
	}
}

func TestOtherNamespaceIgnored(t *testing.T) {
	e := newEnv(t)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "x", Labels: map[string]string{registration.LabelCluster: "x"}},
		Data: map[string][]byte{registration.KeyKubeconfig: e.srv.Kubeconfig("token")}}
	if err := e.c.Create(e.ctx, s); err != nil {
		t.Fatal(err)
	}
	if e.ctl.relevant(s) {
		t.Error("Secret in another namespace is relevant")
	}
	if _, err := e.ctl.Reconcile(e.ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(s)}); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.ctl.Registry().Member("x"); ok {
		t.Error("Secret in another namespace registered a member")
	}
}

func TestRestartIsQuiet(t *testing.T) {
	e := newEnv(t)
	e.create("east", "east", e.srv.Kubeconfig("token"), nil, 0)
	e.mustReconcile("east")
	e.eventually("east", "Connected", func() bool { return e.phase("east") == "Connected/MemberConnected" })
	e.ctl.Shutdown()

	// A new leafsync process: same Secret, fresh controller.
	ctl2, err := New(e.c, e.ctl.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer ctl2.Shutdown()
	e.ctl = ctl2
	n := len(e.rec.events)
	e.mustReconcile("east")
	if got := e.phase("east"); got != "Connected/MemberConnected" {
		t.Errorf("status after restart: %q", got)
	}
	m, ok := ctl2.Registry().Member("east")
	if !ok {
		t.Fatal("not registered after restart")
	}
	deadline := time.Now().Add(10 * time.Second)
	for !m.Runtime.Prober().Last().OK {
		if time.Now().After(deadline) {
			t.Fatal("no successful probe after restart")
		}
		time.Sleep(20 * time.Millisecond)
		e.tick()
	}
	e.mustReconcile("east")
	if len(e.rec.events) != n {
		t.Errorf("a restart produced events: %v", e.rec.events[n:])
	}
}

func TestSubscriptionSeesStateChanges(t *testing.T) {
	e := newEnv(t)
	e.create("east", "east", e.srv.Kubeconfig("token"), nil, 0)
	e.mustReconcile("east")
	// A late subscriber gets the member replayed first.
	sub := e.ctl.Registry().Subscribe()
	defer sub.Close()
	ev := <-sub.Events()
	if ev.Type != MemberAdded || ev.Member.Runtime == nil || ev.Member.Spec.LeafName != "leaf-east" {
		t.Fatalf("replayed event = %+v", ev)
	}
	e.srv.SetReady(http.StatusInternalServerError)
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-sub.Events():
			// A probe timing out under CPU load (the 100ms interval bounds
			// it) may flap the member before the 500s: wait for the
			// failure's transition.
			d := ev.Member.Readiness
			if ev.Type == Decided && len(d.Transitions) > 0 && d.Transitions[0].To == hysteresis.Suspect {
				if tr := d.Transitions[0]; tr.From != hysteresis.Ready || d.Status.State != hysteresis.Suspect {
					t.Errorf("transition = %+v, status %s", tr, d.Status.State)
				}
				if len(d.Snapshot) == 0 || d.Config.ProbeInterval.Duration <= 0 {
					t.Errorf("decision carries no snapshot or probe interval: %+v", d)
				}
				return
			}
		case <-deadline:
			t.Fatal("no Decided event with a transition")
		case <-time.After(20 * time.Millisecond):
			e.tick()
		}
	}
}

// A leaf name that is an existing Node leafsync does not own (a real
// worker) is refused before anything runs: no runtime, no finalizer, so
// nothing of the Node's is ever written, renewed or deleted, also after
// the Secret goes.
func TestLeafNameOfAForeignNodeIsRefused(t *testing.T) {
	e := newEnv(t)
	worker := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"}}
	if err := e.c.Create(e.ctx, worker); err != nil {
		t.Fatal(err)
	}
	e.create("east", "east", e.srv.Kubeconfig("token"), map[string]string{registration.AnnotationLeafName: "worker-1"}, time.Minute)
	res, err := e.reconcile("east")
	if err != nil {
		t.Fatal(err)
	}
	if got := e.phase("east"); got != "Refused/"+reasonLeafNameTaken {
		t.Fatalf("phase %q", got)
	}
	if ev, ok := e.rec.find(reasonLeafNameTaken, "east"); !ok || !strings.Contains(ev, "worker-1") {
		t.Errorf("event %q does not name the Node", ev)
	}
	if res.RequeueAfter == 0 {
		t.Error("a refused leaf name is never looked at again")
	}
	if _, ok := e.ctl.Registry().Member("east"); ok {
		t.Error("a member runtime runs for a refused registration")
	}
	if controllerutil.ContainsFinalizer(e.get("east"), registration.Finalizer) {
		t.Error("the refused Secret has a finalizer (its deletion would run cleanup on the foreign Node)")
	}
	// leafsync's own leaf of this cluster (from before a restart) is fine.
	e.create("west", "west", e.srv.Kubeconfig("token"), map[string]string{registration.AnnotationLeafName: "leaf-w"}, time.Minute)
	if err := e.c.Create(e.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "leaf-w", Labels: map[string]string{registration.LabelCluster: "west"}}}); err != nil {
		t.Fatal(err)
	}
	e.mustReconcile("west")
	if _, ok := e.ctl.Registry().Member("west"); !ok {
		t.Errorf("west refused: %s", e.phase("west"))
	}
}

// Two registrations naming one leaf: the older Secret keeps it, the newer
// one is refused (Duplicate), and takes over when the older one goes.
func TestDuplicateLeafNameOlderWins(t *testing.T) {
	e := newEnv(t)
	shared := map[string]string{registration.AnnotationLeafName: "leaf-shared"}
	e.create("first", "east", e.srv.Kubeconfig("token"), shared, time.Hour)
	e.create("second", "west", e.srv.Kubeconfig("token"), shared, time.Minute)
	// The first owner's leaf exists: the second is still a Duplicate (the
	// registration conflict is reported, not just a taken Node).
	if err := e.c.Create(e.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "leaf-shared", Labels: map[string]string{registration.LabelCluster: "east"}}}); err != nil {
		t.Fatal(err)
	}
	e.mustReconcile("second")
	e.mustReconcile("first")
	if got := e.phase("second"); got != "Duplicate/"+reasonDuplicateLeafName {
		t.Errorf("second: %q", got)
	}
	if ev, ok := e.rec.find(reasonDuplicateLeafName, "second"); !ok || !strings.Contains(ev, "first") {
		t.Errorf("event %q does not name the owner", ev)
	}
	if _, ok := e.ctl.Registry().Member("west"); ok {
		t.Error("the duplicate runs")
	}
	if _, ok := e.ctl.Registry().Member("east"); !ok {
		t.Errorf("the first owner does not run: %s", e.phase("first"))
	}
	if err := e.c.Delete(e.ctx, e.get("first")); err != nil {
		t.Fatal(err)
	}
	e.mustReconcile("first")
	if err := e.c.Delete(e.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "leaf-shared"}}); err != nil {
		t.Fatal(err) // the leaf-node cleanup hook's work, not run in this test
	}
	e.mustReconcile("second")
	if _, ok := e.ctl.Registry().Member("west"); !ok {
		t.Errorf("the second did not take over: %s", e.phase("second"))
	}
}

// Renaming the leaf of a member whose leaf still has pods is refused (the
// old name keeps running), so no pod is stranded on a leaf nobody serves.
func TestLeafRenameRefusedWhilePodsRemain(t *testing.T) {
	e := newEnv(t)
	e.create("east", "east", e.srv.Kubeconfig("token"), map[string]string{registration.AnnotationLeafName: "leaf-a"}, time.Minute)
	e.mustReconcile("east")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web-0"}, Spec: corev1.PodSpec{NodeName: "leaf-a"}}
	if err := e.c.Create(e.ctx, pod); err != nil {
		t.Fatal(err)
	}
	e.update("east", func(s *corev1.Secret) { s.Annotations[registration.AnnotationLeafName] = "leaf-b" })
	e.mustReconcile("east")
	if m, ok := e.ctl.Registry().Member("east"); !ok || m.Spec.LeafName != "leaf-a" {
		t.Fatalf("member %+v: the rename was applied with a pod on the old leaf", m.Spec)
	}
	if got := e.phase("east"); !strings.HasSuffix(got, "/"+reasonLeafRenameWithPods) {
		t.Errorf("phase %q", got)
	}
	if err := e.c.Delete(e.ctx, pod); err != nil {
		t.Fatal(err)
	}
	e.mustReconcile("east")
	if m, _ := e.ctl.Registry().Member("east"); m.Spec.LeafName != "leaf-b" {
		t.Errorf("leaf %q after the old leaf emptied", m.Spec.LeafName)
	}
}

// A rename refused within StatusInterval of the last status write (the
// MemberConnected write just before) is reported once the interval has
// passed, not leafNameRetry later.
func TestLeafRenameRefusalNotDelayedByRetry(t *testing.T) {
	e := newEnv(t)
	e.create("east", "east", e.srv.Kubeconfig("token"), map[string]string{registration.AnnotationLeafName: "leaf-a"}, time.Minute)
	e.mustReconcile("east")
	e.eventually("east", "Connected", func() bool { return e.phase("east") == "Connected/MemberConnected" })
	e.ctl.reporter.interval = 5 * time.Second // production default; the write above was just now
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web-0"}, Spec: corev1.PodSpec{NodeName: "leaf-a"}}
	if err := e.c.Create(e.ctx, pod); err != nil {
		t.Fatal(err)
	}
	e.update("east", func(s *corev1.Secret) { s.Annotations[registration.AnnotationLeafName] = "leaf-b" })
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "east"}}
	res, err := e.ctl.Reconcile(e.ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > 5*time.Second {
		t.Fatalf("RequeueAfter %v: the deferred refusal write waits longer than StatusInterval", res.RequeueAfter)
	}
	e.clk.Step(res.RequeueAfter)
	if _, err := e.ctl.Reconcile(e.ctx, req); err != nil {
		t.Fatal(err)
	}
	if got := e.phase("east"); !strings.HasSuffix(got, "/"+reasonLeafRenameWithPods) {
		t.Errorf("phase %q", got)
	}
	if ev, ok := e.rec.find(reasonLeafRenameWithPods, "east"); !ok || !strings.HasPrefix(ev, "Warning") {
		t.Errorf("no Warning LeafRenameWithPods event: %v", e.rec.events)
	}
}
