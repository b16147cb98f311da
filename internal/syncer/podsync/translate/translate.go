// Package translate builds the member pod leafsync creates for a host pod
// (MemberPod), the hash of its spec, and the host objects it references.
package translate

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/leafsync/leafsync/internal/syncer/member"
	"github.com/leafsync/leafsync/internal/syncer/podsync/hosttoken"
	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
	"github.com/leafsync/leafsync/internal/syncer/reflector"
)

// kubeRootCA is the ConfigMap every namespace of every cluster gets from
// its own control plane; it is never copied.
const kubeRootCA = "kube-root-ca.crt"

// MemberPod builds the member pod for a host pod bound to leaf, and returns
// it with the hash of its spec (AnnotationSpecHash).
//
// The spec is the host's, minus what only means something in the host:
// node name, node selector and node affinity, topology spread, scheduler,
// priority class, overhead, readiness gates, ephemeral containers (added
// to the running member pod later: ephemeral.go) and leafsync's own
// tolerations. The pod runs as the member namespace's default
// ServiceAccount with automountServiceAccountToken=false: its API identity
// is its host ServiceAccount's (hostTokens), unless the host pod names a
// member ServiceAccount with AnnotationMemberServiceAccount, in which case
// the member mounts that ServiceAccount's own token as usual.
//
// Its labels say which host (host, the host's identity) and cluster it
// belongs to (podmeta.OwnedBy); its annotations record which label and
// annotation keys came from the host, and the host generation
// (MemberUpdate, update.go).
func MemberPod(hp *corev1.Pod, cluster, leaf, host string) (*corev1.Pod, string) {
	spec := MemberSpec(hp)
	hash := specHash(&spec)
	labels, annotations := hostLabels(hp), hostAnnotations(hp)
	record := hostRecord(hp, labels, annotations) // update.go
	labels[podmeta.LabelManaged] = "true"
	labels[podmeta.LabelCluster] = cluster
	labels[podmeta.LabelHost] = host
	labels[podmeta.LabelHostUID] = string(hp.UID)
	maps.Copy(annotations, record)
	annotations[podmeta.AnnotationLeaf] = leaf
	annotations[podmeta.AnnotationSpecHash] = hash
	if o := podmeta.OwnerOf(hp); o != "" {
		annotations[podmeta.AnnotationOwner] = o
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        hp.Name,
			Namespace:   hp.Namespace,
			Labels:      labels,
			Annotations: annotations,
		},
		Spec: spec,
	}, hash
}

// HostSpecHash is the hash MemberPod would give the host pod's member spec.
func HostSpecHash(hp *corev1.Pod) string {
	spec := MemberSpec(hp)
	return specHash(&spec)
}

// specHash hashes a member spec, with the admission's kube-api-access-*
// volume named without its random suffix: a recreated pod of the same
// template has the same hash (and may adopt the member pod).
func specHash(spec *corev1.PodSpec) string {
	spec = withoutTokenVolumeSuffix(spec)
	data, err := json.Marshal(spec)
	if err != nil {
		return "" // a PodSpec always marshals
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])[:16]
}

func withoutTokenVolumeSuffix(spec *corev1.PodSpec) *corev1.PodSpec {
	s := spec.DeepCopy()
	named := map[string]bool{}
	for i, v := range s.Volumes {
		if strings.HasPrefix(v.Name, kubeAPIAccessPrefix) {
			named[v.Name] = true
			s.Volumes[i].Name = kubeAPIAccessPrefix
		}
	}
	for _, cs := range [][]corev1.Container{s.InitContainers, s.Containers} {
		for i := range cs {
			for j, m := range cs[i].VolumeMounts {
				if named[m.Name] {
					cs[i].VolumeMounts[j].Name = kubeAPIAccessPrefix
				}
			}
		}
	}
	return s
}

func MemberSpec(hp *corev1.Pod) corev1.PodSpec {
	s := *hp.Spec.DeepCopy()
	s.NodeName = ""
	s.NodeSelector = nil
	if s.Affinity != nil {
		s.Affinity.NodeAffinity = nil
		if s.Affinity.PodAffinity == nil && s.Affinity.PodAntiAffinity == nil {
			s.Affinity = nil
		}
	}
	s.TopologySpreadConstraints = nil
	s.SchedulerName = ""
	s.PriorityClassName = ""
	s.Priority = nil
	s.PreemptionPolicy = nil
	s.Overhead = nil
	s.ReadinessGates = nil
	s.EphemeralContainers = nil
	s.SchedulingGates = nil
	var tol []corev1.Toleration
	for _, t := range s.Tolerations {
		if !strings.HasPrefix(t.Key, member.LeafsyncPrefix) {
			tol = append(tol, t)
		}
	}
	s.Tolerations = tol

	// ServiceAccount: the host's, through hostTokens.
	s.DeprecatedServiceAccount = ""
	if sa := hp.Annotations[podmeta.AnnotationMemberServiceAccount]; sa != "" {
		s.ServiceAccountName = sa
		s.AutomountServiceAccountToken = nil
	} else {
		s.ServiceAccountName = ""
		s.AutomountServiceAccountToken = ptr.To(false)
	}
	hostTokens(hp, &s)
	return s
}

