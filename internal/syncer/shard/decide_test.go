package shard

import (
	"testing"
	"time"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	base := Situation{Now: now, LeaseDuration: 15 * time.Second, Assigned: true, Held: true, Me: "a-00000001", HolderSeen: now.Add(-time.Hour)}
	for _, tc := range []struct {
		name string
		edit func(*Situation)
		want Decision
	}{
		{"(a) no writer", func(s *Situation) {}, Decision{Take: true, Reason: ReasonNew}},
		{"(b) already mine", func(s *Situation) { s.Holder = s.Me }, Decision{Mine: true}},
		{"(b) mine though no longer assigned: served until taken", func(s *Situation) { s.Holder, s.Assigned = s.Me, false }, Decision{Mine: true}},
		{"(c) live writer: make before break", func(s *Situation) { s.Holder, s.HolderAlive = "b-00000002", true }, Decision{Take: true, Reason: ReasonRebalance}},
		{"(d) writer expired long ago", func(s *Situation) { s.Holder = "b-00000002" }, Decision{Take: true, Reason: ReasonFailover}},
		{"(d) unknown writer seen just now: live for a while", func(s *Situation) { s.Holder, s.HolderSeen = "b-00000002", now }, Decision{}},
		{"(d) unknown writer, grace not over", func(s *Situation) { s.Holder, s.HolderSeen = "b-00000002", now.Add(-14*time.Second) }, Decision{}},
		{"(d) unknown writer, grace over", func(s *Situation) { s.Holder, s.HolderSeen = "b-00000002", now.Add(-15*time.Second) }, Decision{Take: true, Reason: ReasonFailover}},
		{"(d) a former incarnation of mine: no grace", func(s *Situation) { s.Holder, s.HolderSeen, s.HolderFormerMine = "a-00000000", now, true }, Decision{Take: true, Reason: ReasonFailover}},
		{"not held: nothing", func(s *Situation) { s.Held = false }, Decision{}},
		{"not held: not even mine", func(s *Situation) { s.Held, s.Holder = false, s.Me }, Decision{}},
		{"no incarnation: nothing", func(s *Situation) { s.Me = "" }, Decision{}},
		{"not assigned: no take (a)", func(s *Situation) { s.Assigned = false }, Decision{}},
		{"not assigned: no take (c)", func(s *Situation) { s.Assigned, s.Holder, s.HolderAlive = false, "b-00000002", true }, Decision{}},
		{"not assigned: no take (d)", func(s *Situation) { s.Assigned, s.Holder = false, "b-00000002" }, Decision{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := base
			tc.edit(&s)
			if got := Decide(s); got != tc.want {
				t.Fatalf("Decide(%+v) = %+v, want %+v", s, got, tc.want)
			}
		})
	}
}
