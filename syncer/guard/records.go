package guard

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
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

	mu      sync.Mutex
	written map[string]record
}

type record struct {
	leaf, state string
	at          time.Time
}

// refreshEvery rewrites an unchanged record now and then, so that one
// deleted by hand comes back.
const refreshEvery = 5 * time.Minute

// Set records that cluster's leaf is in state since a time. The leaves
// controller calls it before it writes the leaf, so the record says
// NotReady before KCM can see the leaf NotReady and start evicting.
func (r *Records) Set(ctx context.Context, cluster, leaf, state string, since time.Time) error {
	r.mu.Lock()
	last, ok := r.written[cluster]
	r.mu.Unlock()
	if ok && last.leaf == leaf && last.state == state && time.Since(last.at) < refreshEvery {
		return nil
	}
	data := map[string]string{KeyCluster: cluster, KeyLeaf: leaf, KeyState: state}
	if !since.IsZero() {
		data[KeySince] = since.UTC().Format(time.RFC3339)
	}
	cm := corev1ac.ConfigMap(RecordName(cluster), r.Namespace).
		WithLabels(map[string]string{ParamLabel: ParamLabelValue, "app.kubernetes.io/name": "leafsync"}).
		WithData(data)
	if _, err := r.Client.CoreV1().ConfigMaps(r.Namespace).Apply(ctx, cm, metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
		return fmt.Errorf("writing eviction-guard record %s/%s: %w", r.Namespace, RecordName(cluster), err)
	}
	r.mu.Lock()
	if r.written == nil {
		r.written = map[string]record{}
	}
	r.written[cluster] = record{leaf, state, time.Now()}
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
