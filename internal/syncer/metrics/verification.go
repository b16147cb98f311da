package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Specs of verification (internal/syncer/verify): is a member fit to
// receive new pods.
var (
	Verifications = spec(Spec{Group: "Verification", Name: "leafsync_verifications_total", Kind: Counter,
		Help:   "Verification runs of a member by result: verified (every check passed or was skipped), failed (a check failed), inconclusive (a check could not run; retried).",
		Labels: []string{"cluster", "result"}})
	VerificationDuration = spec(Spec{Group: "Verification", Name: "leafsync_verification_duration_seconds", Kind: Histogram,
		Help:   "Time one verification run of a member took, the canary pod included.",
		Labels: []string{"cluster"}, Buckets: verificationBuckets})
	VerificationFailedChecks = spec(Spec{Group: "Verification", Name: "leafsync_verification_failed_checks_total", Kind: Counter,
		Help:   "Failed checks of verification runs, by check: rights, capacity, canary.",
		Labels: []string{"cluster", "check"}})
	MemberVerified = spec(Spec{Group: "Verification", Name: "leafsync_member_verified", Kind: Gauge,
		Help:   "1 while a member is verified to run new pods, 0 while its leaf carries leafsync.io/unverified:NoSchedule after a conclusive run (no series before the first).",
		Labels: []string{"cluster"}})
)

// A run is a few API calls (milliseconds) or a canary pod (seconds to minutes).
var verificationBuckets = []float64{0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 120, 300}

var (
	verificationResults = []string{"verified", "failed", "inconclusive"}
	verificationChecks  = []string{"rights", "capacity", "canary"}
)

// Recorders of verification.
var (
	VerificationsVec            = counterVec(Verifications)
	VerificationDurationVec     = histogramVec(VerificationDuration)
	VerificationFailedChecksVec = counterVec(VerificationFailedChecks)
	MemberVerifiedVec           = gaugeVec(MemberVerified)
)

// verificationCollectors are registered by Register.
func verificationCollectors() []prometheus.Collector {
	return []prometheus.Collector{VerificationsVec, VerificationDurationVec, VerificationFailedChecksVec, MemberVerifiedVec}
}

// ObserveVerification records one verification run of a member.
func ObserveVerification(cluster, result string, took time.Duration, failedChecks []string) {
	for _, r := range verificationResults {
		VerificationsVec.WithLabelValues(cluster, r)
	}
	for _, c := range verificationChecks {
		VerificationFailedChecksVec.WithLabelValues(cluster, c)
	}
	VerificationsVec.WithLabelValues(cluster, result).Inc()
	VerificationDurationVec.WithLabelValues(cluster).Observe(took.Seconds())
	for _, c := range failedChecks {
		VerificationFailedChecksVec.WithLabelValues(cluster, c).Inc()
	}
}

// SetVerified records whether a member is verified after a conclusive run.
func SetVerified(cluster string, verified bool) {
	v := 0.0
	if verified {
		v = 1
	}
	MemberVerifiedVec.WithLabelValues(cluster).Set(v)
}
