package podsync

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/syncer/member"
)

// depKey names a ConfigMap or Secret copied into a member.
type depKey struct {
	Kind, Namespace, Name string
}

func managedLabels(cluster string, hostUID types.UID, host map[string]string) map[string]string {
	l := make(map[string]string, len(host)+3)
	for k, v := range host {
		l[k] = v
	}
	l[LabelManaged] = "true"
	l[LabelCluster] = cluster
	l[LabelHostUID] = string(hostUID)
	return l
}

// ensureNamespace creates the member namespace if it is missing.
func (ms *memberSync) ensureNamespace(ctx context.Context, rt *member.Runtime, ns string) error {
	if _, err := rt.Client().CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err == nil {
		return nil
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{LabelManaged: "true", LabelCluster: ms.cluster}}}
	if level := ms.c.opts.PodSecurity; level != "" {
		if m, _, _ := ms.snapshot(); admissionFor(m).Privileged {
			level = "privileged"
		}
		n.Labels["pod-security.kubernetes.io/enforce"] = level
	}
	err := member.Retry(ctx, memberRetry, func(ctx context.Context) error {
		_, err := rt.Client().CoreV1().Namespaces().Create(ctx, n, metav1.CreateOptions{})
		return err
	})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err == nil {
		ms.log.Info("created member namespace", "namespace", ns)
	}
	return err
}

// ensureDeps copies (or refreshes) the ConfigMaps and Secrets a pod uses.
// A missing host object is skipped (the pod would wait for it in the host
// too; a later refresh copies it). depMu must be held.
func (ms *memberSync) ensureDeps(ctx context.Context, rt *member.Runtime, ns string, refs []ObjectRef) error {
	var errs []error
	for _, r := range refs {
		if err := ms.syncDep(ctx, rt, depKey{r.Kind, ns, r.Name}); err != nil {
			errs = append(errs, fmt.Errorf("%s %s/%s: %w", r.Kind, ns, r.Name, err))
		}
	}
	return errors.Join(errs...)
}

