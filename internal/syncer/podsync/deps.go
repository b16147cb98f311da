package podsync

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	psapi "k8s.io/pod-security-admission/api"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/syncer/member"
	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
	"github.com/leafsync/leafsync/internal/syncer/podsync/translate"
	"github.com/leafsync/leafsync/internal/syncer/reflector"
)

// managedLabels are the labels of a member copy of a host object: the
// host object's own, and leafsync's ownership (ownedBy).
func managedLabels(cluster, host string, hostUID types.UID, from map[string]string) map[string]string {
	l := make(map[string]string, len(from)+4)
	for k, v := range from {
		l[k] = v
	}
	l[podmeta.LabelManaged] = "true"
	l[podmeta.LabelCluster] = cluster
	l[podmeta.LabelHost] = host
	l[podmeta.LabelHostUID] = string(hostUID)
	return l
}

// memberOwner is the member-owner boundary of one member (#26): the
// objects leafsync made there for this host.
type memberOwner struct{ cluster, host string }

func (o memberOwner) Owns(l map[string]string) bool { return podmeta.OwnedBy(l, o.cluster, o.host) }

func (o memberOwner) Labels(hostUID types.UID, from map[string]string) map[string]string {
	return managedLabels(o.cluster, o.host, hostUID, from)
}

func (o memberOwner) Selector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{podmeta.LabelManaged: "true", podmeta.LabelCluster: o.cluster})
}

// reflector keeps the member's copies of the host ConfigMaps and Secrets
// its synced pods use.
func (ms *memberSync) reflector(rt *member.Runtime) *reflector.Reflector {
	return &reflector.Reflector{
		Host: ms.c.opts.Host, Member: rt.Client(), Cluster: ms.cluster,
		Owner: memberOwner{ms.cluster, ms.hostIdentity()}, Retry: memberRetry, Log: ms.log,
		InUse: func(k reflector.Key) bool { return ms.needs(rt, k) },
	}
}

// ownNamespace: leafsync created it for this member.
func (ms *memberSync) ownNamespace(n *corev1.Namespace) bool {
	return podmeta.OwnedBy(n.Labels, ms.cluster, ms.hostIdentity())
}

// hostIdentity is this host's identity (LabelHost).
func (ms *memberSync) hostIdentity() string { return ms.c.opts.Registry.HostIdentity() }

// ensureNamespace makes sure host pods may run in member namespace ns: one
// leafsync created for this member (its Pod Security label kept at the
// registration's level), or one the registration lists; a missing one is
// created. Any other namespace of the member is refused.
func (ms *memberSync) ensureNamespace(ctx context.Context, rt *member.Runtime, ns string, a podmeta.Admission) error {
	nsc := rt.Client().CoreV1().Namespaces()
	level := string(a.Level())
	n, err := nsc.Get(ctx, ns, metav1.GetOptions{})
	switch {
	case err == nil && ms.ownNamespace(n):
		if n.Labels[psapi.EnforceLevelLabel] == level {
			return nil
		}
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, psapi.EnforceLevelLabel, level)
		_, err = nsc.Patch(ctx, ns, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	case err == nil && a.Lists(ns):
		return nil
	case err == nil:
		return reflector.Refusal{Reason: "NotSyncedNamespace", After: namespaceConflictRetry, Message: fmt.Sprintf(
			"member cluster %s already has namespace %s, which leafsync did not create: host pods run only in member namespaces leafsync creates, or that the registration lists; the member's owner can add %s to the Secret's annotation %s",
			ms.cluster, ns, ns, podmeta.AnnotationMemberNamespaces)}
	case !apierrors.IsNotFound(err):
		return err
	}
	n = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{
		podmeta.LabelManaged: "true", podmeta.LabelCluster: ms.cluster, podmeta.LabelHost: ms.hostIdentity(), psapi.EnforceLevelLabel: level,
	}}}
	err = member.Retry(ctx, memberRetry, func(ctx context.Context) error {
		_, err := nsc.Create(ctx, n, metav1.CreateOptions{})
		return err
	})
	if err == nil {
		ms.log.Info("created member namespace", "namespace", ns, "podSecurity", level)
	}
	return err
}

// needs: a synced pod (a live host pod on the leaf, or leafsync's member
// pod) has a reference to k that is not optional.
func (ms *memberSync) needs(rt *member.Runtime, k reflector.Key) bool {
	_, leaf, host := ms.snapshot()
	uses := func(pod string, spec *corev1.PodSpec) bool {
		for _, r := range translate.References(pod, spec) {
			if r.Kind == k.Kind && r.Name == k.Name && !r.Optional {
				return true
			}
		}
		return false
	}
	for _, hp := range host.on(leaf) {
		if hp.Namespace == k.Namespace && !podmeta.IsTerminal(hp) {
			if spec := translate.MemberSpecWithEphemeral(hp); uses(hp.Name, &spec) {
				return true
			}
		}
	}
	pods, _ := rt.PodLister().Pods(k.Namespace).List(memberOwner{ms.cluster, ms.hostIdentity()}.Selector())
	for _, p := range pods {
		if podmeta.Ours(p, ms.cluster, ms.hostIdentity()) && uses(p.Name, &p.Spec) {
			return true
		}
	}
	return false
}

// refreshDeps, run every Resync while the member is Ready: the copies are
// compared with the host objects the synced pods use (a live host pod on
// the leaf, leafsync's member pods; the Services of their namespaces), so
// a copy deleted or changed in the member, or whose host object changed,
// is restored within one resync, and copies no synced pod uses any more
// are deleted (reflector.Refresh).
func (ms *memberSync) refreshDeps(ctx context.Context) error {
	m, leaf, host := ms.snapshot()
	if st := m.Readiness.Status; st.State != hysteresis.Ready || !host.HasSynced() || !m.Runtime.HasSynced() {
		return nil
	}
	rt := m.Runtime
	ms.depMu.Lock()
	defer ms.depMu.Unlock()

	if !ms.c.services.synced() {
		return nil // copies of Services no pod seems to use would go
	}
	uses := map[reflector.Key]reflector.Use{}
	use := func(namespace, pod string, spec *corev1.PodSpec, live bool) {
		refs, _ := ms.c.podRefs(namespace, pod, spec)
		for _, r := range refs {
			k := reflector.Key{Kind: r.Kind, Namespace: namespace, Name: r.Name}
			u := uses[k]
			u.Live = u.Live || live
			u.Needed = u.Needed || !r.Optional
			uses[k] = u
		}
	}
	var onLeaf []*corev1.Pod
	for _, hp := range host.on(leaf) {
		if !podmeta.IsTerminal(hp) {
			spec := translate.MemberSpecWithEphemeral(hp)
			use(hp.Namespace, hp.Name, &spec, hp.DeletionTimestamp == nil)
			onLeaf = append(onLeaf, hp)
		}
	}
	if err := ms.refreshTokens(ctx, m, onLeaf); err != nil {
		ms.log.Error(err, "refreshing host tokens")
	}
	pods, err := rt.PodLister().List(memberOwner{ms.cluster, ms.hostIdentity()}.Selector())
	if err != nil {
		return err
	}
	for _, p := range pods {
		if podmeta.Ours(p, ms.cluster, ms.hostIdentity()) {
			use(p.Namespace, p.Name, &p.Spec, false)
		}
	}
	return ms.reflector(rt).Refresh(ctx, uses)
}
