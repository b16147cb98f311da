package hosttoken

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	acorev1 "k8s.io/client-go/applyconfigurations/core/v1"
	ametav1 "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/leafsync/leafsync/internal/syncer/config"
	"github.com/leafsync/leafsync/internal/syncer/member"
	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
	"github.com/leafsync/leafsync/internal/syncer/reflector"
)

// fieldManager is leafsync's name in managedFields (as the reflector's).
const fieldManager = "leafsync"

// refusedRetry: how often a pod refused (its token not issued, a member
// Secret of the name not leafsync's) looks again.
const refusedRetry = 30 * time.Second

// Secrets keeps one member's token Secrets: for every synced host pod
// that mounts a ServiceAccount token, a Secret holding tokens of its host
// ServiceAccount (TokenRequest bound to the host pod, with each
// projection's audience and lifetime), the host's CA and the host API
// server's address.
type Secrets struct {
	Host, Member kubernetes.Interface
	// Cluster and HostIdentity say whose Secrets they are (labels).
	Cluster, HostIdentity string
	// Server is the host API server's address the member reaches
	// ("host:port", checked); "" gives no token.
	Server string
	Clock  clock.PassiveClock
	Retry  member.RetryOptions
	Log    logr.Logger
}

// Ensure writes the token Secret of host pod hp before its member pod is
// created (nothing for a pod without a token or with no Server). A member
// Secret of that name that leafsync did not make, and a token the host
// refuses to issue, are a Refusal: the pod waits, as a kubelet's pod
// waits for a token volume it cannot mount.
func (s *Secrets) Ensure(ctx context.Context, hp *corev1.Pod) error {
	if len(Wanted(hp)) == 0 {
		return nil
	}
	cur, err := s.Member.CoreV1().Secrets(hp.Namespace).Get(ctx, SecretName(hp.Name), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		cur = nil
	case err != nil:
		return err
	case !s.ours(cur.Labels):
		return reflector.Refusal{Reason: "MemberObjectConflict", After: refusedRetry, Message: fmt.Sprintf(
			"member cluster %s has Secret %s/%s, which leafsync did not create: it is where the pod's host ServiceAccount token goes, so the pod is not run there (the member's object is neither used nor changed)",
			s.Cluster, hp.Namespace, cur.Name)}
	}
	if s.Server == "" {
		return nil // no host token (docs/pod-sync.md)
	}
	if cur != nil && cur.Labels[podmeta.LabelHostUID] == string(hp.UID) && !s.due(cur) {
		return nil
	}
	return s.write(ctx, hp, cur, nil)
}

// Own makes the member pod the owner of its token Secret, so that the
// member's garbage collector deletes the Secret with the pod.
func (s *Secrets) Own(ctx context.Context, mp *corev1.Pod) error {
	cur, err := s.Member.CoreV1().Secrets(mp.Namespace).Get(ctx, SecretName(mp.Name), metav1.GetOptions{})
	if apierrors.IsNotFound(err) || err == nil && (!s.ours(cur.Labels) || ownedBy(cur, mp)) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = s.apply(ctx, cur, cur.Data, cur.Annotations, mp)
	return err
}

