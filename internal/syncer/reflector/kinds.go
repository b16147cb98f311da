package reflector

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	acorev1 "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
)

// Kind is one kind of host object reflected into members. Its methods are
// the only kind-specific code; the Reflector does the rest alike for all.
type Kind interface {
	// Name is the API kind ("ConfigMap").
	Name() string
	get(ctx context.Context, c kubernetes.Interface, namespace, name string) (metav1.Object, error)
	list(ctx context.Context, c kubernetes.Interface, selector string) ([]metav1.Object, error)
	delete(ctx context.Context, c kubernetes.Interface, namespace, name string, opts metav1.DeleteOptions) error
	// copyOf is the member copy wanted of host object o, with its
	// metadata (meta); notCopied says why o is never copied ("": it is).
	copyOf(o metav1.Object, meta metav1.ObjectMeta) (want metav1.Object, notCopied string)
	// apply writes want over the member's copy (resourceVersion as
	// precondition), server-side.
	apply(ctx context.Context, c kubernetes.Interface, want metav1.Object, resourceVersion string) (metav1.Object, error)
	create(ctx context.Context, c kubernetes.Interface, want metav1.Object) error
	sameContents(cur, want metav1.Object) bool
	// updatable: cur can be changed into want in place (not immutable,
	// same Secret type).
	updatable(cur, want metav1.Object) bool
}

// kinds are the kinds reflected, by name.
var kinds = map[string]Kind{"ConfigMap": configMaps{configMapCalls}, "Secret": secrets{secretCalls}, "Service": services{serviceCalls}}

// fieldManager is leafsync's name in managedFields.
const fieldManager = "leafsync"

var applyOptions = metav1.ApplyOptions{FieldManager: fieldManager, Force: true}

func isImmutable(p *bool) bool { return p != nil && *p }

// api is a kind's typed client in a namespace: the calls the Reflector
// makes, alike for every kind but in types.
type api[T metav1.Object, L any, AC any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Apply(ctx context.Context, ac AC, opts metav1.ApplyOptions) (T, error)
}

// calls implements a Kind's API calls on its typed client.
type calls[T metav1.Object, L any, AC any] struct {
	api   func(c kubernetes.Interface, namespace string) api[T, L, AC]
	items func(L) []metav1.Object
	// applyConfig is the apply configuration of a wanted copy.
	applyConfig func(want T, resourceVersion string) AC
}

func (k calls[T, L, AC]) get(ctx context.Context, c kubernetes.Interface, ns, name string) (metav1.Object, error) {
	return k.api(c, ns).Get(ctx, name, metav1.GetOptions{})
}

func (k calls[T, L, AC]) list(ctx context.Context, c kubernetes.Interface, selector string) ([]metav1.Object, error) {
	l, err := k.api(c, "").List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	return k.items(l), nil
}

func (k calls[T, L, AC]) delete(ctx context.Context, c kubernetes.Interface, ns, name string, opts metav1.DeleteOptions) error {
	return k.api(c, ns).Delete(ctx, name, opts)
}

func (k calls[T, L, AC]) apply(ctx context.Context, c kubernetes.Interface, want metav1.Object, rv string) (metav1.Object, error) {
	return k.api(c, want.GetNamespace()).Apply(ctx, k.applyConfig(want.(T), rv), applyOptions)
}

func (k calls[T, L, AC]) create(ctx context.Context, c kubernetes.Interface, want metav1.Object) error {
	_, err := k.api(c, want.GetNamespace()).Create(ctx, want.(T), metav1.CreateOptions{FieldManager: fieldManager})
	return err
}

// itemsOf returns pointers to a list's items.
func itemsOf[O any, P interface {
	*O
	metav1.Object
}](items []O) []metav1.Object {
	out := make([]metav1.Object, len(items))
	for i := range items {
		out[i] = P(&items[i])
	}
	return out
}

type configMaps struct {
	calls[*corev1.ConfigMap, *corev1.ConfigMapList, *acorev1.ConfigMapApplyConfiguration]
}

