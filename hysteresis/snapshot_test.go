package hysteresis

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestRestartMidOutageResumes(t *testing.T) {
	cfg := DefaultConfig()
	before := every(0, sec(60), s5, netAt)
	after := every(sec(100), sec(140), s5, netAt) // leafsync was down 60s→100s

	// Uninterrupted engine that simply saw the same gap.
	ref := newFleet(t, cfg)
	run(t, ref, before)
	refSt, refTr := run(t, ref, after)

	f := newFleet(t, cfg)
	run(t, f, before)
	snap, err := f.SnapshotCluster("c")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(snap), `"version":1`) {
		t.Errorf("snapshot without version: %s", snap)
	}
	g, err := NewRawFleet(FleetConfig{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.RestoreCluster(snap); err != nil {
		t.Fatal(err)
	}
	if st, _ := g.Status("c"); st.State != Suspect || !st.Cordoned {
		t.Fatalf("restored status %+v", st)
	}
	st, tr := run(t, g, after)
	if !reflect.DeepEqual(st, refSt) || !reflect.DeepEqual(tr, refTr) {
		t.Fatalf("restored run differs:\n%+v\n%s\nvs\n%+v\n%s", st, fmtTransitions(tr), refSt, fmtTransitions(refTr))
	}
	// 60s + 7.5s for the gap + 5s per probe: NotReady at 125s, not at 100s
	// (the gap is not failure) and not at 190s (the clock is not reset).
	if got := fmtTransitions(tr); got != "2m5s c Suspect->NotReady cordoned=true NetworkFailure\n" {
		t.Errorf("transitions after restart:\n%s", got)
	}
	k, _ := g.Counters("c")
	if k.FlapsSuppressed != 0 || k.Transitions[Ready][Suspect] != 1 {
		t.Errorf("a restart must not count: %+v", k)
	}
}

func TestFleetSnapshotRoundTrip(t *testing.T) {
	fc := DefaultFleetConfig()
	f, err := NewRawFleet(fc)
	if err != nil {
		t.Fatal(err)
	}
	nra := Duration{2 * time.Minute}
	if err := f.Add("a", Overrides{NotReadyAfter: &nra}); err != nil {
		t.Fatal(err)
	}
	if err := f.Add("b", Overrides{}); err != nil {
		t.Fatal(err)
	}
	for at := time.Duration(0); at <= 20*time.Minute; at += s5 {
		ok := (at/time.Minute)%3 == 0
		for _, n := range []string{"a", "b"} {
			if _, _, err := f.Observe(n, Observation{Time: t0.Add(at), OK: ok, Class: ClassServer, Detail: "503"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewRawFleet(fc)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if cfg, _ := g.Config("a"); cfg.NotReadyAfter != nra {
		t.Errorf("overrides not restored: %v", cfg.NotReadyAfter)
	}
	snap2, err := g.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if string(snap) != string(snap2) {
		t.Errorf("snapshot not stable:\n%s\n%s", snap, snap2)
	}
	for _, n := range []string{"a", "b"} {
		s1, _ := f.Status(n)
		s2, _ := g.Status(n)
		k1, _ := f.Counters(n)
		k2, _ := g.Counters(n)
		if !reflect.DeepEqual(s1, s2) || !reflect.DeepEqual(k1, k2) {
			t.Errorf("%s: %+v %+v\n%+v %+v", n, s1, s2, k1, k2)
		}
	}
	if f.failing != g.failing {
		t.Errorf("failing %d vs %d", f.failing, g.failing)
	}
	// Restoring into a fleet that has the cluster keeps its config.
	h, _ := NewRawFleet(fc)
	if err := h.Add("a", Overrides{}); err != nil {
		t.Fatal(err)
	}
	if err := h.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if cfg, _ := h.Config("a"); cfg.NotReadyAfter != fc.NotReadyAfter {
		t.Errorf("config replaced by snapshot: %v", cfg.NotReadyAfter)
	}
}

func TestSnapshotErrors(t *testing.T) {
	f := newFleet(t, DefaultConfig())
	run(t, f, every(0, sec(30), s5, netAt))
	snap, _ := f.SnapshotCluster("c")
	if _, err := f.SnapshotCluster("nope"); !errors.Is(err, ErrUnknownCluster) {
		t.Errorf("unknown: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(snap, &m); err != nil {
		t.Fatal(err)
	}
	mutate := func(k string, v any) []byte {
		c := map[string]any{}
		for kk, vv := range m {
			c[kk] = vv
		}
		c[k] = v
		b, _ := json.Marshal(c)
		return b
	}
	g := newFleet(t, DefaultConfig())
	before, _ := g.Status("c")
	for _, tc := range []struct {
		data []byte
		want error
	}{
		{[]byte("{"), ErrBadSnapshot},
		{mutate("version", 2), ErrSnapshotVersion},
		{mutate("cluster", ""), ErrBadSnapshot},
		{mutate("state", "Sideways"), ErrBadSnapshot},
		{mutate("penalty", -1), ErrBadSnapshot},
		{mutate("hardFor", "-5s"), ErrBadSnapshot},
		{mutate("last", nil), ErrBadSnapshot}, // Suspect without observations
	} {
		if err := g.RestoreCluster(tc.data); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.data, err, tc.want)
		}
	}
	if after, _ := g.Status("c"); after != before {
		t.Error("failed restore changed state")
	}
	if err := g.Restore([]byte(`{"version":7,"clusters":[]}`)); !errors.Is(err, ErrSnapshotVersion) {
		t.Errorf("fleet version: %v", err)
	}
	fs := `{"version":1,"clusters":[` + string(snap) + `,` + string(snap) + `]}`
	if err := g.Restore([]byte(fs)); !errors.Is(err, ErrBadSnapshot) {
		t.Errorf("duplicate cluster: %v", err)
	}
	// A window with another bucket width starts empty rather than failing.
	fc := DefaultFleetConfig()
	fc.Window = D(20 * time.Minute)
	h, _ := NewRawFleet(fc)
	if err := h.RestoreCluster(snap); err != nil {
		t.Fatal(err)
	}
	if ok, fail := h.clusters["c"].windowSums(t0.Add(sec(30))); ok != 0 || fail != 0 {
		t.Errorf("window kept across a width change: %d %d", ok, fail)
	}
	if ok, fail := f.clusters["c"].windowSums(t0.Add(sec(30))); ok != 0 || fail != int64(30*time.Second) {
		t.Errorf("window: %d %d", ok, fail)
	}
}

// A snapshot written before UnreachableSince existed restores with the
// outage beginning at its confirmation (no backdating of tolerations).
func TestSnapshotWithoutUnreachableSince(t *testing.T) {
	f := newFleet(t, DefaultConfig())
	run(t, f, every(0, sec(95), s5, netAt))
	data, err := f.SnapshotCluster("c")
	if err != nil {
		t.Fatal(err)
	}
	old := regexp.MustCompile(`,?"unreachableSince":"[^"]*"`).ReplaceAll(data, nil)
	if bytes.Equal(old, data) {
		t.Fatalf("snapshot has no unreachableSince: %s", data)
	}
	g := newFleet(t, DefaultConfig())
	if err := g.RestoreCluster(old); err != nil {
		t.Fatal(err)
	}
	st, _ := g.Status("c")
	if st.State != NotReady || !st.UnreachableSince.Equal(st.OutageSince) {
		t.Fatalf("restored %+v, want the outage to begin at its confirmation", st)
	}
	bad := bytes.Replace(data, []byte(`"unreachableSince":"`), []byte(`"unreachableSince":"2999-01-01T00:00:00Z","x":"`), 1)
	if err := g.RestoreCluster(bad); !errors.Is(err, ErrBadSnapshot) {
		t.Fatalf("unreachableSince after outageSince: %v, want ErrBadSnapshot", err)
	}
}
