package podsync

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	psapi "k8s.io/pod-security-admission/api"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/syncer/member"
)

// depKey names a ConfigMap or Secret copied into a member.
type depKey struct {
	Kind, Namespace, Name string
}

// managedLabels are the labels of a member copy of a host object: the
// host object's own, and leafsync's ownership (ownedBy).
func managedLabels(cluster, host string, hostUID types.UID, from map[string]string) map[string]string {
	l := make(map[string]string, len(from)+4)
	for k, v := range from {
		l[k] = v
	}
	l[LabelManaged] = "true"
	l[LabelCluster] = cluster
	l[LabelHost] = host
	l[LabelHostUID] = string(hostUID)
	return l
}

// refusal: leafsync will not create the member pod yet, for a reason
// found on the create path (it needed a read of either cluster). The host
// pod gets a Warning Event and is looked at again after a while.
type refusal struct {
	reason, msg string
	after       time.Duration
}

func (r refusal) Error() string { return r.reason + ": " + r.msg }

// hostObjectPoll: how often a pod waiting for a host ConfigMap or Secret
// looks again (the host informer does not watch them; leafsync only gets
// them).
const hostObjectPoll = 2 * time.Second

// ownNamespace: leafsync created it for this member.
func (ms *memberSync) ownNamespace(n *corev1.Namespace) bool {
	return ownedBy(n.Labels, ms.cluster, ms.hostIdentity())
}

// hostIdentity is this host's identity (LabelHost).
func (ms *memberSync) hostIdentity() string { return ms.c.opts.Registry.HostIdentity() }

// ensureNamespace makes sure host pods may run in member namespace ns: one
// leafsync created for this member (its Pod Security label kept at the
// registration's level), or one the registration lists; a missing one is
// created. Any other namespace of the member is refused.
func (ms *memberSync) ensureNamespace(ctx context.Context, rt *member.Runtime, ns string, a Admission) error {
	nsc := rt.Client().CoreV1().Namespaces()
	level := string(a.level())
	n, err := nsc.Get(ctx, ns, metav1.GetOptions{})
	switch {
	case err == nil && ms.ownNamespace(n):
		if n.Labels[psapi.EnforceLevelLabel] == level {
			return nil
		}
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, psapi.EnforceLevelLabel, level)
		_, err = nsc.Patch(ctx, ns, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	case err == nil && a.lists(ns):
		return nil
	case err == nil:
		return refusal{reason: "NotSyncedNamespace", after: conflictRetry, msg: fmt.Sprintf(
			"member cluster %s already has namespace %s, which leafsync did not create: host pods run only in member namespaces leafsync creates, or that the registration lists; the member's owner can add %s to the Secret's annotation %s",
			ms.cluster, ns, ns, AnnotationMemberNamespaces)}
	case !apierrors.IsNotFound(err):
		return err
	}
	n = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{
		LabelManaged: "true", LabelCluster: ms.cluster, LabelHost: ms.hostIdentity(), psapi.EnforceLevelLabel: level,
	}}}
	err = member.Retry(ctx, memberRetry, func(ctx context.Context) error {
		_, err := nsc.Create(ctx, n, metav1.CreateOptions{})
		return err
	})
	if apierrors.IsAlreadyExists(err) {
		return requeueError{after: 200 * time.Millisecond, why: "member namespace " + ns + " created meanwhile"}
	}
	if err == nil {
		ms.log.Info("created member namespace", "namespace", ns, "podSecurity", level)
	}
	return err
}

// ensureDeps copies (or refreshes) the ConfigMaps and Secrets a pod uses,
// reading the member's objects afresh: a name resolves only to the host's
// object, and a copy deleted or changed in the member is restored before
// the pod is created. depMu must be held.
func (ms *memberSync) ensureDeps(ctx context.Context, rt *member.Runtime, ns string, refs []ObjectRef) error {
	var errs []error
	for _, r := range refs {
		k := depKey{r.Kind, ns, r.Name}
		cur, err := ms.memberCopy(ctx, rt, k)
		if err == nil {
			err = ms.syncDep(ctx, rt, k, cur, !r.Optional)
		}
		var ref refusal
		if errors.As(err, &ref) {
			return err
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s/%s: %w", r.Kind, ns, r.Name, err))
		}
	}
	return errors.Join(errs...)
}