// Refresh, every resync: a token Secret is written again when its
// refresh time has come, or when it is missing for a pod whose member pod
// exists (hostPods: the host pods on the leaf that have not finished, by
// UID; memberPods: leafsync's member pods, by namespace/name), and deleted
// when its host pod is not there any more, runs as a member ServiceAccount, or no
// Server is configured. (A member pod not yet in the cache keeps its
// Secret: Ensure wrote it just before the pod.)
func (s *Secrets) Refresh(ctx context.Context, hostPods map[types.UID]*corev1.Pod, memberPods map[types.NamespacedName]*corev1.Pod) error {
	list, err := s.Member.CoreV1().Secrets("").List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{LabelCluster: s.Cluster}).String()})
	if err != nil {
		return err
	}
	var errs []error
	have := map[types.UID]bool{}
	for i := range list.Items {
		cur := &list.Items[i]
		if !s.ours(cur.Labels) {
			continue
		}
		hp := hostPods[types.UID(cur.Labels[podmeta.LabelHostUID])]
		if hp == nil || s.Server == "" || len(Wanted(hp)) == 0 || cur.Name != SecretName(hp.Name) {
			errs = append(errs, s.delete(ctx, cur))
			continue
		}
		have[hp.UID] = true
		mp := memberPods[types.NamespacedName{Namespace: hp.Namespace, Name: hp.Name}]
		if mp != nil && mp.Labels[podmeta.LabelHostUID] != string(hp.UID) {
			mp = nil // the previous host pod's member pod: it must not take the Secret with it
		}
		if s.due(cur) {
			errs = append(errs, s.write(ctx, hp, cur, mp))
		} else if mp != nil && !ownedBy(cur, mp) {
			errs = append(errs, s.Own(ctx, mp))
		}
	}
	for uid, hp := range hostPods {
		mp := memberPods[types.NamespacedName{Namespace: hp.Namespace, Name: hp.Name}]
		if !have[uid] && mp != nil && mp.Labels[podmeta.LabelHostUID] == string(uid) && s.Server != "" && len(Wanted(hp)) > 0 {
			errs = append(errs, s.write(ctx, hp, nil, mp))
		}
	}
	return errors.Join(errs...)
}

// write requests the pod's tokens from the host and writes them, with the
// host CA and Server, over cur (nil: none yet), owned by mp (nil: not yet).
func (s *Secrets) write(ctx context.Context, hp *corev1.Pod, cur *corev1.Secret, mp *corev1.Pod) error {
	host, port, err := config.ParseHostAPIServer(s.Server)
	if err != nil {
		return err
	}
	ca, err := s.Host.CoreV1().ConfigMaps(hp.Namespace).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("host CA of namespace %s: %w", hp.Namespace, err)
	}
	data := map[string][]byte{KeyCA: []byte(ca.Data[KeyCA]), KeyServiceHost: []byte(host), KeyServicePort: []byte(port)}
	now := s.Clock.Now()
	var refresh, expires time.Time
	for _, t := range Wanted(hp) {
		tr, err := s.request(ctx, hp, t)
		if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) || apierrors.IsBadRequest(err) {
			return reflector.Refusal{Reason: "HostTokenNotIssued", After: refusedRetry, Message: fmt.Sprintf(
				"the host did not issue a token of ServiceAccount %s/%s for the pod's volume %s (it is not run in member %s without it): %v",
				hp.Namespace, serviceAccount(hp), t.Volume, s.Cluster, err)}
		}
		if err != nil {
			return err
		}
		data[t.Key] = []byte(tr.Status.Token)
		ttl := time.Duration(t.ExpirationSeconds) * time.Second
		if tr.Spec.ExpirationSeconds != nil {
			ttl = time.Duration(*tr.Spec.ExpirationSeconds) * time.Second // as the host granted it
		}
		if r := RefreshAt(now, ttl); refresh.IsZero() || r.Before(refresh) {
			refresh, expires = r, now.Add(ttl)
		}
	}
	annotations := map[string]string{AnnotationRefreshAt: refresh.UTC().Format(time.RFC3339), AnnotationExpiresAt: expires.UTC().Format(time.RFC3339)}
	if cur == nil {
		return s.create(ctx, hp, data, annotations, mp)
	}
	_, err = s.apply(ctx, cur, data, annotations, mp)
	if err == nil {
		s.Log.V(1).Info("refreshed host token", "secret", hp.Namespace+"/"+cur.Name, "refreshAt", annotations[AnnotationRefreshAt])
	}
	return err
}

// request asks the host for a token of the pod's ServiceAccount, bound to
// the host pod (it stops being valid when the host pod goes).
func (s *Secrets) request(ctx context.Context, hp *corev1.Pod, t Token) (*authenticationv1.TokenRequest, error) {
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &t.ExpirationSeconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: hp.Name, UID: hp.UID},
	}}
	if t.Audience != "" {
		tr.Spec.Audiences = []string{t.Audience}
	}
	return s.Host.CoreV1().ServiceAccounts(hp.Namespace).CreateToken(ctx, serviceAccount(hp), tr, metav1.CreateOptions{})
}

