package clusters

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/syncer/member"
	"github.com/leafsync/leafsync/internal/syncer/registration"
)

// The registry drops a probe outcome of a runtime that is no longer active,
// and publishes each decision of the active one, in order with the
// member's events, carrying what its consumers need.
func TestObserveOnlyFromTheActiveRuntime(t *testing.T) {
	fleet, err := hysteresis.NewFleet(hysteresis.DefaultFleetConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := fleet.Add("east", hysteresis.Overrides{}); err != nil {
		t.Fatal(err)
	}
	reg := newRegistry(fleet, clocktesting.NewFakePassiveClock(time.Unix(0, 0)))
	secret := types.NamespacedName{Namespace: ns, Name: "east"}
	spec := &registration.Spec{Cluster: "east", Secret: secret, Server: "https://east"}
	first, second := &member.Runtime{}, &member.Runtime{}
	reg.add(spec, first)
	sub := reg.Subscribe()
	defer sub.Close()

	t0 := time.Unix(1000, 0)
	ok := hysteresis.Observation{Time: t0, OK: true}
	fail := hysteresis.Observation{Time: t0.Add(time.Second), Class: hysteresis.ClassNetwork, Detail: "refused"}
	if _, _, _, accepted, _ := reg.observe("east", second, ok); accepted {
		t.Fatal("outcome of a runtime that is not active was accepted")
	}
	m, key, changed, accepted, err := reg.observe("east", first, ok)
	if !accepted || err != nil || !changed || key != secret {
		t.Fatalf("outcome of the active runtime: key=%s changed=%v ok=%v err=%v", key, changed, accepted, err)
	}
	if m.Readiness.Status.State != hysteresis.Ready || len(m.Readiness.Snapshot) == 0 || m.Readiness.Config.ProbeInterval.Duration <= 0 {
		t.Errorf("decision = %+v, want Ready with a snapshot and the probe interval", m.Readiness)
	}
	m, _, changed, _, _ = reg.observe("east", first, fail)
	if !changed || len(m.Readiness.Transitions) != 1 || m.Readiness.Status.State != hysteresis.Suspect {
		t.Errorf("failure: changed=%v decision %+v, want one transition to Suspect", changed, m.Readiness)
	}
	if st, _ := reg.Hysteresis("east"); st.State != hysteresis.Suspect {
		t.Errorf("registry's status = %s, want the last decision's (Suspect)", st.State)
	}
	if old, _ := reg.replace(spec, second, connection{phasePending, reasonReconnecting, ""}); old != first {
		t.Fatal("replace did not return the previous runtime")
	}
	if _, _, _, accepted, _ := reg.observe("east", first, ok); accepted {
		t.Error("outcome of the replaced runtime was recorded")
	}

	want := []EventType{MemberAdded, Decided, Decided, MemberReplaced}
	for i, w := range want {
		select {
		case ev := <-sub.Events():
			if ev.Type != w {
				t.Fatalf("event %d: %s, want %s", i, ev.Type, w)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("event %d: none, want %s", i, w)
		}
	}
}

// A snapshot restored through the Registry is what the member's
// MemberAdded event and the Registry's reads carry, before any probe; once
// the member runs, a restore is refused and changes nothing, and a
// snapshot of another cluster is refused.
func TestRestoreIsPublished(t *testing.T) {
	fc := hysteresis.DefaultFleetConfig()
	prev, err := hysteresis.NewFleet(fc)
	if err != nil {
		t.Fatal(err)
	}
	_ = prev.Add("east", hysteresis.Overrides{})
	t0 := time.Unix(1000, 0)
	for at := t0; at.Before(t0.Add(2 * fc.NotReadyAfter.Duration)); at = at.Add(fc.ProbeInterval.Duration) {
		if _, err := prev.Step("east", hysteresis.Observation{Time: at, Class: hysteresis.ClassNetwork}); err != nil {
			t.Fatal(err)
		}
	}
	snap, _ := prev.SnapshotCluster("east")

	fleet, _ := hysteresis.NewFleet(fc)
	reg := newRegistry(fleet, clocktesting.NewFakePassiveClock(t0))
	if err := reg.setThresholds("east", hysteresis.Overrides{}); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Restore("west", snap); err == nil {
		t.Error("a snapshot of east restored as west")
	}
	st, err := reg.Restore("east", snap)
	if err != nil || st.State != hysteresis.NotReady {
		t.Fatalf("restore: %s, %v; want NotReady", st.State, err)
	}
	sub := reg.Subscribe()
	defer sub.Close()
	spec := &registration.Spec{Cluster: "east", Secret: types.NamespacedName{Namespace: ns, Name: "east"}, Server: "https://east"}
	reg.add(spec, &member.Runtime{})
	select {
	case ev := <-sub.Events():
		if ev.Type != MemberAdded || ev.Member.Readiness.Status.State != hysteresis.NotReady {
			t.Errorf("first event %s with readiness %s, want MemberAdded with the restored NotReady", ev.Type, ev.Member.Readiness.Status.State)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no MemberAdded")
	}
	if got, _ := reg.Hysteresis("east"); got.State != hysteresis.NotReady {
		t.Errorf("registry's status %s, want the restored NotReady", got.State)
	}

	fresh, _ := hysteresis.NewFleet(fc)
	_ = fresh.Add("east", hysteresis.Overrides{})
	freshSnap, _ := fresh.SnapshotCluster("east")
	if _, err := reg.Restore("east", freshSnap); err == nil {
		t.Error("restore of a running member accepted")
	}
	if d, _ := fleet.Current("east"); d.Status.State != hysteresis.NotReady {
		t.Errorf("engine after a refused restore: %s, want NotReady", d.Status.State)
	}
}