// hostTokens translates the pod's projected service-account tokens. Each
// serviceAccountToken source becomes a source of the pod's token Secret
// (hosttoken.SecretName: leafsync writes a token of the host ServiceAccount
// there, requested with the projection's audience and lifetime), at the
// same path; in a volume with a token, kube-root-ca.crt's ca.crt becomes
// the Secret's (the host API server's CA). The volume's other sources
// (ConfigMaps, Secrets, downward API: the namespace's name is the same in
// the member) stay as the host pod has them. Every container gets
// KUBERNETES_SERVICE_HOST and _PORT from the Secret (the host API server's
// address the member reaches) unless it sets them itself. The Secret's
// sources are optional: with no host API address configured leafsync
// writes no Secret, and the pod runs with no token and no ca.crt in those
// volumes, and the member kubelet's own service variables.
//
// A pod that runs as a member ServiceAccount gets no host token: its
// admission-made kube-api-access-* volume is removed with its mounts (the
// member's admission mounts its own there), and from any other volume the
// token source alone.
func hostTokens(hp *corev1.Pod, s *corev1.PodSpec) {
	tokens := hosttoken.Wanted(hp)
	secret := hosttoken.SecretName(hp.Name)
	type source struct {
		volume string
		index  int
	}
	keys := map[source]string{} // token source -> its key in the Secret
	for _, t := range tokens {
		keys[source{t.Volume, t.Source}] = t.Key
	}
	memberSA := hp.Annotations[podmeta.AnnotationMemberServiceAccount] != ""
	removed := removedTokenVolumes(hp)
	var vols []corev1.Volume
	for _, v := range s.Volumes {
		if removed[v.Name] {
			continue
		}
		if v.Projected == nil || !projectsToken(v.Projected) {
			vols = append(vols, v)
			continue
		}
		var srcs []corev1.VolumeProjection
		for si, src := range v.Projected.Sources {
			switch {
			case src.ServiceAccountToken != nil && memberSA:
				continue
			case src.ServiceAccountToken != nil:
				src = secretSource(secret, corev1.KeyToPath{Key: keys[source{v.Name, si}], Path: src.ServiceAccountToken.Path})
			case src.ConfigMap != nil && src.ConfigMap.Name == kubeRootCA && !memberSA:
				src = secretSource(secret, caItems(src.ConfigMap.Items)...)
			}
			srcs = append(srcs, src)
		}
		v.Projected.Sources = srcs
		vols = append(vols, v)
	}
	s.Volumes = vols
	if len(removed) > 0 {
		for i := range s.InitContainers {
			s.InitContainers[i].VolumeMounts = keepMounts(s.InitContainers[i].VolumeMounts, removed)
		}
		for i := range s.Containers {
			s.Containers[i].VolumeMounts = keepMounts(s.Containers[i].VolumeMounts, removed)
		}
	}
	if len(tokens) == 0 {
		return
	}
	for i := range s.InitContainers {
		s.InitContainers[i].Env = withServiceEnv(s.InitContainers[i].Env, secret)
	}
	for i := range s.Containers {
		s.Containers[i].Env = withServiceEnv(s.Containers[i].Env, secret)
	}
}

// removedTokenVolumes are the volumes of a host pod the member pod does
// not get: the kube-api-access-* token volume of a pod that runs as a
// member ServiceAccount.
func removedTokenVolumes(hp *corev1.Pod) map[string]bool {
	removed := map[string]bool{}
	if hp.Annotations[podmeta.AnnotationMemberServiceAccount] == "" {
		return removed
	}
	for _, v := range hp.Spec.Volumes {
		if v.Projected != nil && projectsToken(v.Projected) && strings.HasPrefix(v.Name, kubeAPIAccessPrefix) {
			removed[v.Name] = true
		}
	}
	return removed
}

// kubeAPIAccessPrefix begins the name of the token volume the host's
// ServiceAccount admission adds (kube-api-access-<random>).
const kubeAPIAccessPrefix = "kube-api-access-"

