package reflector

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/leafsync/leafsync/internal/syncer/member"
)

// AnnotationHostResourceVersion is the resourceVersion of the host object
// a member copy was made from.
const AnnotationHostResourceVersion = "leafsync.io/host-resource-version"

// ReasonHostObjectNotFound: a pod's ConfigMap or Secret is missing in the
// host.
const ReasonHostObjectNotFound = "HostObjectNotFound"

const (
	// hostObjectPoll: how often a pod waiting for a host object looks
	// again (leafsync gets host objects, it does not watch them).
	hostObjectPoll = 2 * time.Second
	// conflictRetry: how often a pod refused for a member object of the
	// copy's name looks again.
	conflictRetry = 30 * time.Second
)

// Ref is a host object a pod uses, in the pod's namespace.
type Ref struct {
	Kind string // "ConfigMap", "Secret" or "Service"
	Name string
	// Optional: every use of it may be missing, as on a node (optional
	// volumes, projections and env references; image pull secrets, which
	// a kubelet only warns about).
	Optional bool
}

// Key names a host object and its member copy.
type Key struct {
	Kind, Namespace, Name string
}

// Use is how the synced pods use a host object.
type Use struct {
	// Live: a host pod that is not being deleted uses it (its copy is
	// kept up to date).
	Live bool
	// Needed: a synced pod has a reference to it that is not optional.
	Needed bool
}

// Owner is the boundary between leafsync's copies and the member's own
// objects (#26).
type Owner interface {
	// Owns reports whether this host's leafsync made the member object
	// with these labels; no other is read beyond its labels, used,
	// changed or deleted.
	Owns(labels map[string]string) bool
	// Labels are the labels of the copy of a host object (its UID and
	// labels).
	Labels(hostUID types.UID, from map[string]string) map[string]string
	// Selector selects the member objects that may be copies (Owns
	// decides).
	Selector() labels.Selector
}

// Refusal: the pod is not created in the member yet, for a reason a person
// can act on (an Event on the host pod); it looks again after After.
type Refusal struct {
	Reason, Message string
	After           time.Duration
}

func (r Refusal) Error() string { return r.Reason + ": " + r.Message }

// Reflector keeps one member's copies.
type Reflector struct {
	Host    kubernetes.Interface
	Member  kubernetes.Interface
	Cluster string
	Owner   Owner
	// Retry bounds the retries of one member write.
	Retry member.RetryOptions
	Log   logr.Logger
	// InUse reports whether a synced pod needs the object (a reference
	// that is not optional): a copy whose host object is gone is kept
	// for it.
	InUse func(Key) bool
}

