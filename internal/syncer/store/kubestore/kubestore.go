// Package kubestore is the state store backend kept in the host cluster:
// one ConfigMap per record in leafsync's namespace (<prefix><record>: a
// member's head leafsync-state-<cluster>, its ledger parts
// leafsync-state-<cluster>.ledger-<i>), labelled with the member, holding
// the record as JSON (gzip-compressed into binaryData when large). Writes
// are conditional on the resourceVersion read. A ConfigMap named
// <prefix>writer.term holds the writer term. It needs nothing but RBAC on
// ConfigMaps in leafsync's own namespace: get, list, create, update, delete.
package kubestore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/leafsync/leafsync/internal/syncer/store"
)

// Labels and keys of state ConfigMaps.
const (
	// LabelComponent marks every object of the store.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelComponent = "app.kubernetes.io/component"
	ComponentState = "leafsync-state"
	// LabelCluster holds the member cluster a record belongs to.
	LabelCluster = "leafsync.io/state-of"
	// labelTerm marks the term object.
	labelTerm = "leafsync.io/state-term"
	// KeyState holds the record as JSON; keyStateGzip as gzip-compressed
	// JSON in binaryData (large records).
	KeyState     = "state.json"
	keyStateGzip = "state.json.gz"
	keyTerm      = "term"
	// DefaultPrefix is the default object name prefix.
	DefaultPrefix = "leafsync-state-"
)

// Store keeps records in ConfigMaps of one namespace.
type Store struct {
	client    kubernetes.Interface
	namespace string
	prefix    string
}

// New returns a Store over ConfigMaps in namespace named prefix+cluster. The
// client should not share its rate limiter with latency-sensitive writers.
func New(client kubernetes.Interface, namespace, prefix string) (*Store, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if err := validatePrefix(prefix); err != nil {
		return nil, err
	}
	return &Store{client: client, namespace: namespace, prefix: prefix}, nil
}

// validatePrefix checks that prefix+<any cluster name> is a valid object
// name (a cluster name is a DNS-1123 label of up to 63 characters).
func validatePrefix(prefix string) error {
	longest := store.PartName(strings.Repeat("a", validation.DNS1123LabelMaxLength), 9999)
	if msgs := validation.IsDNS1123Subdomain(prefix + longest); len(msgs) > 0 {
		return fmt.Errorf("object name prefix %q does not make valid ConfigMap names: %s", prefix, strings.Join(msgs, "; "))
	}
	return nil
}

// Backend implements store.Store.
func (s *Store) Backend() string { return "kube" }

// Name is the ConfigMap name of a record (a cluster's head, or a ledger
// part).
func (s *Store) Name(record string) string { return s.prefix + record }

// TermName is the ConfigMap name of the writer term (a cluster name has no
// dot, so no cluster's record can have it).
func (s *Store) TermName() string { return s.prefix + "writer.term" }

func (s *Store) cms() typedcorev1.ConfigMapInterface {
	return s.client.CoreV1().ConfigMaps(s.namespace)
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, record string) (store.ClusterState, store.Version, error) {
	cm, err := s.cms().Get(ctx, s.Name(record), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return store.ClusterState{}, "", store.ErrNotFound
	}
	if err != nil {
		return store.ClusterState{}, "", wrap(err)
	}
	st, err := s.decode(cm, record)
	return st, store.Version(cm.ResourceVersion), err
}

func (s *Store) decode(cm *corev1.ConfigMap, record string) (store.ClusterState, error) {
	if cluster := store.ClusterOf(record); cm.Labels[LabelCluster] != cluster || cm.Labels[LabelComponent] != ComponentState {
		return store.ClusterState{}, fmt.Errorf("ConfigMap %s/%s exists but is not leafsync's state record of cluster %s (labels %s=%s, %s=%s missing); rename or delete it",
			s.namespace, cm.Name, cluster, LabelComponent, ComponentState, LabelCluster, cluster)
	}
	var data []byte
	if b, ok := cm.BinaryData[keyStateGzip]; ok {
		data = b
	} else {
		data = []byte(cm.Data[KeyState])
	}
	st, err := store.Decode(data)
	if err != nil {
		return st, fmt.Errorf("ConfigMap %s/%s: %w", s.namespace, cm.Name, err)
	}
	return st, nil
}

func (s *Store) object(record string, st store.ClusterState, v store.Version) (*corev1.ConfigMap, error) {
	data, compressed, err := store.Encode(st)
	if err != nil {
		return nil, err
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: s.Name(record), Namespace: s.namespace, ResourceVersion: string(v),
			Labels: map[string]string{LabelManagedBy: "leafsync", LabelComponent: ComponentState, LabelCluster: store.ClusterOf(record)},
		},
	}
	if compressed {
		cm.BinaryData = map[string][]byte{keyStateGzip: data}
	} else {
		cm.Data = map[string]string{KeyState: string(data)}
	}
	return cm, nil
}