// secretSource projects keys of the pod's token Secret, optional: with no
// host API address the Secret is never written.
func secretSource(name string, items ...corev1.KeyToPath) corev1.VolumeProjection {
	return corev1.VolumeProjection{Secret: &corev1.SecretProjection{
		LocalObjectReference: corev1.LocalObjectReference{Name: name}, Items: items, Optional: ptr.To(true)}}
}

// caItems maps the items of a kube-root-ca.crt projection (none: all its
// keys, that is ca.crt) onto the token Secret's CA.
func caItems(items []corev1.KeyToPath) []corev1.KeyToPath {
	if len(items) == 0 {
		return []corev1.KeyToPath{{Key: hosttoken.KeyCA, Path: hosttoken.KeyCA}}
	}
	out := make([]corev1.KeyToPath, len(items))
	for i, it := range items {
		out[i] = corev1.KeyToPath{Key: hosttoken.KeyCA, Path: it.Path, Mode: it.Mode}
	}
	return out
}

// serviceEnv are the variables in-cluster clients find the API server by,
// with the token Secret's keys holding the host API server's address.
var serviceEnv = []struct{ name, key string }{
	{"KUBERNETES_SERVICE_HOST", hosttoken.KeyServiceHost},
	{"KUBERNETES_SERVICE_PORT", hosttoken.KeyServicePort},
}

// withServiceEnv puts serviceEnv first in env (a later $(VAR) sees them),
// each unless the container sets it itself; optional, so that without the
// Secret the member kubelet's own service variables stay.
func withServiceEnv(env []corev1.EnvVar, secret string) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, e := range serviceEnv {
		if !slices.ContainsFunc(env, func(v corev1.EnvVar) bool { return v.Name == e.name }) {
			out = append(out, corev1.EnvVar{Name: e.name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: e.key, Optional: ptr.To(true)}}})
		}
	}
	return append(out, env...)
}

func projectsToken(p *corev1.ProjectedVolumeSource) bool {
	for _, src := range p.Sources {
		if src.ServiceAccountToken != nil {
			return true
		}
	}
	return false
}

func keepMounts(ms []corev1.VolumeMount, removed map[string]bool) []corev1.VolumeMount {
	var out []corev1.VolumeMount
	for _, m := range ms {
		if !removed[m.Name] {
			out = append(out, m)
		}
	}
	return out
}

// References returns the ConfigMaps and Secrets the spec of pod uses
// (volumes, projected sources, env and envFrom of every container,
// ephemeral ones included, image pull secrets), sorted, without
// kube-root-ca.crt (every member namespace has its own) and without the
// pod's token Secret (hosttoken.SecretName: leafsync writes it, it is no
// host object).
func References(pod string, spec *corev1.PodSpec) []reflector.Ref {
	type ref struct{ kind, name string }
	required := map[ref]bool{} // false: only optional uses so far
	token := hosttoken.SecretName(pod)
	add := func(kind, name string, optional *bool) {
		if name == "" || (kind == "ConfigMap" && name == kubeRootCA) || (kind == "Secret" && name == token) {
			return
		}
		r := ref{kind, name}
		required[r] = required[r] || optional == nil || !*optional
	}
	yes := ptr.To(true)
	for _, v := range spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			add("ConfigMap", v.ConfigMap.Name, v.ConfigMap.Optional)
		case v.Secret != nil:
			add("Secret", v.Secret.SecretName, v.Secret.Optional)
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				if src.ConfigMap != nil {
					add("ConfigMap", src.ConfigMap.Name, src.ConfigMap.Optional)
				}
				if src.Secret != nil {
					add("Secret", src.Secret.Name, src.Secret.Optional)
				}
			}
		}
	}
	containers := append(append([]corev1.Container(nil), spec.InitContainers...), spec.Containers...)
	for _, c := range spec.EphemeralContainers {
		containers = append(containers, corev1.Container{Env: c.Env, EnvFrom: c.EnvFrom})
	}
	for _, c := range containers {
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				continue
			}
			if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
				add("ConfigMap", r.Name, r.Optional)
			}
			if r := e.ValueFrom.SecretKeyRef; r != nil {
				add("Secret", r.Name, r.Optional)
			}
		}
		for _, e := range c.EnvFrom {
			if e.ConfigMapRef != nil {
				add("ConfigMap", e.ConfigMapRef.Name, e.ConfigMapRef.Optional)
			}
			if e.SecretRef != nil {
				add("Secret", e.SecretRef.Name, e.SecretRef.Optional)
			}
		}
	}
	for _, s := range spec.ImagePullSecrets {
		add("Secret", s.Name, yes)
	}
	out := make([]reflector.Ref, 0, len(required))
	for r, req := range required {
		out = append(out, reflector.Ref{Kind: r.kind, Name: r.name, Optional: !req})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Name < out[j].Name
	})
	return out
}
