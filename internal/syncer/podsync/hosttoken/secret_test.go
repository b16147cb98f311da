package hosttoken

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/leafsync/leafsync/internal/syncer/member"
	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
	"github.com/leafsync/leafsync/internal/syncer/reflector"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func TestRefreshAt(t *testing.T) {
	for _, c := range []struct {
		ttl, want time.Duration
	}{
		{600 * time.Second, 480 * time.Second},
		{3607 * time.Second, 2885600 * time.Millisecond},
		{48 * time.Hour, 24 * time.Hour}, // at least daily
	} {
		if got := RefreshAt(t0, c.ttl).Sub(t0); got != c.want {
			t.Errorf("RefreshAt(%s) = +%s, want +%s", c.ttl, got, c.want)
		}
	}
}

func TestSecretName(t *testing.T) {
	if got := SecretName("web-0"); got != "web-0-host-token" {
		t.Errorf("SecretName(web-0) = %s", got)
	}
	long := "p" + fmt.Sprintf("%0250d", 0)
	if got := SecretName(long); len(got) > 253 || got == SecretName(long+"x") {
		t.Errorf("SecretName of a 251-character name = %q (%d)", got, len(got))
	}
}

// tokenPod is a host pod with the admission's token volume (lifetime
// 600 s, the API's minimum) and a vault-audience token volume.
func tokenPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web-0", UID: "host-uid-1"},
		Spec: corev1.PodSpec{ServiceAccountName: "builder", Volumes: []corev1.Volume{
			{Name: "kube-api-access-x", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](600)}}}}}},
			{Name: "vault", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "vault-token", Audience: "vault", ExpirationSeconds: ptr.To[int64](7200)}}}}}},
		}},
	}
}

type fixture struct {
	host, member *fake.Clientset
	clock        *clocktesting.FakeClock
	requests     []authenticationv1.TokenRequest
	s            *Secrets
}

func newFixture(t *testing.T, server string) *fixture {
	f := &fixture{
		host:   fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "kube-root-ca.crt"}, Data: map[string]string{"ca.crt": "HOST CA"}}),
		member: fake.NewClientset(),
		clock:  clocktesting.NewFakeClock(t0),
	}
	f.host.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "token" {
			return false, nil, nil
		}
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenRequest)
		f.requests = append(f.requests, *tr)
		out := tr.DeepCopy()
		out.Status.Token = fmt.Sprintf("token-%d-for-%s", len(f.requests), a.(k8stesting.CreateAction).GetObject().(metav1.Object).GetName())
		return true, out, nil
	})
	f.s = &Secrets{Host: f.host, Member: f.member, Cluster: "member-a", HostIdentity: "host-1", Server: server,
		Clock: f.clock, Retry: member.RetryOptions{MaxRetries: 1}, Log: logr.Discard()}
	return f
}

