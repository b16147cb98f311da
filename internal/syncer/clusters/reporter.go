package clusters

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/leafsync/leafsync/internal/syncer/registration"
)

// reporter writes what the Registry knows of a registration onto its
// Secret: the status annotations, and an Event when the phase or reason
// changes, and a warning about annotations nothing reads. Writes driven by
// the connection are spaced by interval, so a flapping link does not turn
// into a stream of writes and Events. It is used from the controller's
// single worker only, so it needs no lock.
type reporter struct {
	client   client.Client
	reg      *Registry
	recorder events.EventRecorder
	interval time.Duration
	clock    clock.PassiveClock
	// may (nil: always) says whether this replica writes the Secret
	// (sharding).
	may func(*corev1.Secret) bool

	// lastWrite is when each Secret's status annotations were last written.
	lastWrite map[types.NamespacedName]time.Time
	// unknownReported is the unknown-annotation list last reported per Secret.
	unknownReported map[types.NamespacedName]string
}

func newReporter(c client.Client, reg *Registry, recorder events.EventRecorder, interval time.Duration, clk clock.PassiveClock) *reporter {
	return &reporter{client: c, reg: reg, recorder: recorder, interval: interval, clock: clk,
		lastWrite: map[types.NamespacedName]time.Time{}, unknownReported: map[types.NamespacedName]string{}}
}

// writeStatus brings the Secret's status annotations in line with the
// registry. A RequeueAfter asks to come back when the next write is due.
func (w *reporter) writeStatus(ctx context.Context, s *corev1.Secret) (reconcile.Result, error) {
	key := client.ObjectKeyFromObject(s)
	st, ok := w.reg.currentStatus(s.Labels[registration.LabelCluster], key)
	if !ok || !w.allowed(s) {
		return reconcile.Result{}, nil
	}
	msg := truncate(st.Message, 1000)
	if st.Reason == reasonConnecting {
		switch Phase(s.Annotations[registration.AnnotationStatus]) {
		case phaseConnected, phaseUnreachable, phaseUnauthorized, phaseMisconfigured:
			// leafsync restarted: keep the last known connection state
			// until the first probe says otherwise (no write, no Event).
			return reconcile.Result{}, nil
		}
	}
	if s.Annotations[registration.AnnotationStatus] == string(st.Phase) &&
		s.Annotations[registration.AnnotationStatusReason] == st.Reason &&
		// Connection messages carry changing error details; only a
		// refusal's message is worth a write of its own.
		(st.Phase != phaseRefused || s.Annotations[registration.AnnotationStatusMessage] == msg) {
		return reconcile.Result{}, nil
	}
	if last, ok := w.lastWrite[key]; ok {
		if wait := w.interval - w.clock.Since(last); wait > 0 {
			return reconcile.Result{RequeueAfter: wait}, nil
		}
	}
	orig := s.DeepCopy()
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[registration.AnnotationStatus] = string(st.Phase)
	s.Annotations[registration.AnnotationStatusReason] = st.Reason
	s.Annotations[registration.AnnotationStatusMessage] = msg
	s.Annotations[registration.AnnotationStatusTime] = st.Since.UTC().Format(time.RFC3339)
	if err := w.client.Patch(ctx, s, client.MergeFrom(orig)); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	w.lastWrite[key] = w.clock.Now()
	eventType := corev1.EventTypeNormal
	if st.Warning() {
		eventType = corev1.EventTypeWarning
	}
	w.event(s, eventType, st.Reason, actionFor(st.Phase), msg)
	return reconcile.Result{}, nil
}

// unknownAnnotations warns once per change about leafsync.io/
// annotations nothing reads (most likely misspelt).
func (w *reporter) unknownAnnotations(s *corev1.Secret) {
	if !w.allowed(s) {
		return
	}
	key := client.ObjectKeyFromObject(s)
	unknown := registration.UnknownAnnotations(s.Annotations)
	joined := strings.Join(unknown, ",")
	if w.unknownReported[key] == joined {
		return
	}
	w.unknownReported[key] = joined
	if len(unknown) == 0 {
		return
	}
	w.event(s, corev1.EventTypeWarning, reasonUnknownAnnotation, "Register", fmt.Sprintf(
		"annotations %s are not read by leafsync (misspelt?); see docs/annotations.md for the supported ones", joined))
}

var statusAnnotations = []string{
	registration.AnnotationStatus, registration.AnnotationStatusReason,
	registration.AnnotationStatusMessage, registration.AnnotationStatusTime,
	registration.AnnotationMemberIdentity,
}

// clearStatus removes the status annotations and the recorded member
// identity (the Secret no longer registers anything). Each is removed
// whether or not s, as read, still has it: an identity recorded just
// before may not have reached the cache yet.
func (w *reporter) clearStatus(ctx context.Context, s *corev1.Secret) error {
	remove := map[string]*string{}
	for _, k := range statusAnnotations {
		remove[k] = nil
	}
	patch, err := AnnotationPatch(s.UID, remove)
	if err != nil {
		return err
	}
	return w.client.Patch(ctx, s, patch)
}

func (w *reporter) allowed(s *corev1.Secret) bool { return w.may == nil || w.may(s) }

// forget drops what the reporter keeps about a Secret.
func (w *reporter) forget(key types.NamespacedName) {
	delete(w.lastWrite, key)
	delete(w.unknownReported, key)
}

func (w *reporter) event(s *corev1.Secret, eventType, reason, action, msg string) {
	w.recorder.Eventf(s, nil, eventType, reason, action, "%s", truncate(msg, 1000))
}

func actionFor(p Phase) string {
	switch p {
	case phaseRefused, PhaseDuplicate:
		return "Register"
	case phaseTerminating:
		return "Deregister"
	default:
		return "Connect"
	}
}

// truncate keeps messages within what Events and annotations hold well.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
