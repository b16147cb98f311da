// Package decide is pod sync's decision for one pod name in one member, as
// a pure function: Decide(Input) Plan. The Input is data only (the host
// pod, the member pod, the member's hysteresis status, the pending deletes,
// the possible replacements, the leaf's taints, the member owner's
// Admission, both clocks' now); the Plan is the actions to carry out in
// order and when to look again. No client, no clock, no writes: the
// controller in package podsync gathers the Input and executes the Plan.
//
//	Decide
//	  -> decideRecord      pending deletes of a previous host pod of the name
//	  -> decideOrphan      no host pod: a member pod without a record
//	  -> decideTerminating the host pod is being deleted (cause, policy, owe, reap)
//	  -> decideLive        create, adopt, mirror status, refuse (notAdmitted),
//	                       evictions the taint manager gave up on (evictions.go),
//	                       one copy per stable identity (identity.go)
//
// Deferred deletes are bound to their replacement here (replace.go), so
// that gathering the Input has no side effects. See docs/pod-sync.md.
package decide