func (f *fixture) secret(t *testing.T) *corev1.Secret {
	t.Helper()
	s, err := f.member.CoreV1().Secrets("apps").Get(context.Background(), "web-0-host-token", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestEnsureWritesHostTokens: each token of the pod requested from the
// host for its ServiceAccount, bound to the host pod, with the
// projection's audience and lifetime; written with the host CA and
// address, refreshed at 80% of the shortest lifetime.
func TestEnsureWritesHostTokens(t *testing.T) {
	f := newFixture(t, "https://host.example:6443")
	hp := tokenPod()
	if err := f.s.Ensure(context.Background(), hp); err != nil {
		t.Fatal(err)
	}
	if len(f.requests) != 2 {
		t.Fatalf("%d token requests, want 2", len(f.requests))
	}
	for i, want := range []struct {
		aud []string
		exp int64
	}{{nil, 600}, {[]string{"vault"}, 7200}} {
		r := f.requests[i].Spec
		if fmt.Sprint(r.Audiences) != fmt.Sprint(want.aud) || *r.ExpirationSeconds != want.exp ||
			r.BoundObjectRef == nil || r.BoundObjectRef.Kind != "Pod" || r.BoundObjectRef.Name != "web-0" || r.BoundObjectRef.UID != "host-uid-1" {
			t.Errorf("request %d = %+v, want audiences %v, %ds, bound to the host pod", i, r, want.aud, want.exp)
		}
	}
	s := f.secret(t)
	for k, v := range map[string]string{"token": "token-1-for-", "token-1": "token-2-for-", KeyCA: "HOST CA", KeyServiceHost: "host.example", KeyServicePort: "6443"} {
		if got := string(s.Data[k]); len(got) < len(v) || got[:len(v)] != v {
			t.Errorf("data[%s] = %q, want %q", k, got, v)
		}
	}
	if s.Labels[LabelCluster] != "member-a" || s.Labels[podmeta.LabelHostUID] != "host-uid-1" || s.Labels[podmeta.LabelManaged] != "" {
		t.Errorf("labels %v: want the token Secret's, not a reflector copy's", s.Labels)
	}
	if got, want := s.Annotations[AnnotationRefreshAt], t0.Add(480*time.Second).Format(time.RFC3339); got != want {
		t.Errorf("refresh at %s, want %s (80%% of 600 s)", got, want)
	}

	// Not due: nothing requested again.
	if err := f.s.Ensure(context.Background(), hp); err != nil || len(f.requests) != 2 {
		t.Fatalf("Ensure again: %v, %d requests", err, len(f.requests))
	}
}

// TestRefreshSchedule: before 80% of the lifetime nothing is requested;
// at it both tokens are; the member pod becomes the owner; a pod gone
// from the leaf takes its Secret.
func TestRefreshSchedule(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "host.example:6443")
	hp := tokenPod()
	if err := f.s.Ensure(ctx, hp); err != nil {
		t.Fatal(err)
	}
	mp := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web-0", UID: "member-uid", Labels: map[string]string{podmeta.LabelHostUID: "host-uid-1"}}}
	hostPods := map[types.UID]*corev1.Pod{hp.UID: hp}
	memberPods := map[types.NamespacedName]*corev1.Pod{{Namespace: "apps", Name: "web-0"}: mp}

	f.clock.Step(479 * time.Second)
	if err := f.s.Refresh(ctx, hostPods, memberPods); err != nil {
		t.Fatal(err)
	}
	if len(f.requests) != 2 {
		t.Errorf("%d requests before 80%% of the lifetime, want 2 (the first ones)", len(f.requests))
	}
	if s := f.secret(t); len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != "member-uid" {
		t.Errorf("owners %v, want the member pod", s.OwnerReferences)
	}
	f.clock.Step(time.Second)
	if err := f.s.Refresh(ctx, hostPods, memberPods); err != nil {
		t.Fatal(err)
	}
	s := f.secret(t)
	if len(f.requests) != 4 || string(s.Data["token"]) != "token-3-for-" {
		t.Errorf("%d requests, token %q at 80%%: want refreshed", len(f.requests), s.Data["token"])
	}
	if got, want := s.Annotations[AnnotationRefreshAt], t0.Add(960*time.Second).Format(time.RFC3339); got != want {
		t.Errorf("next refresh at %s, want %s", got, want)
	}
	if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != "member-uid" {
		t.Errorf("owners after refresh %v, want the member pod", s.OwnerReferences)
	}

	// Deleted by hand: written again for the synced pod.
	if err := f.member.CoreV1().Secrets("apps").Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.s.Refresh(ctx, hostPods, memberPods); err != nil {
		t.Fatal(err)
	}
	f.secret(t)

	// The host pod gone: the Secret goes.
	if err := f.s.Refresh(ctx, nil, memberPods); err != nil {
		t.Fatal(err)
	}
	if _, err := f.member.CoreV1().Secrets("apps").Get(ctx, s.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Secret of a pod gone: %v, want deleted", err)
	}
}

// TestEnsureBoundary: a member Secret of the name leafsync did not make is
// never used or changed (the pod is refused), with or without a host API
// address; without one, no token is written.
func TestEnsureBoundary(t *testing.T) {
	ctx := context.Background()
	for _, server := range []string{"", "host.example:6443"} {
		f := newFixture(t, server)
		theirs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web-0-host-token"}, Data: map[string][]byte{"token": []byte("member's")}}
		if _, err := f.member.CoreV1().Secrets("apps").Create(ctx, theirs, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var refusal reflector.Refusal
		if err := f.s.Ensure(ctx, tokenPod()); !errors.As(err, &refusal) || refusal.Reason != "MemberObjectConflict" {
			t.Errorf("server %q: Ensure = %v, want a MemberObjectConflict refusal", server, err)
		}
		if s := f.secret(t); string(s.Data["token"]) != "member's" || len(f.requests) != 0 {
			t.Errorf("server %q: the member's Secret changed or a token was requested", server)
		}
	}
	f := newFixture(t, "")
	if err := f.s.Ensure(ctx, tokenPod()); err != nil || len(f.requests) != 0 {
		t.Errorf("no server: Ensure = %v with %d requests, want nothing done", err, len(f.requests))
	}
	if _, err := f.member.CoreV1().Secrets("apps").Get(ctx, "web-0-host-token", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("no server: a token Secret was written (%v)", err)
	}
}

// TestEnsureTokenRefused: the host refusing the token request (RBAC) is a
// Refusal naming the ServiceAccount; nothing is written.
func TestEnsureTokenRefused(t *testing.T) {
	f := newFixture(t, "host.example:6443")
	f.host.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(corev1.Resource("serviceaccounts/token"), "builder", errors.New("no"))
	})
	var refusal reflector.Refusal
	if err := f.s.Ensure(context.Background(), tokenPod()); !errors.As(err, &refusal) || refusal.Reason != "HostTokenNotIssued" {
		t.Fatalf("Ensure = %v, want a HostTokenNotIssued refusal", err)
	}
	if _, err := f.member.CoreV1().Secrets("apps").Get(context.Background(), "web-0-host-token", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Secret was written (%v)", err)
	}
}
