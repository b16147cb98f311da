package shard

import "time"

// Reason says why a replica takes a member (the handovers metric's label).
type Reason string

// Reasons of a take.
const (
	// ReasonNew: the member had no writer (no member Lease, or a released one).
	ReasonNew Reason = "new"
	// ReasonRebalance: the writer is live, the assignment moved the member
	// here (scale up or down, drain): make before break.
	ReasonRebalance Reason = "rebalance"
	// ReasonFailover: the writer's shard Lease is gone or expired, or the
	// writer was a former incarnation of this replica.
	ReasonFailover Reason = "failover"
)

// Situation is everything Decide looks at, as this replica sees it.
type Situation struct {
	// Now is this replica's clock; LeaseDuration the shard Leases'.
	Now           time.Time
	LeaseDuration time.Duration
	// Assigned: the assignment gives the member to this replica.
	Assigned bool
	// Held: this replica holds its shard Lease now.
	Held bool
	// Me is this replica's current incarnation.
	Me string
	// Holder is the member Lease's holder ("" when it has none or there
	// is no member Lease).
	Holder string
	// HolderFormerMine: the holder is an incarnation this replica had
	// before (it is known to act on nothing).
	HolderFormerMine bool
	// HolderAlive: the holder's incarnation holds a shard Lease whose
	// renewals this replica has seen within its duration.
	HolderAlive bool
	// HolderSeen is when this replica first saw Holder on the member's
	// Lease.
	HolderSeen time.Time
	// HandoverTo is the incarnation the member Lease's handover-to
	// annotation names ("" none): it asked the holder for the member.
	HandoverTo string
	// HandoverSeen is when this replica first saw that request.
	HandoverSeen time.Time
	// HandoverToAlive: HandoverTo holds a shard Lease this replica has
	// seen renewing (as HolderAlive).
	HandoverToAlive bool
}

// Decision is what a replica does about a member.
type Decision struct {
	// Mine: this incarnation is the writer already; nothing to write.
	Mine bool
	// Take: write this incarnation into the member Lease (compare and
	// swap), for Reason.
	Take   bool
	Reason Reason
	// Request: ask the live holder to pass the member over (write this
	// incarnation into the handover-to annotation, compare and swap).
	Request bool
}

// Decide is the rule of when a replica may take a member: only while it
// holds its shard Lease and the assignment gives it the member, and then
// when the member has no writer (new), when the writer is live
// (rebalance: the caller asks only once its runtime for the member has
// synced; the holder stops and passes the member over, Answer; a holder
// that has not answered within LeaseDuration of the request is taken
// from), or when the writer is dead
// (failover): a former incarnation of this replica, or one whose shard
// Lease this replica has not seen renewed within the Lease's duration,
// counted from when it first saw that writer on the member's Lease, so
// that a writer whose shard Lease has not reached this replica's view yet
// counts as live for a while and nothing ping-pongs.
func Decide(s Situation) Decision {
	switch {
	case !s.Held || s.Me == "":
		return Decision{}
	case s.Holder == s.Me && s.HandoverTo != "" && s.HandoverTo != s.Me:
		return Decision{} // being passed over: no longer this replica's
	case s.Holder == s.Me:
		return Decision{Mine: true}
	case !s.Assigned:
		return Decision{}
	case s.Holder == "":
		return Decision{Take: true, Reason: ReasonNew}
	case s.HolderFormerMine:
		return Decision{Take: true, Reason: ReasonFailover}
	case s.HolderAlive && s.HandoverTo != s.Me:
		return Decision{Request: true}
	case s.HolderAlive && s.Now.Sub(s.HandoverSeen) >= s.LeaseDuration:
		return Decision{Take: true, Reason: ReasonRebalance}
	case s.HolderAlive:
		return Decision{} // asked; waiting for the holder
	case s.Now.Sub(s.HolderSeen) >= s.LeaseDuration:
		return Decision{Take: true, Reason: ReasonFailover}
	}
	return Decision{}
}

// KeepWarm is the rule for a member this replica has published but does
// not act on now: keep its runtime (every write waits for Acting) when the
// member's writer is an incarnation of this replica, the current one or
// a former one (its shard Lease lapsed and nobody else took the member),
// the assignment still gives it here, and no other incarnation asks for
// it. Decide then takes it back from the former incarnation (failover, no
// grace) as soon as the shard Lease is held again. Otherwise (another
// replica's incarnation holds or asks for it, or it moved away) the
// runtime stops.
func KeepWarm(s Situation) bool {
	mine := s.Holder != "" && (s.Holder == s.Me || s.HolderFormerMine)
	return mine && s.Assigned && (s.HandoverTo == "" || s.HandoverTo == s.Me)
}

// TakeBack is Decide for a member kept warm (KeepWarm), on a fresh read of
// its Lease: it takes the member back only from a former incarnation of
// this replica (failover, no grace) and never asks a live holder for it.
// A member another replica's incarnation holds now was written by that
// replica meanwhile: the runtime kept goes, and the member comes back, if
// at all, by an ordinary take (a new runtime, the fence, the restore).
func TakeBack(s Situation) Decision {
	if s.Holder == "" || (s.Holder != s.Me && !s.HolderFormerMine) {
		return Decision{}
	}
	return Decide(s)
}

// Answer is what a member's holder does about a handover request.
type Answer int

// Answers to a handover request.
const (
	// AnswerNone: no request to this replica's incarnation, or it does
	// not hold its shard Lease (its view is not trusted).
	AnswerNone Answer = iota
	// AnswerPass: write the asker as holder (term +1) and drop the
	// request; this replica acts on the member no longer from the moment
	// it saw the request.
	AnswerPass
	// AnswerRefuse: the asker is not live in this view: drop the request
	// and keep the member.
	AnswerRefuse
)

// AnswerRequest is the holder's side of a rebalance: a request from a live
// incarnation is passed over, one from an incarnation not live is refused.
func AnswerRequest(s Situation) Answer {
	switch {
	case !s.Held || s.Me == "" || s.Holder != s.Me || s.HandoverTo == "" || s.HandoverTo == s.Me:
		return AnswerNone
	case s.HandoverToAlive:
		return AnswerPass
	}
	return AnswerRefuse
}