// memberCopy reads the member's object of that name (nil: none).
func (ms *memberSync) memberCopy(ctx context.Context, rt *member.Runtime, k depKey) (metav1.Object, error) {
	mc := rt.Client().CoreV1()
	var (
		o   metav1.Object
		err error
	)
	switch k.Kind {
	case "ConfigMap":
		o, err = mc.ConfigMaps(k.Namespace).Get(ctx, k.Name, metav1.GetOptions{})
	case "Secret":
		o, err = mc.Secrets(k.Namespace).Get(ctx, k.Name, metav1.GetOptions{})
	default:
		return nil, fmt.Errorf("unknown kind %q", k.Kind)
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return o, nil
}

// hostCopy is the member copy leafsync wants of a host ConfigMap or Secret,
// or, when there is none to make, the refusal that says why.
func (ms *memberSync) hostCopy(ctx context.Context, k depKey) (metav1.Object, refusal, error) {
	host := ms.c.opts.Host.CoreV1()
	switch k.Kind {
	case "ConfigMap":
		cm, err := host.ConfigMaps(k.Namespace).Get(ctx, k.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil, ms.hostMissing(k), nil
		case err != nil:
			return nil, refusal{}, err
		}
		return &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: k.Name, Namespace: k.Namespace,
				Labels:      managedLabels(ms.cluster, ms.hostIdentity(), cm.UID, cm.Labels),
				Annotations: map[string]string{AnnotationHostResourceVersion: cm.ResourceVersion}},
			Data: cm.Data, BinaryData: cm.BinaryData, Immutable: cm.Immutable,
		}, refusal{}, nil
	case "Secret":
		s, err := host.Secrets(k.Namespace).Get(ctx, k.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil, ms.hostMissing(k), nil
		case err != nil:
			return nil, refusal{}, err
		case s.Type == corev1.SecretTypeServiceAccountToken:
			// A host token never goes down.
			return nil, refusal{reason: "HostObjectNotCopied", after: conflictRetry, msg: fmt.Sprintf(
				"Secret %s/%s is a service-account token of the host: it is never copied into member %s", k.Namespace, k.Name, ms.cluster)}, nil
		}
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: k.Name, Namespace: k.Namespace,
				Labels:      managedLabels(ms.cluster, ms.hostIdentity(), s.UID, s.Labels),
				Annotations: map[string]string{AnnotationHostResourceVersion: s.ResourceVersion}},
			Data: s.Data, Type: s.Type, Immutable: s.Immutable,
		}, refusal{}, nil
	}
	return nil, refusal{}, fmt.Errorf("unknown kind %q", k.Kind)
}

