// Package hysteresis decides when a member cluster's leaf node is Ready,
// cordoned, or NotReady.
//
// It is a pure, deterministic state machine in the style of etcd's raft
// package: no API clients, no goroutines, no wall clock. Time is an input
// (Observation.Time); the same observations in the same order always give
// the same decisions, and a Snapshot restored into a fresh fleet continues
// exactly as the original would have. Everything that talks to an API server
// (the prober, the leaf Lease, the taints) lives outside and consults it.
//
// As raft splits RawNode from Node, RawFleet holds all the logic and no
// lock (one goroutine), and Fleet is the same API behind a mutex.
//
// # Use
//
//	f, err := hysteresis.NewFleet(fleetCfg)       // validated FleetConfig; NewRawFleet for one goroutine
//	err = f.Add("eu-1", annotationOverrides)      // per-cluster overrides
//	st, changes, err := f.Observe("eu-1", hysteresis.Observation{
//		Time: now, OK: false, Class: hysteresis.ClassNetwork, Detail: err.Error()})
//	// st.State.LeafReady(): renew the leaf Lease or not; st.Cordoned: NoSchedule taint.
//	snap, err := f.SnapshotCluster("eu-1")        // persist; RestoreCluster(snap) after a restart
//
// # States
//
//	              first network/server failure
//	   +-------+ ----------------------------> +---------+
//	   | Ready |                               | Suspect |
//	   +-------+ <---------------------------- +---------+
//	     ^        a success (suppressed flap:       |
//	     |        counted, adds penaltyPerFlap)     | network/server failures continuous
//	     |                                          | for notReadyAfter, or availability
//	     | successes continuous                     | over window below minAvailability
//	     | for readyAfter                           | (not while the mass guard holds)
//	     |                                          v
//	+------------+       first success        +----------+
//	| Recovering | <------------------------- | NotReady |
//	+------------+ -------------------------> +----------+
//	               a network/server failure
//	               (OutageSince is kept)
//
// Ready and Suspect are "leaf Ready" (State.LeafReady): the Lease is renewed.
// NotReady and Recovering are not: a recovering member must prove itself for
// readyAfter before the leaf is Ready again.
//
// An outage has two times: OutageSince, when it was confirmed (NotReady
// entered), and UnreachableSince, when it began (the first failure of the
// streak that went NotReady). Pod sync counts the pods' tolerations of an
// unreachable leaf from the beginning, so that waiting out a flap does not
// delay failover in a real outage; a cluster the mass-disconnect guard
// held begins its outage at the release, which keeps the release's pacing.
//
// Cordoned (NoSchedule) is orthogonal to the state. A leaf is cordoned when
// any of these holds:
//   - failures (of any class) have been continuous for cordonAfter;
//   - the state is NotReady or Recovering;
//   - flap damping: the penalty went above suppress and has not yet decayed
//     below reuse.
//
// # Failure classes
//
// network (timeouts, refused, reset, DNS) and server (5xx, 429, or an answer
// that is not the API server's: a redirect, an HTML or empty 404, a 200 that
// is not "ok") failures are evidence that the member is unreachable: they
// move Ready → Suspect and can lead to NotReady. Only the member's API server
// can blame leafsync: auth (its 401/403, a Kubernetes Status; a rejected
// client certificate) and config (its other 4xx; a server certificate
// leafsync cannot trust, a bad URL) failures are leafsync's own
// problem: they cordon after cordonAfter and surface as Reason AuthFailure or
// ConfigFailure, but never move a cluster towards NotReady. They neither
// extend nor break a network/server failure streak, and they break a success
// streak.
//
// # Evidence and gaps
//
// Durations such as "failures continuous for notReadyAfter" are measured as
// evidence, not wall time: the time between two consecutive observations
// counts only if both have the same outcome (two network/server failures,
// two successes), and each observation adds at most 1.5×probeInterval (so
// probes that are a little late still count in full). So a gap in
// observations (leafsync paused, restarted, a probe not run) is not failure:
// failures at 12:00:00 and 12:30:00 are 7.5s of evidence, not 30m.
// A restart mid-outage resumes the streak where it was (nothing is reset,
// nothing is counted as a flap), and the restart gap adds at most
// 1.5×probeInterval. Probe at least every 1.5×probeInterval (keep the probe
// timeout below that), or failing probes accrue evidence more slowly than
// wall time.
//
// Clock steps never freeze the engine. Observation times are wall-clock
// times, and the wall clock can step (an NTP step, a resumed VM), or a
// snapshot can come from a leader whose clock ran ahead. No observation is
// dropped for its time; instead the cluster's times are re-anchored: every
// time it holds — Since, OutageSince, UnreachableSince, the last
// observation, the penalty's decay time, the availability buckets (by
// whole buckets), the guard's release time — moves by the step, so
// durations are kept and everything reads in the new clock, nothing ahead
// of it. Status.ClockStep reports the step (the shell turns it into a
// Warning Event and a metric). How the step is known:
//   - Within one process, times from time.Now carry Go's monotonic clock
//     reading, which no step moves: the step is the wall clock's
//     difference from it between two observations (beyond 1s, or any that
//     puts the time before the last one), either way, and the observation
//     keeps its true distance from the last one. A step changes nothing
//     else: not the streaks, not when NotReady comes.
//   - Across processes (the last observation was restored from a
//     snapshot) only the wall clock is known. An observation earlier than
//     the last one counts as one probe interval after it (evidence of its
//     outcome, like a probe on time). A step back that leaves the time
//     still after the last observation only shortens that interval: it
//     costs at most one probe interval of evidence. A step ahead cannot be
//     told from a gap: it counts as a probe at most half an interval late
//     (the 1.5×probeInterval cap), and the window and the penalty age by
//     it.
//
// A release of another cluster stamped after an observation's time (that
// cluster not yet re-anchored) is taken to be at that time, so the guard's
// pacing waits massReleaseInterval, never the other clock's lead. So
// across steps either way a continuous outage is NotReady no later than
// notReadyAfter + one probe interval of observations per step back, and a
// failure streak of n probes every probeInterval needs (n-1)×probeInterval
// plus half an interval per step ahead to reach notReadyAfter (both
// property-tested without monotonic readings, the harder case).
//
// With probes every probeInterval, a continuous outage therefore yields
// NotReady at the first observation at least notReadyAfter after the first
// failed one: no later than notReadyAfter + probeInterval after the outage
// began, counted in observations (the extra probe interval is real: probe
// times jitter by milliseconds, so notReadyAfter/probeInterval intervals
// can add up to a hair less than notReadyAfter). Measured from the moment
// the link dies, add up to one probe interval before the next probe starts
// and the probe timeout it then waits out: a blackholed member's leaf is
// NotReady no later than notReadyAfter + 2×probeInterval + probeTimeout
// after the cut (103s with the defaults; the e2e test
// TestBlackholeNotReadyBound checks it with the default probe interval and
// timeout and notReadyAfter 30s: bound 43s, measured 37.8s). Probes bypass the member's circuit breaker,
// so an open breaker neither delays this bound nor stretches a recovery.
//
// # Availability
//
// The window is split into 60 buckets holding success and failure evidence.
// A Suspect cluster also becomes NotReady when, over the window, there is at
// least half a window of evidence (so a short history is not judged), failure
// evidence is at least notReadyAfter, and availability (success evidence over
// all evidence) is below minAvailability. This catches a link that flaps
// faster than notReadyAfter. Because it needs notReadyAfter of failure
// evidence, a single failure streak shorter than notReadyAfter never yields
// NotReady.
//
// # Flap damping
//
// Modelled on BGP route-flap damping (RFC 2439). Every suppressed flap
// (Suspect → Ready) adds penaltyPerFlap to a penalty that decays
// exponentially with halfLife and is capped at maxPenalty. When the penalty
// rises above suppress the leaf is cordoned, until it decays below reuse.
// Damping only cordons; it never causes NotReady.
//
// # Mass-disconnect guard
//
// Modelled on kube-controller-manager's zone disruption modes, which slow
// evictions in a disrupted zone but do not stop them for ever. A cluster
// counts as failing while its network/server probes fail and it is not yet
// NotReady (or is NotReady only because the guard released it, see below;
// other NotReady clusters do not count, so a few dead members cannot keep
// the guard on). While at least massFraction of the fleet's clusters and at
// least massMin clusters are failing, the problem is most likely on
// leafsync's side, and a cluster that would go NotReady is held instead: it
// stays Suspect (or Recovering), cordoned, with Reason MassDisconnect and
// Status.Held set.
//
// The hold is bounded. A cluster held for massHoldMax of failure evidence
// (Status.HeldFor; gaps count at most 1.5×probeInterval, like every other
// streak) is released to NotReady, at most one cluster of the fleet per
// massReleaseInterval (Status.Released). A released cluster keeps counting
// as failing until it answers again, so the episode does not end after the
// first release and the rest still go one at a time. So when most of a fleet
// really dies, a dead cluster is NotReady within notReadyAfter + massHoldMax
// + n×(massReleaseInterval + probeInterval) of the first failure, n being
// its place in the release order (property-tested). If the guard lifts
// (enough clusters answer again), a cluster still failing goes NotReady at
// its next failed probe, its evidence having accrued meanwhile. massFraction,
// massMin, massHoldMax and massReleaseInterval are per-cluster thresholds
// like the others: each cluster is judged with its own values against the
// fleet-wide count.
//
// # Defaults and why
//
//   - probeInterval 5s: one cheap request per member every 5s; 18 samples
//     before NotReady, enough that one lost probe means nothing.
//   - cordonAfter 10s: three failed probes in a row (at 0s, 5s, 10s). A
//     single dropped probe or a sub-10s blip does not cordon; a real problem
//     stops new placements within 10–15s. Cordoning is cheap and reversible.
//   - notReadyAfter 90s: NotReady starts the eviction machinery, which is
//     expensive and irreversible. 90s rides out the usual transient causes
//     (API server rolling restart, load-balancer or VPN failover, routing
//     reconvergence: typically 10–60s) while still confirming a real outage
//     in well under the 5m pods tolerate an unreachable node by default.
//   - readyAfter 30s: seven successes in a row. Long enough that a link
//     flickering back for a few seconds does not bounce the leaf Ready and
//     NotReady again, short enough not to delay a real recovery noticeably.
//   - window 10m, minAvailability 0.5: a member unreachable more than half of
//     the last ten minutes (and for at least notReadyAfter in total) is not
//     usable even if no single outage lasted 90s.
//   - penaltyPerFlap 1000, suppress 2000, reuse 750, halfLife 10m,
//     maxPenalty 6000: the classic RFC 2439 / router figures (1000 / 2000 /
//     750) with a 10m half-life. Three flaps within a few minutes cordon;
//     flaps further apart than one half-life converge below suppress and
//     never do. From just above suppress the cordon lifts about 14m after
//     the last flap (2000 → 750); maxPenalty 6000 bounds it to three half-lives (30m).
//   - massFraction 0.55, massMin 3: kube-controller-manager's
//     unhealthy-zone threshold (55%, and more than two nodes).
//   - massHoldMax 5m: what the guard is for — leafsync's own egress, DNS or
//     pod network failing — is typically fixed or failed over within a few
//     minutes; holding longer would only delay the failover of a fleet that
//     really lost most members (a region outage), which then starts after
//     notReadyAfter + 5m = 6.5m plus the pods' tolerations.
//   - massReleaseInterval 10s: kube-controller-manager's default eviction
//     rate (--node-eviction-rate 0.1 nodes/s). Releasing one member at a
//     time gives people watching the alert a chance to stop a fleet-wide
//     eviction caused by leafsync's side; 60 of 100 members take 10m more.
//
// # Snapshots
//
// Snapshot/Restore (whole fleet) and SnapshotCluster/RestoreCluster (one
// cluster, what the state store persists) use versioned JSON
// ({"version":1,...}) holding every piece of state: state and Since, the
// streaks, the last observation, the penalty and when it was last decayed,
// the availability buckets and the counters. Config is not state: a
// restored cluster keeps the config it was added with.
//
// # Performance
//
// A decision that changes nothing does not allocate (see BenchmarkObserve*).
package hysteresis
