//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leafsync/leafsync/test/harness"
)

// leader is the identity holding leafsync's leader-election Lease.
func (f *fleet) leader(ctx context.Context) (string, error) {
	l, err := f.host.Client().CoordinationV1().Leases(leafsyncNamespace).Get(ctx, "leafsync-leader", metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
		return "", fmt.Errorf("no holder")
	}
	return *l.Spec.HolderIdentity, nil
}

// TestLeaderHandover kills the leader replica: the standby takes over the
// leaf's heartbeat within one leader-lease duration, and the leaf never
// leaves Ready (KCM's grace period is 8s).
func TestLeaderHandover(t *testing.T) {
	f := newFleet(t, harness.HostOptions{}, harness.MemberOptions{Name: "member-a", Nodes: 1})
	ctx := context.Background()
	leader := func() (string, error) { return f.leader(ctx) }

	first := f.startLeafsync(t, "leafsync-a", "--leader-elect")
	var firstID string
	harness.Eventually(t, 30*time.Second, "first replica leads", func() (err error) {
		firstID, err = leader()
		return err
	})
	f.startLeafsync(t, "leafsync-b", "--leader-elect")
	f.register(t, "member-a", nil)
	const leaf = "leaf-member-a"
	f.waitLeafReady(t, leaf, time.Minute)

	rec := recordNode(t, f.host, leaf)
	first.Kill()
	killed := time.Now()
	harness.Eventually(t, 20*time.Second, "second replica leads", func() error {
		id, err := leader()
		if err != nil {
			return err
		}
		if id == firstID {
			return fmt.Errorf("still led by the killed replica %s", id)
		}
		return nil
	})
	t.Logf("standby took the lead %s after the leader was killed", time.Since(killed).Round(time.Millisecond))
	renewed := time.Now()
	harness.Eventually(t, 10*time.Second, "new leader renews the leaf Lease", func() error {
		l, err := f.lease(leaf)
		if err != nil {
			return err
		}
		if !l.Spec.RenewTime.After(renewed) {
			return fmt.Errorf("renewTime %s", l.Spec.RenewTime)
		}
		return nil
	})
	// Leave KCM two grace periods to notice a gap, if there was one.
	time.Sleep(2 * harness.DefaultTestTimings.NodeMonitorGracePeriod)
	obs := rec.observations(t)
	for _, o := range obs {
		if o.ready != corev1.ConditionTrue {
			t.Fatalf("leaf Ready=%s at %s during the leader handover", o.ready, o.at.Format(time.StampMilli))
		}
		if hasTaint(o.node, corev1.TaintNodeUnreachable, corev1.TaintEffectNoSchedule) {
			t.Fatalf("KCM tainted the leaf unreachable during the handover: %v", o.node.Spec.Taints)
		}
	}
	t.Logf("%d versions of the leaf watched through the handover; Ready=True in all", len(obs))
}