var configMapCalls = calls[*corev1.ConfigMap, *corev1.ConfigMapList, *acorev1.ConfigMapApplyConfiguration]{
	api: func(c kubernetes.Interface, ns string) api[*corev1.ConfigMap, *corev1.ConfigMapList, *acorev1.ConfigMapApplyConfiguration] {
		return c.CoreV1().ConfigMaps(ns)
	},
	items: func(l *corev1.ConfigMapList) []metav1.Object { return itemsOf(l.Items) },
	applyConfig: func(cm *corev1.ConfigMap, rv string) *acorev1.ConfigMapApplyConfiguration {
		ac := acorev1.ConfigMap(cm.Name, cm.Namespace).WithLabels(cm.Labels).WithAnnotations(cm.Annotations).
			WithResourceVersion(rv).WithData(cm.Data).WithBinaryData(cm.BinaryData)
		if cm.Immutable != nil {
			ac.WithImmutable(*cm.Immutable)
		}
		return ac
	},
}

func (configMaps) Name() string { return "ConfigMap" }

func (configMaps) copyOf(o metav1.Object, meta metav1.ObjectMeta) (metav1.Object, string) {
	cm := o.(*corev1.ConfigMap)
	return &corev1.ConfigMap{ObjectMeta: meta, Data: cm.Data, BinaryData: cm.BinaryData, Immutable: cm.Immutable}, ""
}

func (configMaps) sameContents(cur, want metav1.Object) bool {
	c, w := cur.(*corev1.ConfigMap), want.(*corev1.ConfigMap)
	return semanticEqual(c.Data, w.Data) && semanticEqual(c.BinaryData, w.BinaryData) && isImmutable(c.Immutable) == isImmutable(w.Immutable)
}

func (configMaps) updatable(cur, _ metav1.Object) bool {
	return !isImmutable(cur.(*corev1.ConfigMap).Immutable)
}

type secrets struct {
	calls[*corev1.Secret, *corev1.SecretList, *acorev1.SecretApplyConfiguration]
}

var secretCalls = calls[*corev1.Secret, *corev1.SecretList, *acorev1.SecretApplyConfiguration]{
	api: func(c kubernetes.Interface, ns string) api[*corev1.Secret, *corev1.SecretList, *acorev1.SecretApplyConfiguration] {
		return c.CoreV1().Secrets(ns)
	},
	items: func(l *corev1.SecretList) []metav1.Object { return itemsOf(l.Items) },
	applyConfig: func(s *corev1.Secret, rv string) *acorev1.SecretApplyConfiguration {
		ac := acorev1.Secret(s.Name, s.Namespace).WithLabels(s.Labels).WithAnnotations(s.Annotations).
			WithResourceVersion(rv).WithData(s.Data).WithType(s.Type)
		if s.Immutable != nil {
			ac.WithImmutable(*s.Immutable)
		}
		return ac
	},
}

func (secrets) Name() string { return "Secret" }

func (secrets) copyOf(o metav1.Object, meta metav1.ObjectMeta) (metav1.Object, string) {
	s := o.(*corev1.Secret)
	if s.Type == corev1.SecretTypeServiceAccountToken {
		return nil, "is a service-account token of the host" // a host token never goes down
	}
	return &corev1.Secret{ObjectMeta: meta, Data: s.Data, Type: s.Type, Immutable: s.Immutable}, ""
}

func (secrets) sameContents(cur, want metav1.Object) bool {
	c, w := cur.(*corev1.Secret), want.(*corev1.Secret)
	return semanticEqual(c.Data, w.Data) && c.Type == w.Type && isImmutable(c.Immutable) == isImmutable(w.Immutable)
}

func (secrets) updatable(cur, want metav1.Object) bool {
	c := cur.(*corev1.Secret)
	return !isImmutable(c.Immutable) && c.Type == want.(*corev1.Secret).Type
}

// kindOf returns the Kind of a name, or an error for an unknown one.
func kindOf(name string) (Kind, error) {
	if k, ok := kinds[name]; ok {
		return k, nil
	}
	return nil, fmt.Errorf("unknown kind %q", name)
}