// syncDep makes the member copy of one host ConfigMap or Secret match it;
// cur is the member's object of that name as just read (nil: none), so a
// copy deleted or changed in the member is restored. A member object of
// that name that leafsync did not create is never read beyond its labels,
// used or overwritten: a refusal. A missing host object (or a host
// service-account token, never copied) is a refusal when needed (a
// reference that is not optional); otherwise its copy is deleted, unless
// another synced pod needs it.
func (ms *memberSync) syncDep(ctx context.Context, rt *member.Runtime, k depKey, cur metav1.Object, needed bool) error {
	want, missing, err := ms.hostCopy(ctx, k)
	if err != nil {
		return err
	}
	if want == nil && missing.reason != reasonHostObjectNotFound {
		needed = true // a host token: the pod is refused, optional or not
	}
	owned := cur == nil || ownedBy(cur.GetLabels(), ms.cluster, ms.hostIdentity())
	switch planCopy(cur, want, owned, needed) {
	case copyRefuse:
		return refusal{reason: "MemberObjectConflict", after: conflictRetry, msg: fmt.Sprintf(
			"member cluster %s has %s %s/%s, which leafsync did not create: the pod would use it instead of the host's, so it is not run there (the member's object is neither used nor changed); the member's owner can rename it, or the pod can use another name",
			ms.cluster, k.Kind, k.Namespace, k.Name)}
	case copyWait:
		return missing
	case copyKeep:
		return nil
	case copyCreate:
		return ms.createDep(ctx, rt, want)
	case copyReplace:
		if err := ms.deleteDep(ctx, rt, k, cur.GetUID()); err != nil {
			return err
		}
		return ms.createDep(ctx, rt, want)
	case copyDelete:
		if ms.needs(rt, k) {
			return nil
		}
		err := ms.deleteDep(ctx, rt, k, cur.GetUID())
		if err == nil {
			ms.log.Info("deleted member copy: the host object is gone and no synced pod needs it", "kind", k.Kind, "object", k.Namespace+"/"+k.Name)
		}
		return err
	}
	// copyUpdate
	mc := rt.Client().CoreV1()
	want.SetResourceVersion(cur.GetResourceVersion())
	err = member.Retry(ctx, memberRetry, func(ctx context.Context) error {
		var err error
		switch o := want.(type) {
		case *corev1.ConfigMap:
			_, err = mc.ConfigMaps(k.Namespace).Update(ctx, o, metav1.UpdateOptions{})
		case *corev1.Secret:
			_, err = mc.Secrets(k.Namespace).Update(ctx, o, metav1.UpdateOptions{})
		}
		return err
	})
	if err == nil {
		ms.log.Info("updated member copy", "kind", k.Kind, "object", k.Namespace+"/"+k.Name)
	}
	return err
}

// needs: a synced pod (a live host pod on the leaf, or leafsync's member
// pod) has a reference to k that is not optional.
func (ms *memberSync) needs(rt *member.Runtime, k depKey) bool {
	_, leaf, host := ms.snapshot()
	uses := func(spec *corev1.PodSpec) bool {
		for _, r := range References(spec) {
			if r.Kind == k.Kind && r.Name == k.Name && !r.Optional {
				return true
			}
		}
		return false
	}
	for _, obj := range host.GetStore().List() {
		hp, ok := obj.(*corev1.Pod)
		if ok && hp.Namespace == k.Namespace && hp.Spec.NodeName == leaf && !isTerminal(hp) {
			if spec := memberSpec(hp); uses(&spec) {
				return true
			}
		}
	}
	pods, _ := rt.PodLister().Pods(k.Namespace).List(labels.SelectorFromSet(labels.Set{LabelManaged: "true", LabelCluster: ms.cluster}))
	for _, p := range pods {
		if ours(p, ms.cluster, ms.hostIdentity()) && uses(&p.Spec) {
			return true
		}
	}
	return false
}

// hostMissing: the pod waits for the host object, as a kubelet waits for a
// missing ConfigMap or Secret.
func (ms *memberSync) hostMissing(k depKey) refusal {
	return refusal{reason: reasonHostObjectNotFound, after: hostObjectPoll, msg: fmt.Sprintf(
		"%s %s/%s not found in the host: the pod waits for it before it is created in member %s (a member object of that name is never used)",
		k.Kind, k.Namespace, k.Name, ms.cluster)}
}

func (ms *memberSync) createDep(ctx context.Context, rt *member.Runtime, o metav1.Object) error {
	mc := rt.Client().CoreV1()
	err := member.Retry(ctx, memberRetry, func(ctx context.Context) error {
		var err error
		switch v := o.(type) {
		case *corev1.ConfigMap:
			_, err = mc.ConfigMaps(v.Namespace).Create(ctx, v, metav1.CreateOptions{})
		case *corev1.Secret:
			_, err = mc.Secrets(v.Namespace).Create(ctx, v, metav1.CreateOptions{})
		}
		return err
	})
	if err == nil {
		kind := "ConfigMap"
		if _, ok := o.(*corev1.Secret); ok {
			kind = "Secret"
		}
		ms.log.Info("copied into member", "kind", kind, "object", o.GetNamespace()+"/"+o.GetName())
	}
	return err
}

