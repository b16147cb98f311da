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