// Ensure copies (or refreshes) the host objects a pod about to be created
// uses, reading the member's objects afresh: a name resolves only to the
// host's object, and a copy deleted or changed in the member is restored
// before the pod is created. A Refusal stops at once.
func (r *Reflector) Ensure(ctx context.Context, namespace string, refs []Ref) error {
	var errs []error
	for _, ref := range refs {
		k := Key{ref.Kind, namespace, ref.Name}
		kind, err := kindOf(k.Kind)
		if err != nil {
			return err
		}
		cur, err := r.memberCopy(ctx, kind, k)
		if err == nil {
			err = r.sync(ctx, kind, k, cur, !ref.Optional)
		}
		var refusal Refusal
		if errors.As(err, &refusal) {
			return err
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s/%s: %w", k.Kind, k.Namespace, k.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Refresh brings every copy in line with the uses of the synced pods: a
// copy of a host object a live pod uses is restored or updated, one whose
// host object is gone is deleted unless needed, and copies no synced pod
// uses any more are deleted.
func (r *Reflector) Refresh(ctx context.Context, uses map[Key]Use) error {
	copies, err := r.listCopies(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for k, u := range uses {
		if !u.Live {
			continue
		}
		kind, err := kindOf(k.Kind)
		if err != nil {
			return err
		}
		if err := r.sync(ctx, kind, k, copies[k], u.Needed); err != nil {
			errs = append(errs, fmt.Errorf("%s %s/%s: %w", k.Kind, k.Namespace, k.Name, err))
		}
	}
	for k, c := range copies {
		if _, used := uses[k]; used {
			continue
		}
		if err := r.delete(ctx, kinds[k.Kind], k, c.GetUID()); err != nil {
			errs = append(errs, err)
		} else {
			r.Log.Info("deleted member copy no synced pod uses", "kind", k.Kind, "object", k.Namespace+"/"+k.Name)
		}
	}
	return errors.Join(errs...)
}

// memberCopy reads the member's object of that name (nil: none).
func (r *Reflector) memberCopy(ctx context.Context, kind Kind, k Key) (metav1.Object, error) {
	o, err := kind.get(ctx, r.Member, k.Namespace, k.Name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return o, nil
}

// want is the member copy wanted of a host object, or, when there is none
// to make, the Refusal that says why.
func (r *Reflector) want(ctx context.Context, kind Kind, k Key) (metav1.Object, Refusal, error) {
	o, err := kind.get(ctx, r.Host, k.Namespace, k.Name)
	switch {
	case apierrors.IsNotFound(err):
		return nil, r.hostMissing(k), nil
	case err != nil:
		return nil, Refusal{}, err
	}
	meta := metav1.ObjectMeta{Name: k.Name, Namespace: k.Namespace,
		Labels:      r.Owner.Labels(o.GetUID(), o.GetLabels()),
		Annotations: map[string]string{AnnotationHostResourceVersion: o.GetResourceVersion()}}
	want, notCopied := kind.copyOf(o, meta)
	if notCopied != "" {
		return nil, Refusal{Reason: "HostObjectNotCopied", After: conflictRetry, Message: fmt.Sprintf(
			"%s %s/%s %s: it is never copied into member %s", k.Kind, k.Namespace, k.Name, notCopied, r.Cluster)}, nil
	}
	return want, Refusal{}, nil
}

// sync makes the member copy of one host object match it; cur is the
// member's object of that name as just read (nil: none). A member object
// of that name that leafsync did not create is never read beyond its
// labels, used or overwritten: a Refusal. A missing host object (or one
// never copied) is a Refusal when needed; otherwise its copy is deleted,
// unless a synced pod needs it.
func (r *Reflector) sync(ctx context.Context, kind Kind, k Key, cur metav1.Object, needed bool) error {
	want, missing, err := r.want(ctx, kind, k)
	if err != nil {
		return err
	}
	if want == nil && missing.Reason != ReasonHostObjectNotFound {
		needed = true // never copied: the pod is refused, optional or not
	}
	owned := cur == nil || r.Owner.Owns(cur.GetLabels())
	switch planCopy(kind, cur, want, owned, needed) {
	case copyRefuse:
		return Refusal{Reason: "MemberObjectConflict", After: conflictRetry, Message: fmt.Sprintf(
			"member cluster %s has %s %s/%s, which leafsync did not create: the pod would use it instead of the host's, so it is not run there (the member's object is neither used nor changed); the member's owner can rename it, or the pod can use another name",
			r.Cluster, k.Kind, k.Namespace, k.Name)}
	case copyWait:
		return missing
	case copyKeep:
		return nil
	case copyCreate:
		return r.create(ctx, kind, k, want)
	case copyReplace:
		return r.replace(ctx, kind, k, cur, want)
	case copyDelete:
		if r.InUse != nil && r.InUse(k) {
			return nil
		}
		err := r.delete(ctx, kind, k, cur.GetUID())
		if err == nil {
			r.Log.Info("deleted member copy: the host object is gone and no synced pod needs it", "kind", k.Kind, "object", k.Namespace+"/"+k.Name)
		}
		return err
	}
	return r.update(ctx, kind, k, cur, want)
}

// update applies want over cur, conditional on cur's resourceVersion (a
// copy replaced meanwhile by an object of the member's own is not
// touched). Fields of the copy that another field manager holds (an edit
// by hand) are not removed by an apply: then the copy is replaced.
func (r *Reflector) update(ctx context.Context, kind Kind, k Key, cur, want metav1.Object) error {
	var out metav1.Object
	err := member.Retry(ctx, r.Retry, func(ctx context.Context) error {
		var err error
		out, err = kind.apply(ctx, r.Member, want, cur.GetResourceVersion())
		return err
	})
	if err != nil {
		return err
	}
	if !sameCopy(kind, out, want) {
		return r.replace(ctx, kind, k, out, want)
	}
	r.Log.Info("updated member copy", "kind", k.Kind, "object", k.Namespace+"/"+k.Name)
	return nil
}

// create makes a missing copy. It is a create, not an apply: an object of
// the member's own made meanwhile under that name must make it fail, not
// be taken over.
func (r *Reflector) create(ctx context.Context, kind Kind, k Key, want metav1.Object) error {
	err := member.Retry(ctx, r.Retry, func(ctx context.Context) error {
		return kind.create(ctx, r.Member, want)
	})
	if err == nil {
		r.Log.Info("copied into member", "kind", k.Kind, "object", k.Namespace+"/"+k.Name)
	}
	return err
}

// replace deletes the copy (its UID as precondition) and creates it anew.
func (r *Reflector) replace(ctx context.Context, kind Kind, k Key, cur, want metav1.Object) error {
	if err := r.delete(ctx, kind, k, cur.GetUID()); err != nil {
		return err
	}
	return r.create(ctx, kind, k, want)
}

func (r *Reflector) delete(ctx context.Context, kind Kind, k Key, uid types.UID) error {
	opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
	err := member.Retry(ctx, r.Retry, func(ctx context.Context) error {
		return kind.delete(ctx, r.Member, k.Namespace, k.Name, opts)
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// hostMissing: the pod waits for the host object, as a kubelet waits for a
// missing ConfigMap or Secret.
func (r *Reflector) hostMissing(k Key) Refusal {
	return Refusal{Reason: ReasonHostObjectNotFound, After: hostObjectPoll, Message: fmt.Sprintf(
		"%s %s/%s not found in the host: the pod waits for it before it is created in member %s (a member object of that name is never used)",
		k.Kind, k.Namespace, k.Name, r.Cluster)}
}

// listCopies lists this host's copies in the member (Owner.Selector, kept
// to Owner.Owns).
func (r *Reflector) listCopies(ctx context.Context) (map[Key]metav1.Object, error) {
	sel := r.Owner.Selector().String()
	out := map[Key]metav1.Object{}
	for name, kind := range kinds {
		objs, err := kind.list(ctx, r.Member, sel)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			if r.Owner.Owns(o.GetLabels()) {
				out[Key{name, o.GetNamespace(), o.GetName()}] = o
			}
		}
	}
	return out, nil
}
