// Package metrics defines every Prometheus metric leafsync exports, on the
// controller-runtime metrics endpoint. Each metric is declared once, as a
// Spec; docs/metrics.md is generated from them (go test ./internal/syncer/metrics
// -update), and a test fails when the doc is stale. The Grafana dashboard,
// charts/leafsync/files/dashboard.json, is generated from the Specs the
// same way by package dashboard (go test ./internal/syncer/metrics/dashboard -update).
//
// Label cardinality is bounded: labels are cluster names, states, classes,
// causes and outcomes — never pod names.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Kind is a metric type.
type Kind string

// Metric kinds.
const (
	Counter   Kind = "counter"
	Gauge     Kind = "gauge"
	Histogram Kind = "histogram"
)

// Spec describes one metric.
type Spec struct {
	Name   string
	Kind   Kind
	Help   string
	Labels []string
	// Buckets of a histogram (seconds).
	Buckets []float64
	// Group is the section of docs/metrics.md.
	Group string
}

var latencyBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// Lease renewal lag spans from milliseconds to the KCM grace period (50s).
var lagBuckets = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 40, 50}

// Specs of the metrics recorded as things happen. The per-cluster state
// metrics (engine, breaker, registration) are read at scrape time from the
// engine and the registry; they are in StateSpecs.
var (
	ProbeResults = spec(Spec{Group: "Probes", Name: "leafsync_probe_results_total", Kind: Counter,
		Help:   "Probes of member API servers (GET /readyz) by result: ok, or the failure class network, server, auth or config.",
		Labels: []string{"cluster", "result"}})
	ProbeDuration = spec(Spec{Group: "Probes", Name: "leafsync_probe_duration_seconds", Kind: Histogram,
		Help:   "Time a probe of a member API server took, successful or not.",
		Labels: []string{"cluster"}, Buckets: latencyBuckets})
	LeaseRenewalLag = spec(Spec{Group: "Leaf nodes", Name: "leafsync_lease_renewal_lag_seconds", Kind: Histogram,
		Help:   "How late a leaf's Lease renewal landed after it was due. Near the KCM grace period (50s by default) a leaf is about to be marked Unknown.",
		Labels: []string{"cluster"}, Buckets: lagBuckets})
	LeaseRenewalFailures = spec(Spec{Group: "Leaf nodes", Name: "leafsync_lease_renewal_failures_total", Kind: Counter,
		Help:   "Rounds of leaf Lease renewal that failed until the next renewal was due (each round retries several times).",
		Labels: []string{"cluster"}})
	LeafWrites = spec(Spec{Group: "Leaf nodes", Name: "leafsync_leaf_writes_total", Kind: Counter,
		Help:   "Writes of leaf Node objects (create, labels and taints, status). Steady growth without member changes would be a write storm.",
		Labels: []string{"cluster"}})
	LeafAllocatable = spec(Spec{Group: "Leaf nodes", Name: "leafsync_leaf_allocatable", Kind: Gauge,
		Help:   "Allocatable resources of a leaf node, as advertised to the host scheduler (cores for cpu, bytes for memory and storage, counts otherwise).",
		Labels: []string{"cluster", "resource"}})
	SyncedPods = spec(Spec{Group: "Pods", Name: "leafsync_synced_pods", Kind: Gauge,
		Help:   "Host pods bound to a member's leaf that leafsync keeps in the member.",
		Labels: []string{"cluster"}})
	PodDeletes = spec(Spec{Group: "Pods", Name: "leafsync_pod_deletes_total", Kind: Counter,
		Help:   "Host deletions of synced pods by cause (user, eviction_api, preemption, taint_manager, pod_gc, other) and what leafsync did downstream: forwarded, stale_deferred, stale_retained, owed, adopted, reaped.",
		Labels: []string{"cluster", "cause", "outcome"}})
	OwedDeletes = spec(Spec{Group: "Pods", Name: "leafsync_pending_deletes", Kind: Gauge,
		Help:   "Downstream deletes waiting, by kind: owed (member was down), deferred (stale eviction kept until the replacement is Ready), retained (kept as an orphan).",
		Labels: []string{"cluster", "kind"}})
	PodSyncDuration = spec(Spec{Group: "Pods", Name: "leafsync_pod_sync_duration_seconds", Kind: Histogram,
		Help:   "Time to bring one pod in line between host and member.",
		Labels: []string{"cluster"}, Buckets: latencyBuckets})
	storeWriteDuration = spec(Spec{Group: "State store", Name: "leafsync_store_write_duration_seconds", Kind: Histogram,
		Help:   "Time one state-store write took, by backend.",
		Labels: []string{"backend"}, Buckets: latencyBuckets})
	StoreWriteErrors = spec(Spec{Group: "State store", Name: "leafsync_store_write_errors_total", Kind: Counter,
		Help:   "Failed state-store writes by backend and reason (conflict, unavailable, other). State stays in memory and is retried.",
		Labels: []string{"backend", "reason"}})
	StorePendingWrites = spec(Spec{Group: "State store", Name: "leafsync_store_pending_writes", Kind: Gauge,
		Help: "Clusters whose latest state is not yet written to the store."})
	EvictionGuardActive = spec(Spec{Group: "Eviction guard", Name: "leafsync_eviction_guard_active", Kind: Gauge,
		Help: "1 when the eviction guard (ValidatingAdmissionPolicy and binding) was found or installed at start and leafsync keeps its readiness records; 0 when it is disabled or leafsync could not install it (the log says why)."})
	EvictionsRefused = spec(Spec{Group: "Eviction guard", Name: "leafsync_evictions_refused_total", Kind: Counter,
		Help:   "Taint-manager evictions of a leaf's pods that did not happen because the eviction guard refused them: the pod got DisruptionTarget=DeletionByTaintManager but was not deleted. Counted once per pod and eviction attempt. An eviction for a user's NoExecute taint on the leaf is not counted: the guard lets it through once the leaf's record lists the taint, and leafsync carries out one it refused before that.",
		Labels: []string{"cluster"}})
	EvictionsCompleted = spec(Spec{Group: "Eviction guard", Name: "leafsync_evictions_completed_total", Kind: Counter,
		Help:   "Evictions leafsync carried out itself: the member is confirmed NotReady, the leaf carries node lifecycle's NoExecute taint, and the pod's toleration of it, counted from the outage's first failed probe, has run out (or a user's NoExecute taint outlasted it).",
		Labels: []string{"cluster"}})
	KubeletAPIRequests = spec(Spec{Group: "Kubelet API", Name: "leafsync_kubelet_api_requests_total", Kind: Counter,
		Help:   "Requests to the leaves' kubelet API (kubectl logs, exec, attach, port-forward through the host API server) by verb (containerLogs, exec, attach, portForward, or unknown for a path that is none of them) and answer: the HTTP status leafsync gave, or upgraded when the connection was handed to the member's answer (a stream).",
		Labels: []string{"verb", "code"}})
)

