// Package podsync runs the pods the host schedules onto a leaf in the leaf's
// member cluster, mirrors their status back, and guards their deletion.
//
// For every host pod bound to a leaf, the member gets a pod of the same
// namespace and name (the namespace, and copies of the host ConfigMaps and
// Secrets the pod uses, are created as needed), labelled with the member's
// cluster name and the host pod's UID. A pod that mounts a ServiceAccount
// token runs as its host ServiceAccount: with a host API address
// configured, a member Secret holds tokens the host issued for it, the
// host's CA and that address (podsync/hosttoken, hosttokens.go). Only what the member's owner agreed
// to runs: namespaces leafsync created or the registration lists (never
// kube-*), names that resolve to host objects only (a member object of that
// name leafsync did not create, or a PVC, refuses the pod), and what the
// upstream Pod Security checks allow at the registration's level. The host pod carries the finalizer
// leafsync.io/member-pod while a member pod may exist, so that no host
// deletion is lost while the member is unreachable.
//
// Every host deletion is classified by cause (the DisruptionTarget
// condition's reason, or none). Deletes a person or a controller asked for
// (plain DELETE, Eviction API, preemption) are forwarded with their grace
// period. Eviction deletes (taint manager, pod GC) of pods on a leaf whose
// member is Ready again are stale: they are never forwarded directly but
// handled by the stale-eviction policy (DeferUntilReplaced, Retain,
// Forward). Eviction deletes on a leaf confirmed NotReady are recorded as
// owed through the store's Keeper and executed, by the same policy, once the
// member is Ready. A recreated host pod (a StatefulSet's) adopts the member
// pod that still runs when its spec is compatible; Terminating host pods on a
// leaf confirmed down are finished after reapAfter so their owners can fail
// over. A pod with a stable identity (a StatefulSet's, or one with a
// hostname or subdomain) never has two copies in members that are not
// confirmed down: a new one waits until the old copy is gone, and the old
// one goes as soon as the new one is bound elsewhere (decide/identity.go).
//
// The decisions are a pure function (podsync/decide: decide.Decide) of the
// host pod, the member pod, the member's hysteresis status, the pending
// deletes and the host pods that may replace them (it also chooses the
// replacement). The names both sides share (labels, annotations, causes,
// the stale-eviction Policy, the member owner's Admission) are in
// podsync/podmeta; the host pod's translation into a member pod is
// podsync/translate. One pod name flows top-down:
//
//	informer event -> memberSync queue (internal/runner, per member)
//	  -> Controller.reconcile: gather decide.Input from caches (writes nothing)
//	  -> decide.Decide -> decide.Plan{Actions, RequeueAfter}
//	  -> execution.run (execute.go): host and member writes in order; pending deletes
//	     through ledger.go (the store), copies through internal/syncer/reflector,
//	     the host status through podsync/podstatus; metrics from each
//	     action's typed outcome
//	  -> runner.Result{RequeueAfter} (the plan's, or a step's wait); an
//	     error is the runner's backoff
//
// See docs/pod-sync.md.
package podsync
