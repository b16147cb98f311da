// Package eventmirror mirrors the Events a member records about the pods
// leafsync runs there (its kubelet's Pulling, Pulled, Created, Started,
// Killing, BackOff, Unhealthy…, its scheduler's Scheduled) onto their host
// pods, so that `kubectl describe pod` in the host, and anything that
// waits for a pod's Events, sees what a node would have said.
//
//	member Event (involvedObject.kind=Pod) -> informer per member runtime
//	  -> the member pod (pod cache): leafsync's for this host's registration
//	     (podmeta.Ours), and the very pod the Event is about (its UID)?
//	  -> an occurrence not seen before? (new Event, or count/series up)
//	  -> client-go record.EventRecorder on the host pod (UID from the member
//	     pod's leafsync.io/host-uid): same type, reason, message and
//	     container path; source leafsync.io/member-events on the leaf
//
// Only the leader mirrors. An Event about an earlier pod of the same name
// (another UID), about a member pod leafsync did not create, or created
// for another host's leafsync, is never mirrored.
//
// Each occurrence is mirrored once per process, and never again after a
// restart: the first list of the first watch of a member is the baseline
// (mirrored by the leafsync before, or older than this one), and only what
// comes after it is mirrored — Events created since, and counts that grow.
// Times are not compared (a member's clock is not leafsync's); counts are.
// When a member's runtime is replaced (a reconnect), the new watch's first
// list is compared with what the old watch had seen, so what happened in
// between is mirrored once. What a member recorded while no leafsync was
// running is not mirrored.
//
// The host is protected by client-go's event correlator, as a kubelet's
// Events are: repeats of an Event become one host Event with a count, more
// than 10 similar ones in 10 minutes one aggregated Event, and a spam
// filter allows 25 Events per host pod and type, then one per 5 minutes.
// After a restart a repeated Event starts a new host Event (the
// correlator's memory is the process's), as it does after a kubelet's.
//
// Memory: the informer keeps the member's pod Events (without managed
// fields) for as long as the member keeps them (its API server's
// --event-ttl, one hour by default); the correlator's caches are LRUs of
// 4096 entries.
package eventmirror