// Label values of bounded label sets, initialised to zero for every member
// so that rate() and increase() have series from the start.
var (
	probeResultValues  = []string{"ok", "network", "server", "auth", "config"}
	deleteCauses       = []string{"user", "eviction_api", "preemption", "taint_manager", "pod_gc", "other"}
	DeleteOutcomes     = []string{"forwarded", "stale_deferred", "stale_retained", "owed", "adopted", "reaped"}
	pendingDeleteKinds = []string{"owed", "deferred", "retained"}
	storeErrorReasons  = []string{"conflict", "unavailable", "other"}
	// KubeletAPISuccess is each kubelet API verb's answer when it works:
	// their series exist from the start (zero while the API is off).
	KubeletAPISuccess = map[string]string{"containerLogs": "200", "exec": "upgraded", "attach": "upgraded", "portForward": "upgraded"}
)

// Specs of the metrics computed at scrape time (see StateCollector).
var (
	MemberState = spec(Spec{Group: "Readiness engine", Name: "leafsync_member_state", Kind: Gauge,
		Help:   "The readiness decision for a member, one-hot: 1 for its current state (Ready, Suspect, NotReady, Recovering), 0 for the others.",
		Labels: []string{"cluster", "state"}})
	MemberCordoned = spec(Spec{Group: "Readiness engine", Name: "leafsync_member_cordoned", Kind: Gauge,
		Help:   "1 while a member's leaf carries the leafsync.io/unreachable:NoSchedule cordon taint.",
		Labels: []string{"cluster"}})
	FlapPenalty = spec(Spec{Group: "Readiness engine", Name: "leafsync_member_flap_penalty", Kind: Gauge,
		Help:   "Flap-damping penalty of a member (RFC 2439 style: grows per flap, decays with the half-life; above `suppress` the leaf is cordoned).",
		Labels: []string{"cluster"}})
	FlapsSuppressed = spec(Spec{Group: "Readiness engine", Name: "leafsync_member_flaps_suppressed_total", Kind: Counter,
		Help:   "Failures of a member that ended before notReadyAfter: flaps that did not make the leaf NotReady.",
		Labels: []string{"cluster"}})
	transitions = spec(Spec{Group: "Readiness engine", Name: "leafsync_member_transitions_total", Kind: Counter,
		Help:   "State transitions of a member's readiness decision.",
		Labels: []string{"cluster", "from", "to"}})
	stateSeconds = spec(Spec{Group: "Readiness engine", Name: "leafsync_member_state_seconds_total", Kind: Counter,
		Help:   "Time a member has spent in each state.",
		Labels: []string{"cluster", "state"}})
	MassDisconnect = spec(Spec{Group: "Readiness engine", Name: "leafsync_mass_disconnect_active", Kind: Gauge,
		Help: "1 while the mass-disconnect guard holds: so many members fail at once that the fault is most likely leafsync's own; a failing member is kept out of NotReady for at most massHoldMax, then released one per massReleaseInterval."})
	BreakerState = spec(Spec{Group: "Circuit breakers", Name: "leafsync_breaker_state", Kind: Gauge,
		Help:   "State of a member's circuit breaker: 0 closed, 1 half-open, 2 open (calls fail fast).",
		Labels: []string{"cluster"}})
	breakerTransitions = spec(Spec{Group: "Circuit breakers", Name: "leafsync_breaker_transitions_total", Kind: Counter,
		Help:   "Circuit-breaker state changes of a member, by the state entered.",
		Labels: []string{"cluster", "to"}})
	BreakerRejected = spec(Spec{Group: "Circuit breakers", Name: "leafsync_breaker_rejected_total", Kind: Counter,
		Help:   "Calls to a member failed fast by its open circuit breaker, without network traffic.",
		Labels: []string{"cluster"}})
	registrationProblem = spec(Spec{Group: "Registration", Name: "leafsync_registration_problem", Kind: Gauge,
		Help:   "1 while a registration Secret has a problem a person should look at (refused kubeconfig, unreachable, TLS, auth); the reason label says which.",
		Labels: []string{"cluster", "reason"}})
)

