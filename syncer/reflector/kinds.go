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
var kinds = map[string]Kind{"ConfigMap": configMaps{}, "Secret": secrets{}}

// fieldManager is leafsync's name in managedFields.
const fieldManager = "leafsync"

var applyOptions = metav1.ApplyOptions{FieldManager: fieldManager, Force: true}

func isImmutable(p *bool) bool { return p != nil && *p }

type configMaps struct{}

func (configMaps) Name() string { return "ConfigMap" }

func (configMaps) get(ctx context.Context, c kubernetes.Interface, ns, name string) (metav1.Object, error) {
	return c.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
}

func (configMaps) list(ctx context.Context, c kubernetes.Interface, selector string) ([]metav1.Object, error) {
	l, err := c.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	out := make([]metav1.Object, len(l.Items))
	for i := range l.Items {
		out[i] = &l.Items[i]
	}
	return out, nil
}

func (configMaps) delete(ctx context.Context, c kubernetes.Interface, ns, name string, opts metav1.DeleteOptions) error {
	return c.CoreV1().ConfigMaps(ns).Delete(ctx, name, opts)
}

func (configMaps) copyOf(o metav1.Object, meta metav1.ObjectMeta) (metav1.Object, string) {
	cm := o.(*corev1.ConfigMap)
	return &corev1.ConfigMap{ObjectMeta: meta, Data: cm.Data, BinaryData: cm.BinaryData, Immutable: cm.Immutable}, ""
}

func (configMaps) apply(ctx context.Context, c kubernetes.Interface, want metav1.Object, rv string) (metav1.Object, error) {
	cm := want.(*corev1.ConfigMap)
	ac := acorev1.ConfigMap(cm.Name, cm.Namespace).WithLabels(cm.Labels).WithAnnotations(cm.Annotations).
		WithResourceVersion(rv).WithData(cm.Data).WithBinaryData(cm.BinaryData)
	if cm.Immutable != nil {
		ac.WithImmutable(*cm.Immutable)
	}
	return c.CoreV1().ConfigMaps(cm.Namespace).Apply(ctx, ac, applyOptions)
}

func (configMaps) create(ctx context.Context, c kubernetes.Interface, want metav1.Object) error {
	cm := want.(*corev1.ConfigMap)
	_, err := c.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{FieldManager: fieldManager})
	return err
}

func (configMaps) sameContents(cur, want metav1.Object) bool {
	c, w := cur.(*corev1.ConfigMap), want.(*corev1.ConfigMap)
	return semanticEqual(c.Data, w.Data) && semanticEqual(c.BinaryData, w.BinaryData) && isImmutable(c.Immutable) == isImmutable(w.Immutable)
}

func (configMaps) updatable(cur, _ metav1.Object) bool {
	return !isImmutable(cur.(*corev1.ConfigMap).Immutable)
}

type secrets struct{}

func (secrets) Name() string { return "Secret" }

func (secrets) get(ctx context.Context, c kubernetes.Interface, ns, name string) (metav1.Object, error) {
	return c.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
}

func (secrets) list(ctx context.Context, c kubernetes.Interface, selector string) ([]metav1.Object, error) {
	l, err := c.CoreV1().Secrets("").List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	out := make([]metav1.Object, len(l.Items))
	for i := range l.Items {
		out[i] = &l.Items[i]
	}
	return out, nil
}

func (secrets) delete(ctx context.Context, c kubernetes.Interface, ns, name string, opts metav1.DeleteOptions) error {
	return c.CoreV1().Secrets(ns).Delete(ctx, name, opts)
}

func (secrets) copyOf(o metav1.Object, meta metav1.ObjectMeta) (metav1.Object, string) {
	s := o.(*corev1.Secret)
	if s.Type == corev1.SecretTypeServiceAccountToken {
		return nil, "is a service-account token of the host" // a host token never goes down
	}
	return &corev1.Secret{ObjectMeta: meta, Data: s.Data, Type: s.Type, Immutable: s.Immutable}, ""
}

func (secrets) apply(ctx context.Context, c kubernetes.Interface, want metav1.Object, rv string) (metav1.Object, error) {
	s := want.(*corev1.Secret)
	ac := acorev1.Secret(s.Name, s.Namespace).WithLabels(s.Labels).WithAnnotations(s.Annotations).
		WithResourceVersion(rv).WithData(s.Data).WithType(s.Type)
	if s.Immutable != nil {
		ac.WithImmutable(*s.Immutable)
	}
	return c.CoreV1().Secrets(s.Namespace).Apply(ctx, ac, applyOptions)
}

func (secrets) create(ctx context.Context, c kubernetes.Interface, want metav1.Object) error {
	s := want.(*corev1.Secret)
	_, err := c.CoreV1().Secrets(s.Namespace).Create(ctx, s, metav1.CreateOptions{FieldManager: fieldManager})
	return err
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
