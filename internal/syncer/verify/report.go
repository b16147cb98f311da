package verify

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/leafsync/leafsync/internal/leafnode"
	"github.com/leafsync/leafsync/internal/syncer/clusters"
	"github.com/leafsync/leafsync/internal/syncer/registration"
)

// Event reasons on the registration Secret. Each kind of result has its
// own: the events API folds events of one reason on one object into a
// series that keeps the first note.
const (
	ReasonVerified           = "MemberVerified"
	ReasonVerificationFailed = "VerificationFailed"
	ReasonVerificationLost   = "VerificationLost"
)

// report writes the verdict on the member's Secret (status annotations)
// and announces a change with an Event, once per change.
func (c *Controller) report(ctx context.Context, st *state, m clusters.Member, v Verdict, fp string) error {
	var s corev1.Secret
	if err := c.opts.Secrets.Get(ctx, m.Spec.Secret, &s); err != nil {
		return client.IgnoreNotFound(err)
	}
	if v.Phase == Pending {
		return nil // nothing conclusive to say yet
	}
	verified, summary := fmt.Sprint(v.Phase == Verified), truncate(v.Summary(), 1000)
	a := s.Annotations
	if a[registration.AnnotationVerified] != verified || a[registration.AnnotationVerifyFailed] != summary || a[registration.AnnotationVerifiedFor] != fp {
		var failed *string // nil removes the annotation
		if summary != "" {
			failed = &summary
		}
		patch, err := clusters.AnnotationPatch(s.UID, map[string]*string{
			registration.AnnotationVerified:     &verified,
			registration.AnnotationVerifiedFor:  &fp,
			registration.AnnotationVerifyTime:   ptr.To(c.opts.Clock.Now().UTC().Format(time.RFC3339)),
			registration.AnnotationVerifyFailed: failed,
		})
		if err == nil {
			err = c.opts.Secrets.Patch(ctx, &s, patch)
		}
		if err != nil {
			return fmt.Errorf("writing the verification result on Secret %s: %w", m.Spec.Secret, err)
		}
	}
	st.mu.Lock()
	announce := st.reported.Phase != v.Phase || st.reported.Summary() != v.Summary()
	st.reported = v
	st.mu.Unlock()
	if announce && c.opts.Recorder != nil {
		typ, reason, note := eventFor(m, v)
		c.opts.Recorder.Eventf(&s, nil, typ, reason, "Verify", "%s", truncate(note, 1000))
	}
	return nil
}

// eventFor says a verdict to people: what failed, what it does to the
// leaf, and what to do.
func eventFor(m clusters.Member, v Verdict) (typ, reason, note string) {
	taint := leafnode.TaintUnverified + ":NoSchedule"
	switch v.Phase {
	case Verified:
		return corev1.EventTypeNormal, ReasonVerified, fmt.Sprintf(
			"member %s is verified to run pods; its leaf %s takes new pods (%s removed)", m.Cluster(), m.Spec.LeafName, taint)
	case Cordoned:
		return corev1.EventTypeWarning, ReasonVerificationLost, fmt.Sprintf(
			"member %s was verified, but verification now fails: %s. Its leaf %s is cordoned (%s) and takes no new pods; pods on it keep running, and it stays Ready. Verification is retried with backoff",
			m.Cluster(), v.Summary(), m.Spec.LeafName, taint)
	}
	return corev1.EventTypeWarning, ReasonVerificationFailed, fmt.Sprintf(
		"member %s is not verified: %s. Its leaf %s keeps %s and takes no new pods until verification passes (retried with backoff)",
		m.Cluster(), v.Summary(), m.Spec.LeafName, taint)
}

// truncate keeps messages within what Events and annotations hold well.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