// Clock steps of the readiness engine, read at scrape time like the other
// engine metrics (see StateCollector).
var (
	clockSteps = spec(Spec{Group: "Clocks", Name: "leafsync_member_clock_steps_total", Kind: Counter,
		Help:   "Steps of the wall clock seen between two probes of a member: leafsync's clock stepped (measured against its monotonic clock), or its saved state came from a leader whose clock ran ahead. No probe is dropped: the member's readiness times move with the step; a Warning Event ClockStepped on the registration Secret says by how much.",
		Labels: []string{"cluster"}})
)

var all []Spec

func spec(s Spec) Spec {
	all = append(all, s)
	return s
}

// allSpecs returns every metric leafsync exports, in declaration order.
func allSpecs() []Spec { return append([]Spec(nil), all...) }

// Recorders of event-driven metrics.
var (
	ProbeResultsVec         = counterVec(ProbeResults)
	ProbeDurationVec        = histogramVec(ProbeDuration)
	LeaseRenewalLagVec      = histogramVec(LeaseRenewalLag)
	LeaseRenewalFailuresVec = counterVec(LeaseRenewalFailures)
	LeafWritesVec           = counterVec(LeafWrites)
	LeafAllocatableVec      = gaugeVec(LeafAllocatable)
	SyncedPodsVec           = gaugeVec(SyncedPods)
	PodDeletesVec           = counterVec(PodDeletes)
	PendingDeletesVec       = gaugeVec(OwedDeletes)
	PodSyncDurationVec      = histogramVec(PodSyncDuration)
	StoreWriteDurationVec   = histogramVec(storeWriteDuration)
	StoreWriteErrorsVec     = counterVec(StoreWriteErrors)
	EvictionGuardGauge      = prometheus.NewGauge(prometheus.GaugeOpts{Name: EvictionGuardActive.Name, Help: EvictionGuardActive.Help})
	EvictionsRefusedVec     = counterVec(EvictionsRefused)
	EvictionsCompletedVec   = counterVec(EvictionsCompleted)
	KubeletAPIRequestsVec   = counterVec(KubeletAPIRequests)
)

