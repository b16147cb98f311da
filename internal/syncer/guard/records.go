package guard

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// fieldManager owns the readiness records' fields (server-side apply).
const fieldManager = "leafsync-eviction-guard"

// RecordName is the name of a member's readiness record.
func RecordName(cluster string) string { return "leafsync-guard-" + cluster }

// Records writes the per-member readiness records the policy reads. It is
// the one writer of those ConfigMaps; it writes only when a record's leaf
// or state changes.
type Records struct {
	Client    kubernetes.Interface
	Namespace string
	// Clock times the refresh of unchanged records (nil: the real clock).
	Clock clock.PassiveClock

	mu      sync.Mutex
	written map[string]record
}

type record struct {
	leaf, state string
	since       time.Time
	userTaints  string    // KeyUserNoExecute's value
	at          time.Time // when written; zero: not written yet
}

// refreshEvery rewrites an unchanged record now and then, so that one
// deleted by hand comes back.
const refreshEvery = 5 * time.Minute

func (r *Records) clock() clock.PassiveClock {
	if r.Clock != nil {
		return r.Clock
	}
	return clock.RealClock{}
}

// Set records that cluster's leaf is in state since a time. The leaves
// controller calls it before it writes the leaf, so the record says
// NotReady before KCM can see the leaf NotReady and start evicting.
func (r *Records) Set(ctx context.Context, cluster, leaf, state string, since time.Time) error {
	r.mu.Lock()
	last, ok := r.written[cluster]
	r.mu.Unlock()
	if ok && !last.at.IsZero() && last.leaf == leaf && last.state == state && r.clock().Since(last.at) < refreshEvery {
		return nil
	}
	rec := record{leaf: leaf, state: state, since: since}
	if ok && last.leaf == leaf {
		rec.userTaints = last.userTaints
	}
	return r.write(ctx, cluster, rec)
}

// SetUserTaints records the NoExecute taints on a leaf that node
// lifecycle did not set (its user's), so that the policy lets the taint
// manager's evictions for them through. It writes only when they changed
// and the member's state is known (Set writes them with the state).
func (r *Records) SetUserTaints(ctx context.Context, cluster, leaf string, taints []corev1.Taint) error {
	var kv []string
	for _, t := range taints {
		if t.Effect == corev1.TaintEffectNoExecute && t.Key != corev1.TaintNodeUnreachable && t.Key != corev1.TaintNodeNotReady {
			kv = append(kv, t.Key+"="+t.Value)
		}
	}
	user := strings.Join(kv, ",")
	r.mu.Lock()
	if r.written == nil {
		r.written = map[string]record{}
	}
	last, ok := r.written[cluster]
	switch {
	case ok && last.leaf == leaf && last.userTaints == user:
		r.mu.Unlock()
		return nil
	case !ok || last.leaf != leaf || last.at.IsZero():
		// No state written yet: Set writes the taints with it.
		r.written[cluster] = record{leaf: leaf, userTaints: user}
		r.mu.Unlock()
		return nil
	}
	r.mu.Unlock()
	last.userTaints = user
	return r.write(ctx, cluster, last)
}

// write applies a member's record and remembers it.
func (r *Records) write(ctx context.Context, cluster string, rec record) error {
	data := map[string]string{keyCluster: cluster, KeyLeaf: rec.leaf, KeyState: rec.state}
	if !rec.since.IsZero() {
		data[keySince] = rec.since.UTC().Format(time.RFC3339)
	}
	if rec.userTaints != "" {
		data[KeyUserNoExecute] = rec.userTaints
	}
	cm := corev1ac.ConfigMap(RecordName(cluster), r.Namespace).
		WithLabels(map[string]string{ParamLabel: ParamLabelValue, "app.kubernetes.io/name": "leafsync"}).
		WithData(data)
	if _, err := r.Client.CoreV1().ConfigMaps(r.Namespace).Apply(ctx, cm, metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
		return fmt.Errorf("writing eviction-guard record %s/%s: %w", r.Namespace, RecordName(cluster), err)
	}
	rec.at = r.clock().Now()
	r.mu.Lock()
	if r.written == nil {
		r.written = map[string]record{}
	}
	r.written[cluster] = rec
	r.mu.Unlock()
	return nil
}

// Forget deletes a deregistered member's record: its leaf is gone, so
// there is nothing left to guard.
func (r *Records) Forget(ctx context.Context, cluster string) error {
	r.mu.Lock()
	delete(r.written, cluster)
	r.mu.Unlock()
	err := r.Client.CoreV1().ConfigMaps(r.Namespace).Delete(ctx, RecordName(cluster), metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
