package hosttoken

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
)

// The keys of a token Secret besides the tokens (TokenKey).
const (
	// KeyCA is the host API server's CA bundle (the host namespace's
	// kube-root-ca.crt), replacing the member's in a token volume.
	KeyCA = "ca.crt"
	// KeyServiceHost and KeyServicePort are the host API server's address
	// the member reaches, given to the containers as
	// KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT.
	KeyServiceHost = "kubernetes-service-host"
	KeyServicePort = "kubernetes-service-port"
)

// Labels and annotations of a token Secret.
const (
	// LabelCluster marks a token Secret leafsync made in this member (its
	// value is the cluster name). It is not podmeta.LabelManaged: the
	// reflector's copies are another kind of object, collected by other
	// rules.
	LabelCluster = "leafsync.io/host-token"
	// AnnotationRefreshAt is when the tokens are requested again (RFC
	// 3339, leafsync's clock): at 80% of the shortest lifetime, as a
	// kubelet does.
	AnnotationRefreshAt = "leafsync.io/token-refresh-at"
	// AnnotationExpiresAt is when the first of its tokens expires.
	AnnotationExpiresAt = "leafsync.io/token-expires-at"
)

// suffix ends every token Secret's name.
const suffix = "-host-token"

// SecretName is the member Secret holding the host tokens of the pod of
// that name (one per pod, in the pod's namespace).
func SecretName(pod string) string {
	if name := pod + suffix; len(validation.IsDNS1123Subdomain(name)) == 0 {
		return name
	}
	sum := sha256.Sum256([]byte(pod))
	return "pod-" + hex.EncodeToString(sum[:16]) + suffix
}

// TokenKey is the Secret key of a pod's n-th token source (counted over
// its volumes in order): "token", then "token-1", "token-2"…; by position,
// not by volume name, since a recreated pod's admission names its token
// volume anew.
func TokenKey(n int) string {
	if n == 0 {
		return "token"
	}
	return fmt.Sprintf("token-%d", n)
}

// Token is one serviceAccountToken source of a host pod.
type Token struct {
	Volume string // the projected volume
	Source int    // its index among the volume's sources
	Key    string // TokenKey
	// Audience ("" means the host API server's own) and lifetime requested.
	Audience          string
	ExpirationSeconds int64
}

// defaultExpirationSeconds is the API's default of a projection's
// expirationSeconds.
const defaultExpirationSeconds = 3600

// Wanted are the host tokens a host pod gets in the member: one per
// serviceAccountToken source of its projected volumes, none for a pod that
// runs as a member ServiceAccount (podmeta.AnnotationMemberServiceAccount:
// the member's admission mounts that account's token instead).
func Wanted(hp *corev1.Pod) []Token {
	if hp.Annotations[podmeta.AnnotationMemberServiceAccount] != "" {
		return nil
	}
	var out []Token
	for _, v := range hp.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for i, src := range v.Projected.Sources {
			p := src.ServiceAccountToken
			if p == nil {
				continue
			}
			exp := int64(defaultExpirationSeconds)
			if p.ExpirationSeconds != nil {
				exp = *p.ExpirationSeconds
			}
			out = append(out, Token{Volume: v.Name, Source: i, Key: TokenKey(len(out)), Audience: p.Audience, ExpirationSeconds: exp})
		}
	}
	return out
}

// maxRefresh: a token is requested again at least daily, as a kubelet does.
const maxRefresh = 24 * time.Hour

// RefreshAt is when tokens issued at issued, valid for ttl, are requested
// again: at 80% of their lifetime (at most a day later), as the kubelet's
// token manager does, so a client rereading the file never holds an
// expired token.
func RefreshAt(issued time.Time, ttl time.Duration) time.Time {
	return issued.Add(min(ttl*8/10, maxRefresh))
}