// NewStorePendingWrites is the pending-writes gauge, read from pending at
// scrape time (the Keeper's queue).
func NewStorePendingWrites(pending func() int) prometheus.GaugeFunc {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: StorePendingWrites.Name, Help: StorePendingWrites.Help},
		func() float64 { return float64(pending()) })
}

func counterVec(s Spec) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: s.Name, Help: s.Help}, s.Labels)
}

func gaugeVec(s Spec) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: s.Name, Help: s.Help}, s.Labels)
}

func histogramVec(s Spec) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: s.Name, Help: s.Help, Buckets: s.Buckets}, s.Labels)
}

// Register adds every event-driven metric to reg.
func Register(reg prometheus.Registerer) error {
	for _, c := range append([]prometheus.Collector{
		ProbeResultsVec, ProbeDurationVec, LeaseRenewalLagVec, LeaseRenewalFailuresVec,
		LeafWritesVec, LeafAllocatableVec, SyncedPodsVec, PodDeletesVec, PendingDeletesVec,
		PodSyncDurationVec, StoreWriteDurationVec, StoreWriteErrorsVec,
		EvictionGuardGauge, EvictionsRefusedVec, EvictionsCompletedVec, KubeletAPIRequestsVec,
	}, verificationCollectors()...) {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	for verb, answer := range KubeletAPISuccess {
		KubeletAPIRequestsVec.WithLabelValues(verb, answer)
	}
	return nil
}

// InitCluster creates a member's series at zero, so that dashboards and
// alerts see every member from its registration on, not from its first event.
func InitCluster(cluster string) {
	for _, r := range probeResultValues {
		ProbeResultsVec.WithLabelValues(cluster, r)
	}
	ProbeDurationVec.WithLabelValues(cluster)
	LeaseRenewalLagVec.WithLabelValues(cluster)
	LeaseRenewalFailuresVec.WithLabelValues(cluster)
	LeafWritesVec.WithLabelValues(cluster)
	SyncedPodsVec.WithLabelValues(cluster)
	EvictionsRefusedVec.WithLabelValues(cluster)
	EvictionsCompletedVec.WithLabelValues(cluster)
	for _, c := range deleteCauses {
		for _, o := range DeleteOutcomes {
			PodDeletesVec.WithLabelValues(cluster, c, o)
		}
	}
	for _, k := range pendingDeleteKinds {
		PendingDeletesVec.WithLabelValues(cluster, k)
	}
	PodSyncDurationVec.WithLabelValues(cluster)
}

// InitStore creates the state store's series at zero for a backend.
func InitStore(backend string) {
	StoreWriteDurationVec.WithLabelValues(backend)
	for _, r := range storeErrorReasons {
		StoreWriteErrorsVec.WithLabelValues(backend, r)
	}
}

// ForgetCluster drops a deregistered cluster's series, so that a removed
// member does not linger on dashboards.
func ForgetCluster(cluster string) {
	for _, v := range []interface {
		DeletePartialMatch(prometheus.Labels) int
	}{ProbeResultsVec, ProbeDurationVec, LeaseRenewalLagVec, LeaseRenewalFailuresVec, LeafWritesVec,
		LeafAllocatableVec, SyncedPodsVec, PodDeletesVec, PendingDeletesVec, PodSyncDurationVec,
		EvictionsRefusedVec, EvictionsCompletedVec,
		VerificationsVec, VerificationDurationVec, VerificationFailedChecksVec, MemberVerifiedVec} {
		v.DeletePartialMatch(prometheus.Labels{"cluster": cluster})
	}
}
