//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/syncer/enginestate"
	"github.com/leafsync/leafsync/internal/syncer/store"
	"github.com/leafsync/leafsync/internal/syncer/store/kubestore"
	"github.com/leafsync/leafsync/internal/syncer/store/storetest"
	"github.com/leafsync/leafsync/test/harness"
)

// TestClockStepSavedState: leafsync starts on saved state written by
// leaders whose clocks were off by 10 min — member-a's ahead, member-b's
// behind (the state store's records, as a previous leader leaves them).
// member-a is then blackholed: its leaf goes NotReady within the
// documented bound (notReadyAfter + 2×probeInterval + probeTimeout), not
// 10 min later, and the step is reported (Warning Event ClockStepped on the
// registration Secret, leafsync_member_clock_steps_total). member-b stays
// healthy: its leaf is never NotReady, and nothing is reported for it (a
// clock behind is a gap, not a step back).
func TestClockStepSavedState(t *testing.T) {
	const (
		probe, probeTimeout, notReadyAfter = time.Second, time.Second, 10 * time.Second
		skew                               = 10 * time.Minute
		leafA, leafB                       = "leaf-member-a", "leaf-member-b"
	)
	f := newFleet(t, harness.HostOptions{},
		harness.MemberOptions{Name: "member-a", Nodes: 1}, harness.MemberOptions{Name: "member-b", Nodes: 1})
	ks, err := kubestore.New(f.host.Client(), leafsyncNamespace, "")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	saveState(t, ks, "member-a", now.Add(skew))
	saveState(t, ks, "member-b", now.Add(-skew))

	recA, recB := recordNode(t, f.host, leafA), recordNode(t, f.host, leafB)
	ls := f.startLeafsync(t, "leafsync")
	f.register(t, "member-a", nil)
	f.register(t, "member-b", nil)
	f.waitLeafReady(t, leafA, time.Minute)
	f.waitLeafReady(t, leafB, time.Minute)

	hc := f.host.Client()
	stepEvents := func(secret string) ([]string, error) {
		evs, err := hc.EventsV1().Events(leafsyncNamespace).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		var notes []string
		for _, e := range evs.Items {
			if e.Regarding.Kind == "Secret" && e.Regarding.Name == secret && e.Reason == enginestate.ReasonClockStepped {
				if e.Type != corev1.EventTypeWarning {
					t.Errorf("ClockStepped Event of type %s", e.Type)
				}
				notes = append(notes, e.Note)
			}
		}
		return notes, nil
	}
	harness.Eventually(t, 20*time.Second, "Warning Event ClockStepped on member-a's Secret", func() error {
		notes, err := stepEvents("member-member-a")
		if err == nil && len(notes) == 0 {
			err = fmt.Errorf("none yet")
		}
		if err == nil {
			t.Logf("Event: %s", notes[0])
		}
		return err
	})

	if err := f.members["member-a"].proxy.Blackhole(); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	bound := notReadyAfter + 2*probe + probeTimeout
	f.waitLeafNotReady(t, leafA, bound+writeSlack+30*time.Second)
	took := firstNotReady(observedSince(recA.observations(t), cut)).Sub(cut)
	t.Logf("member-a restored from a clock %s ahead, then blackholed: leaf NotReady %s after the cut (bound %s)", skew, took.Round(time.Millisecond), bound)
	if took < notReadyAfter || took > bound+writeSlack {
		t.Errorf("NotReady %s after the cut, want between notReadyAfter %s and the bound %s (+%s to write)", took, notReadyAfter, bound, writeSlack)
	}

	obsB := recB.observations(t)
	for len(obsB) > 0 && obsB[0].ready != corev1.ConditionTrue { // the leaf as created
		obsB = obsB[1:]
	}
	if at := firstNotReady(obsB); !at.IsZero() {
		t.Errorf("healthy member-b, restored from a clock %s behind: leaf not Ready at %s", skew, at.Format(time.RFC3339Nano))
	}
	t.Logf("member-b: %d versions of its leaf, none of them not Ready", len(obsB))
	if notes, err := stepEvents("member-member-b"); err != nil || len(notes) > 0 {
		t.Errorf("member-b: clock step Events %q (err %v), want none", notes, err)
	}
	metrics, err := httpGet("http://" + ls.MetricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`leafsync_member_clock_steps_total{cluster="member-a"} 1`, `leafsync_member_clock_steps_total{cluster="member-b"} 0`} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// observedSince keeps the observations at or after t.
func observedSince(obs []nodeObservation, t time.Time) []nodeObservation {
	for len(obs) > 0 && obs[0].at.Before(t) {
		obs = obs[1:]
	}
	return obs
}

// saveState writes the record a previous leader whose clock read `clock`
// would have left for a healthy member that had one short flap a few
// seconds earlier: the engine's own snapshot, at the e2e thresholds.
func saveState(t *testing.T, s store.Store, cluster string, clock time.Time) {
	t.Helper()
	fc := hysteresis.DefaultFleetConfig()
	fc.ProbeInterval, fc.CordonAfter, fc.NotReadyAfter = hysteresis.D(time.Second), hysteresis.D(2*time.Second), hysteresis.D(10*time.Second)
	fc.ReadyAfter, fc.Window = hysteresis.D(4*time.Second), hysteresis.D(time.Minute)
	eng, err := hysteresis.NewRawFleet(fc)
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Add(cluster, hysteresis.Overrides{}); err != nil {
		t.Fatal(err)
	}
	for d := -30 * time.Second; d <= 0; d += time.Second {
		o := hysteresis.Observation{Time: clock.Add(d), OK: d < -20*time.Second || d > -17*time.Second}
		if !o.OK {
			o.Class, o.Detail = hysteresis.ClassNetwork, "connection refused"
		}
		if _, _, err := eng.Observe(cluster, o); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := eng.SnapshotCluster(cluster)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(context.Background(), cluster, storetest.Record(storetest.State{Hysteresis: snap}), ""); err != nil {
		t.Fatalf("saving the state of %s: %v", cluster, err)
	}
}
