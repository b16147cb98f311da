package clusters

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/syncer/member"
	"github.com/leafsync/leafsync/syncer/registration"
)

// The registry drops a probe outcome of a runtime that is no longer active,
// and publishes what the judge returns in order with the member's events.
func TestRecordProbeOnlyFromTheActiveRuntime(t *testing.T) {
	fleet, err := hysteresis.NewFleet(hysteresis.DefaultFleetConfig())
	if err != nil {
		t.Fatal(err)
	}
	reg := newRegistry(fleet, clocktesting.NewFakePassiveClock(time.Unix(0, 0)))
	secret := types.NamespacedName{Namespace: ns, Name: "east"}
	spec := &registration.Spec{Cluster: "east", Secret: secret, Server: "https://east"}
	first, second := &member.Runtime{}, &member.Runtime{}
	reg.add(spec, first)
	sub := reg.Subscribe()
	defer sub.Close()

	judged := 0
	judge := func(s types.NamespacedName, server string) (connection, []Event) {
		judged++
		if s != secret || server != spec.Server {
			t.Errorf("judge got %s %s", s, server)
		}
		return connectionFor(hysteresis.Observation{OK: true}, server, s), []Event{{Type: StateChanged, Cluster: "east"}}
	}
	if _, _, ok := reg.recordProbe("east", second, judge); ok || judged != 0 {
		t.Fatalf("outcome of a runtime that is not active: ok=%v, judged %d times", ok, judged)
	}
	key, changed, ok := reg.recordProbe("east", first, judge)
	if !ok || !changed || key != secret || judged != 1 {
		t.Fatalf("outcome of the active runtime: key=%s changed=%v ok=%v judged=%d", key, changed, ok, judged)
	}
	if _, changed, _ := reg.recordProbe("east", first, judge); changed {
		t.Error("same connection again reported as a change")
	}
	if old, _ := reg.replace(spec, second, connection{PhasePending, ReasonReconnecting, ""}); old != first {
		t.Fatal("replace did not return the previous runtime")
	}
	if _, _, ok := reg.recordProbe("east", first, judge); ok {
		t.Error("outcome of the replaced runtime was recorded")
	}

	want := []EventType{MemberAdded, StateChanged, StateChanged, MemberReplaced}
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
