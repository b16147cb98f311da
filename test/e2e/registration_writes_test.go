//go:build e2e

package e2e

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leafsync/leafsync/test/harness"
)

// auditSecretWrites records every write to the Secrets of leafsync's
// namespace, with its response code.
const auditSecretWrites = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete"]
  namespaces: ["` + leafsyncNamespace + `"]
  resources:
  - group: ""
    resources: ["secrets"]
- level: None
`

// TestRegistrationWritesNoConflict: the writers of a registration Secret
// (finalizer, status, member identity, verification) never write on a
// stale read and have it refused: no write to the Secret gets a 409
// Conflict, so none waits a probe interval to be tried again. A refused
// identity write held a lone registration 5s between "member registered"
// and "member identity recorded" (bench-scale, probe interval 5s).
// Registration → identity recorded and → leaf Ready are logged as figures.
func TestRegistrationWritesNoConflict(t *testing.T) {
	f := newFleet(t, harness.HostOptions{AuditPolicy: auditSecretWrites},
		harness.MemberOptions{Name: "member-a", Nodes: 1}, harness.MemberOptions{Name: "member-b", Nodes: 1})
	f.startLeafsync(t, "leafsync")
	// A first member, so that the one measured registers alone into a
	// running leafsync (which knows its host's identity by then).
	f.register(t, "member-a", nil)
	f.waitLeafReady(t, "leaf-member-a", time.Minute)
	// A slow host link, as on a loaded host: leafsync's cache of the
	// Secret lags its writes by this much.
	if err := f.hostProxy.Latency(300*time.Millisecond, 0); err != nil {
		t.Fatal(err)
	}
	const leaf, secret = "leaf-member-b", "member-member-b"
	start := time.Now()
	f.register(t, "member-b", nil)

	var identityAt, readyAt time.Duration
	harness.Eventually(t, 2*time.Minute, "identity recorded and leaf Ready", func() error {
		ctx := context.Background()
		if identityAt == 0 {
			s, err := f.host.Client().CoreV1().Secrets(leafsyncNamespace).Get(ctx, secret, metav1.GetOptions{})
			if err == nil && s.Annotations[annMemberIdentity] != "" {
				identityAt = time.Since(start)
			}
		}
		if readyAt == 0 {
			n, err := f.host.Client().CoreV1().Nodes().Get(ctx, leaf, metav1.GetOptions{})
			if err == nil && harness.NodeReady(n) == corev1.ConditionTrue {
				readyAt = time.Since(start)
			}
		}
		if identityAt == 0 || readyAt == 0 {
			return errNotYet
		}
		return nil
	})
	t.Logf("registration → identity recorded %.2fs, → leaf Ready %.2fs", identityAt.Seconds(), readyAt.Seconds())
	waitStatus(t, f, secret, "Connected", "MemberConnected", 30*time.Second)
	// Verification writes its verdict on the Secret too: let it.
	harness.Eventually(t, time.Minute, "verification verdict on the Secret", func() error {
		if getSecret(t, f, secret).Annotations[annVerified] == "" {
			return errNotYet
		}
		return nil
	})

	writes, err := f.host.AuditEvents(func(e harness.AuditEvent) bool {
		return e.ObjectRef.Resource == "secrets" && e.ObjectRef.Name == secret
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range writes {
		t.Logf("%s %s %d by %s (%s)", e.RequestReceived.Format(time.StampMilli), e.Verb, e.ResponseStatus.Code, e.User.Username, e.UserAgent)
		if e.ResponseStatus.Code == 409 {
			t.Errorf("%s of Secret %s at %s refused with a Conflict (a write on a stale read)", e.Verb, secret, e.RequestReceived.Format(time.StampMilli))
		}
	}
	if len(writes) == 0 {
		t.Error("no write to the Secret audited")
	}
}

// errNotYet: a condition polled by harness.Eventually does not hold yet.
var errNotYet = errors.New("not yet")