// Put implements store.Store: Create when v is "", otherwise Update with
// resourceVersion v.
func (s *Store) Put(ctx context.Context, record string, st store.ClusterState, v store.Version) (store.Version, error) {
	cm, err := s.object(record, st, v)
	if err != nil {
		return "", err
	}
	var out *corev1.ConfigMap
	if v == "" {
		out, err = s.cms().Create(ctx, cm, metav1.CreateOptions{FieldManager: "leafsync"})
	} else {
		out, err = s.cms().Update(ctx, cm, metav1.UpdateOptions{FieldManager: "leafsync"})
	}
	switch {
	case apierrors.IsAlreadyExists(err), apierrors.IsConflict(err), apierrors.IsNotFound(err) && v != "":
		return "", fmt.Errorf("%w (ConfigMap %s/%s)", store.ErrConflict, s.namespace, cm.Name)
	case err != nil:
		return "", wrap(err)
	}
	return store.Version(out.ResourceVersion), nil
}

// Delete implements store.Store, with a resourceVersion precondition.
func (s *Store) Delete(ctx context.Context, record string, v store.Version) error {
	name := s.Name(record)
	if v == "" {
		// Delete only if absent: a record we never read is not ours to drop.
		_, err := s.cms().Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return wrap(err)
		}
		return fmt.Errorf("%w (ConfigMap %s/%s exists)", store.ErrConflict, s.namespace, name)
	}
	rv := string(v)
	err := s.cms().Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		return fmt.Errorf("%w (ConfigMap %s/%s)", store.ErrConflict, s.namespace, name)
	case err != nil:
		return wrap(err)
	}
	return nil
}

// Scan implements store.Store: one paginated List by label.
func (s *Store) Scan(ctx context.Context) ([]store.Record, error) {
	return s.list(ctx, labels.SelectorFromSet(labels.Set{LabelComponent: ComponentState}).String()+","+LabelCluster, "")
}

// List implements store.Store: one List by the cluster's label.
func (s *Store) List(ctx context.Context, cluster string) ([]store.Record, error) {
	return s.list(ctx, labels.SelectorFromSet(labels.Set{LabelComponent: ComponentState, LabelCluster: cluster}).String(), cluster)
}

// list reads the records a selector finds (of one cluster, or of all for
// cluster "").
func (s *Store) list(ctx context.Context, sel, cluster string) ([]store.Record, error) {
	var out []store.Record
	opts := metav1.ListOptions{LabelSelector: sel, Limit: 500}
	for {
		list, err := s.cms().List(ctx, opts)
		if err != nil {
			return nil, wrap(err)
		}
		for i := range list.Items {
			cm := &list.Items[i]
			record := strings.TrimPrefix(cm.Name, s.prefix)
			of := store.ClusterOf(record)
			if !strings.HasPrefix(cm.Name, s.prefix) || of != cm.Labels[LabelCluster] || !store.RecordOf(record, of) || (cluster != "" && of != cluster) {
				continue // another prefix's record
			}
			st, err := s.decode(cm, record)
			out = append(out, store.Record{Name: record, Cluster: of, State: st, Version: store.Version(cm.ResourceVersion), Err: err})
		}
		if list.Continue == "" {
			return out, nil
		}
		opts.Continue = list.Continue
	}
}

// Term implements store.Store.
func (s *Store) Term(ctx context.Context) (uint64, error) {
	t, _, err := s.term(ctx)
	return t, err
}

func (s *Store) term(ctx context.Context) (uint64, *corev1.ConfigMap, error) {
	cm, err := s.cms().Get(ctx, s.TermName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, wrap(err)
	}
	t, err := strconv.ParseUint(cm.Data[keyTerm], 10, 64)
	if err != nil {
		return 0, nil, fmt.Errorf("ConfigMap %s/%s: bad term %q", s.namespace, cm.Name, cm.Data[keyTerm])
	}
	return t, cm, nil
}

// NextTerm implements store.Store: a conditional increment, retried on
// conflict.
func (s *Store) NextTerm(ctx context.Context) (uint64, error) {
	for {
		t, cm, err := s.term(ctx)
		if err != nil {
			return 0, err
		}
		next := strconv.FormatUint(t+1, 10)
		if cm == nil {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
				Name: s.TermName(), Namespace: s.namespace,
				Labels: map[string]string{LabelManagedBy: "leafsync", LabelComponent: ComponentState, labelTerm: "true"},
			}, Data: map[string]string{keyTerm: next}}
			_, err = s.cms().Create(ctx, cm, metav1.CreateOptions{FieldManager: "leafsync"})
		} else {
			cm.Data = map[string]string{keyTerm: next}
			_, err = s.cms().Update(ctx, cm, metav1.UpdateOptions{FieldManager: "leafsync"})
		}
		switch {
		case apierrors.IsAlreadyExists(err), apierrors.IsConflict(err):
			if ctx.Err() != nil {
				return 0, wrap(ctx.Err())
			}
			continue
		case err != nil:
			return 0, wrap(err)
		}
		return t + 1, nil
	}
}

// wrap marks errors that mean "not reachable / not now" as
// store.ErrUnavailable (retried with backoff, reported as unavailable).
func wrap(err error) error {
	var netErr net.Error
	switch {
	case err == nil:
		return nil
	case apierrors.IsServerTimeout(err), apierrors.IsTimeout(err), apierrors.IsTooManyRequests(err),
		apierrors.IsServiceUnavailable(err), apierrors.IsInternalError(err),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled), errors.As(err, &netErr):
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return err
}

var _ store.Store = (*Store)(nil)