func (ms *memberSync) deleteDep(ctx context.Context, rt *member.Runtime, k depKey, uid types.UID) error {
	mc := rt.Client().CoreV1()
	opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
	err := member.Retry(ctx, memberRetry, func(ctx context.Context) error {
		if k.Kind == "ConfigMap" {
			return mc.ConfigMaps(k.Namespace).Delete(ctx, k.Name, opts)
		}
		return mc.Secrets(k.Namespace).Delete(ctx, k.Name, opts)
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// refreshDeps, run every Resync while the member is Ready: the member's
// copies are listed and compared with the host objects the synced pods
// use, so a copy deleted or changed in the member, or whose host object
// changed, is restored within one resync; a copy whose host object is gone
// is deleted when no synced pod needs it, and copies no synced pod uses any
// more (in the member, or on the leaf in the host) are deleted.
func (ms *memberSync) refreshDeps(ctx context.Context) error {
	m, leaf, host := ms.snapshot()
	st, ok := ms.c.opts.Registry.Hysteresis(ms.cluster)
	if !ok || st.State != hysteresis.Ready || !host.HasSynced() || !m.Runtime.HasSynced() {
		return nil
	}
	rt := m.Runtime
	ms.depMu.Lock()
	defer ms.depMu.Unlock()

	type use struct{ live, needed bool } // live: a host pod not being deleted uses it
	uses := map[depKey]use{}
	for _, obj := range host.GetStore().List() {
		hp, ok := obj.(*corev1.Pod)
		if !ok || hp.Spec.NodeName != leaf || isTerminal(hp) {
			continue
		}
		spec := memberSpec(hp)
		for _, r := range References(&spec) {
			k := depKey{r.Kind, hp.Namespace, r.Name}
			u := uses[k]
			u.live = u.live || hp.DeletionTimestamp == nil
			u.needed = u.needed || !r.Optional
			uses[k] = u
		}
	}
	pods, err := rt.PodLister().List(labels.SelectorFromSet(labels.Set{LabelManaged: "true", LabelCluster: ms.cluster}))
	if err != nil {
		return err
	}
	for _, p := range pods {
		if !ours(p, ms.cluster, ms.hostIdentity()) {
			continue
		}
		for _, r := range References(&p.Spec) {
			k := depKey{r.Kind, p.Namespace, r.Name}
			u := uses[k]
			u.needed = u.needed || !r.Optional
			uses[k] = u
		}
	}
	copies, err := ms.listCopies(ctx, rt)
	if err != nil {
		return err
	}

	var errs []error
	for k, u := range uses {
		if !u.live {
			continue
		}
		var cur metav1.Object
		if c, ok := copies[k]; ok {
			cur = c
		}
		if err := ms.syncDep(ctx, rt, k, cur, u.needed); err != nil {
			errs = append(errs, fmt.Errorf("%s %s/%s: %w", k.Kind, k.Namespace, k.Name, err))
		}
	}
	for k, c := range copies {
		if _, used := uses[k]; used {
			continue
		}
		if err := ms.deleteDep(ctx, rt, k, c.GetUID()); err != nil {
			errs = append(errs, err)
		} else {
			ms.log.Info("deleted member copy no synced pod uses", "kind", k.Kind, "object", k.Namespace+"/"+k.Name)
		}
	}
	return errors.Join(errs...)
}

// listCopies lists this host's copies in the member (by cluster label, kept
// to ownedBy).
func (ms *memberSync) listCopies(ctx context.Context, rt *member.Runtime) (map[depKey]metav1.Object, error) {
	sel := labels.SelectorFromSet(labels.Set{LabelManaged: "true", LabelCluster: ms.cluster}).String()
	mc := rt.Client().CoreV1()
	out := map[depKey]metav1.Object{}
	cms, err := mc.ConfigMaps("").List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, err
	}
	for i := range cms.Items {
		if cm := &cms.Items[i]; ownedBy(cm.Labels, ms.cluster, ms.hostIdentity()) {
			out[depKey{"ConfigMap", cm.Namespace, cm.Name}] = cm
		}
	}
	secrets, err := mc.Secrets("").List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, err
	}
	for i := range secrets.Items {
		if s := &secrets.Items[i]; ownedBy(s.Labels, ms.cluster, ms.hostIdentity()) {
			out[depKey{"Secret", s.Namespace, s.Name}] = s
		}
	}
	return out, nil
}