func serviceAccount(hp *corev1.Pod) string {
	if hp.Spec.ServiceAccountName == "" {
		return "default"
	}
	return hp.Spec.ServiceAccountName
}

// create makes a missing Secret. It is a create, not an apply: an object of
// the member's own made meanwhile under that name must make it fail, not
// be taken over.
func (s *Secrets) create(ctx context.Context, hp *corev1.Pod, data map[string][]byte, annotations map[string]string, mp *corev1.Pod) error {
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: SecretName(hp.Name), Namespace: hp.Namespace,
		Labels: s.labels(hp.UID), Annotations: annotations}, Data: data, Type: corev1.SecretTypeOpaque}
	if mp != nil {
		sec.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: mp.Name, UID: mp.UID}}
	}
	err := member.Retry(ctx, s.Retry, func(ctx context.Context) error {
		_, err := s.Member.CoreV1().Secrets(hp.Namespace).Create(ctx, sec, metav1.CreateOptions{FieldManager: fieldManager})
		return err
	})
	if err == nil {
		s.Log.Info("wrote host token", "secret", hp.Namespace+"/"+sec.Name, "refreshAt", annotations[AnnotationRefreshAt])
	}
	return err
}

// apply writes data and annotations over cur, server-side, conditional on
// its resourceVersion (an object replaced meanwhile is not touched), owned
// by mp when given (else cur's owners stay).
func (s *Secrets) apply(ctx context.Context, cur *corev1.Secret, data map[string][]byte, annotations map[string]string, mp *corev1.Pod) (*corev1.Secret, error) {
	ac := acorev1.Secret(cur.Name, cur.Namespace).WithLabels(s.labels(types.UID(cur.Labels[podmeta.LabelHostUID]))).
		WithAnnotations(annotations).WithResourceVersion(cur.ResourceVersion).WithData(data).WithType(corev1.SecretTypeOpaque)
	for _, o := range cur.OwnerReferences {
		if mp == nil || o.UID != mp.UID {
			ac.WithOwnerReferences(ownerOf(o))
		}
	}
	if mp != nil {
		ac.WithOwnerReferences(ownerOf(metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: mp.Name, UID: mp.UID}))
	}
	var out *corev1.Secret
	err := member.Retry(ctx, s.Retry, func(ctx context.Context) error {
		var err error
		out, err = s.Member.CoreV1().Secrets(cur.Namespace).Apply(ctx, ac, metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
		return err
	})
	return out, err
}

func ownerOf(o metav1.OwnerReference) *ametav1.OwnerReferenceApplyConfiguration {
	return ametav1.OwnerReference().WithAPIVersion(o.APIVersion).WithKind(o.Kind).WithName(o.Name).WithUID(o.UID)
}

func (s *Secrets) delete(ctx context.Context, cur *corev1.Secret) error {
	uid := cur.UID
	err := member.Retry(ctx, s.Retry, func(ctx context.Context) error {
		return s.Member.CoreV1().Secrets(cur.Namespace).Delete(ctx, cur.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err == nil {
		s.Log.Info("deleted host token: its pod is not synced, or gets no host token", "secret", cur.Namespace+"/"+cur.Name)
	}
	return err
}

// due: the Secret's refresh time has come (or it has none).
func (s *Secrets) due(cur *corev1.Secret) bool {
	at, err := time.Parse(time.RFC3339, cur.Annotations[AnnotationRefreshAt])
	return err != nil || !s.Clock.Now().Before(at)
}

func (s *Secrets) labels(hostUID types.UID) map[string]string {
	return map[string]string{LabelCluster: s.Cluster, podmeta.LabelHost: s.HostIdentity, podmeta.LabelHostUID: string(hostUID)}
}

// ours: this host's leafsync made the Secret for this member.
func (s *Secrets) ours(l map[string]string) bool {
	return l[LabelCluster] == s.Cluster && l[podmeta.LabelHost] == s.HostIdentity
}

func ownedBy(sec *corev1.Secret, mp *corev1.Pod) bool {
	for _, o := range sec.OwnerReferences {
		if o.UID == mp.UID {
			return true
		}
	}
	return false
}
