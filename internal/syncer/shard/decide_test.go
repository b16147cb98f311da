package shard

import (
	"testing"
	"time"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	base := Situation{Now: now, LeaseDuration: 15 * time.Second, Assigned: true, Held: true, Me: "a-00000001", HolderSeen: now.Add(-time.Hour)}
	checkRule(t, "Decide", Decide, base, []ruleCase[Decision]{
		{"(a) no writer", func(s *Situation) {}, Decision{Take: true, Reason: ReasonNew}},
		{"(b) already mine", func(s *Situation) { s.Holder = s.Me }, Decision{Mine: true}},
		{"(b) mine though no longer assigned: served until taken", func(s *Situation) { s.Holder, s.Assigned = s.Me, false }, Decision{Mine: true}},
		{"(c) live writer: ask it", func(s *Situation) { s.Holder, s.HolderAlive = "b-00000002", true }, Decision{Request: true}},
		{"(c) live writer asked by another: ask it", func(s *Situation) {
			s.Holder, s.HolderAlive, s.HandoverTo, s.HandoverSeen = "b-00000002", true, "c-00000003", now.Add(-time.Hour)
		}, Decision{Request: true}},
		{"(c) asked it just now: wait", func(s *Situation) {
			s.Holder, s.HolderAlive, s.HandoverTo, s.HandoverSeen = "b-00000002", true, s.Me, now.Add(-14*time.Second)
		}, Decision{}},
		{"(c) asked it LeaseDuration ago, no answer: take", func(s *Situation) {
			s.Holder, s.HolderAlive, s.HandoverTo, s.HandoverSeen = "b-00000002", true, s.Me, now.Add(-15*time.Second)
		}, Decision{Take: true, Reason: ReasonRebalance}},
		{"(d) asked a writer that died: failover", func(s *Situation) { s.Holder, s.HandoverTo = "b-00000002", s.Me }, Decision{Take: true, Reason: ReasonFailover}},
		{"(b) mine but asked for: not mine to serve", func(s *Situation) { s.Holder, s.HandoverTo = s.Me, "b-00000002" }, Decision{}},
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
	})
}

func TestAnswerRequest(t *testing.T) {
	base := Situation{Held: true, Me: "a-00000001", Holder: "a-00000001", HandoverTo: "b-00000002", HandoverToAlive: true}
	for _, tc := range []struct {
		name string
		edit func(*Situation)
		want Answer
	}{
		{"a live asker: pass", func(s *Situation) {}, AnswerPass},
		{"an asker not live: refuse", func(s *Situation) { s.HandoverToAlive = false }, AnswerRefuse},
		{"no request", func(s *Situation) { s.HandoverTo = "" }, AnswerNone},
		{"not the holder", func(s *Situation) { s.Holder = "c-00000003" }, AnswerNone},
		{"not held: the view is not trusted", func(s *Situation) { s.Held = false }, AnswerNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := base
			tc.edit(&s)
			if got := AnswerRequest(s); got != tc.want {
				t.Fatalf("AnswerRequest(%+v) = %v, want %v", s, got, tc.want)
			}
		})
	}
}

func TestKeepWarm(t *testing.T) {
	base := Situation{Assigned: true, Me: "", Holder: "a-00000001", HolderFormerMine: true}
	checkRule(t, "KeepWarm", KeepWarm, base, []ruleCase[bool]{
		{"lapsed: the writer is a former incarnation of mine", func(s *Situation) {}, true},
		{"held again: still the former incarnation until the take back", func(s *Situation) { s.Me = "a-00000002" }, true},
		{"the current incarnation, being the writer", func(s *Situation) { s.Me, s.HolderFormerMine = s.Holder, false }, true},
		{"another replica's incarnation took it", func(s *Situation) { s.Holder, s.HolderFormerMine = "b-00000003", false }, false},
		{"no writer", func(s *Situation) { s.Holder, s.HolderFormerMine = "", false }, false},
		{"the assignment moved it away", func(s *Situation) { s.Assigned = false }, false},
		{"another incarnation asks for it", func(s *Situation) { s.HandoverTo = "b-00000003" }, false},
	})
}

func TestTakeBack(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	base := Situation{Now: now, LeaseDuration: 15 * time.Second, Assigned: true, Held: true, Me: "a-00000002",
		Holder: "a-00000001", HolderFormerMine: true, HolderSeen: now}
	checkRule(t, "TakeBack", TakeBack, base, []ruleCase[Decision]{
		{"from a former incarnation of mine: at once", func(s *Situation) {}, Decision{Take: true, Reason: ReasonFailover}},
		{"not held yet: nothing", func(s *Situation) { s.Held = false }, Decision{}},
		{"mine already", func(s *Situation) { s.Holder, s.HolderFormerMine = s.Me, false }, Decision{Mine: true}},
		{"another replica's live incarnation: not asked", func(s *Situation) {
			s.Holder, s.HolderFormerMine, s.HolderAlive = "b-00000003", false, true
		}, Decision{}},
		{"another replica's dead incarnation: not taken", func(s *Situation) {
			s.Holder, s.HolderFormerMine, s.HolderSeen = "b-00000003", false, now.Add(-time.Hour)
		}, Decision{}},
		{"no writer: not taken back", func(s *Situation) { s.Holder, s.HolderFormerMine = "", false }, Decision{}},
		{"assigned elsewhere: nothing", func(s *Situation) { s.Assigned = false }, Decision{}},
	})
}

// ruleCase is a case of a pure rule's table: the base Situation edited,
// and what the rule must say.
type ruleCase[T comparable] struct {
	name string
	edit func(*Situation)
	want T
}

func checkRule[T comparable](t *testing.T, name string, rule func(Situation) T, base Situation, cases []ruleCase[T]) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := base
			tc.edit(&s)
			if got := rule(s); got != tc.want {
				t.Fatalf("%s(%+v) = %+v, want %+v", name, s, got, tc.want)
			}
		})
	}
}