// syncDep makes the member copy of one host ConfigMap or Secret match it.
// A member object of that name that leafsync did not create is left alone.
func (ms *memberSync) syncDep(ctx context.Context, rt *member.Runtime, k depKey) error {
	host := ms.c.opts.Host.CoreV1()
	mc := rt.Client().CoreV1()
	var (
		want    metav1.Object
		version string
	)
	switch k.Kind {
	case "ConfigMap":
		cm, err := host.ConfigMaps(k.Namespace).Get(ctx, k.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			return err
		}
		version = string(cm.UID) + "/" + cm.ResourceVersion
		want = &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: k.Name, Namespace: k.Namespace,
				Labels:      managedLabels(ms.cluster, cm.UID, cm.Labels),
				Annotations: map[string]string{AnnotationHostResourceVersion: cm.ResourceVersion}},
			Data: cm.Data, BinaryData: cm.BinaryData, Immutable: cm.Immutable,
		}
	case "Secret":
		s, err := host.Secrets(k.Namespace).Get(ctx, k.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			return err
		}
		if s.Type == corev1.SecretTypeServiceAccountToken {
			return nil // a host token never goes down
		}
		version = string(s.UID) + "/" + s.ResourceVersion
		want = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: k.Name, Namespace: k.Namespace,
				Labels:      managedLabels(ms.cluster, s.UID, s.Labels),
				Annotations: map[string]string{AnnotationHostResourceVersion: s.ResourceVersion}},
			Data: s.Data, Type: s.Type, Immutable: s.Immutable,
		}
	default:
		return fmt.Errorf("unknown kind %q", k.Kind)
	}
	if ms.copied[k] == version {
		return nil
	}
	// The member's copy, if any.
	var (
		cur       metav1.Object
		immutable bool
		sameType  = true
	)
	var err error
	switch k.Kind {
	case "ConfigMap":
		var cm *corev1.ConfigMap
		cm, err = mc.ConfigMaps(k.Namespace).Get(ctx, k.Name, metav1.GetOptions{})
		if err == nil {
			cur, immutable = cm, cm.Immutable != nil && *cm.Immutable
		}
	case "Secret":
		var s *corev1.Secret
		s, err = mc.Secrets(k.Namespace).Get(ctx, k.Name, metav1.GetOptions{})
		if err == nil {
			cur, immutable = s, s.Immutable != nil && *s.Immutable
			sameType = s.Type == want.(*corev1.Secret).Type
		}
	}
	switch {
	case apierrors.IsNotFound(err):
		err = ms.createDep(ctx, rt, want)
	case err != nil:
		return err
	case cur.GetLabels()[LabelManaged] != "true" || cur.GetLabels()[LabelCluster] != ms.cluster:
		ms.log.Info("member has an object of that name that leafsync did not create; using it as is", "kind", k.Kind, "object", k.Namespace+"/"+k.Name)
		ms.copied[k] = version
		return nil
	case cur.GetAnnotations()[AnnotationHostResourceVersion] == want.GetAnnotations()[AnnotationHostResourceVersion] &&
		cur.GetLabels()[LabelHostUID] == want.GetLabels()[LabelHostUID]:
		// Already up to date.
	case immutable || !sameType:
		uid := cur.GetUID()
		err = ms.deleteDep(ctx, rt, k, uid)
		if err == nil {
			err = ms.createDep(ctx, rt, want)
		}
	default:
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
	}
	if err == nil {
		ms.copied[k] = version
	}
	return err
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
	delete(ms.copied, k)
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// refreshDeps, run every Resync while the member is Ready: copies of host
// ConfigMaps and Secrets in use are brought up to date, and copies no
// synced pod uses any more (in the member, or on the leaf in the host) are
// deleted.
func (ms *memberSync) refreshDeps(ctx context.Context) error {
	m, leaf, host := ms.snapshot()
	st, ok := ms.c.opts.Registry.Hysteresis(ms.cluster)
	if !ok || st.State != hysteresis.Ready || !host.HasSynced() || !m.Runtime.HasSynced() {
		return nil
	}
	rt := m.Runtime
	ms.depMu.Lock()
	defer ms.depMu.Unlock()

	used := map[depKey]bool{}
	var errs []error
	for _, obj := range host.GetStore().List() {
		hp, ok := obj.(*corev1.Pod)
		if !ok || hp.Spec.NodeName != leaf || isTerminal(hp) {
			continue
		}
		spec := memberSpec(hp)
		for _, r := range References(&spec) {
			k := depKey{r.Kind, hp.Namespace, r.Name}
			used[k] = true
			if hp.DeletionTimestamp == nil {
				if err := ms.syncDep(ctx, rt, k); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	pods, err := rt.PodLister().List(labels.SelectorFromSet(labels.Set{LabelManaged: "true", LabelCluster: ms.cluster}))
	if err != nil {
		return err
	}
	for _, p := range pods {
		for _, r := range References(&p.Spec) {
			used[depKey{r.Kind, p.Namespace, r.Name}] = true
		}
	}

	sel := labels.SelectorFromSet(labels.Set{LabelManaged: "true", LabelCluster: ms.cluster}).String()
	mc := rt.Client().CoreV1()
	cms, err := mc.ConfigMaps("").List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, cm := range cms.Items {
		k := depKey{"ConfigMap", cm.Namespace, cm.Name}
		if !used[k] {
			if err := ms.deleteDep(ctx, rt, k, cm.UID); err != nil {
				errs = append(errs, err)
			} else {
				ms.log.Info("deleted member copy no synced pod uses", "kind", k.Kind, "object", k.Namespace+"/"+k.Name)
			}
		}
	}
	secrets, err := mc.Secrets("").List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, s := range secrets.Items {
		k := depKey{"Secret", s.Namespace, s.Name}
		if !used[k] {
			if err := ms.deleteDep(ctx, rt, k, s.UID); err != nil {
				errs = append(errs, err)
			} else {
				ms.log.Info("deleted member copy no synced pod uses", "kind", k.Kind, "object", k.Namespace+"/"+k.Name)
			}
		}
	}
	return errors.Join(errs...)
}
