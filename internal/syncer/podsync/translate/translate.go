// Package translate builds the member pod leafsync creates for a host pod
// (MemberPod), the hash of its spec, and the host objects it references.
package translate

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/leafsync/leafsync/internal/syncer/member"
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
// tolerations. No host ServiceAccount token goes down: the
// pod runs as the member namespace's default ServiceAccount with
// automountServiceAccountToken=false and every projected volume carrying a
// service-account token removed — unless the host pod names a member
// ServiceAccount with AnnotationMemberServiceAccount, in which case the
// member mounts that ServiceAccount's own token as usual.
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

func specHash(spec *corev1.PodSpec) string {
	data, err := json.Marshal(spec)
	if err != nil {
		return "" // a PodSpec always marshals
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])[:16]
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

	// ServiceAccount: never the host's token.
	s.DeprecatedServiceAccount = ""
	if sa := hp.Annotations[podmeta.AnnotationMemberServiceAccount]; sa != "" {
		s.ServiceAccountName = sa
		s.AutomountServiceAccountToken = nil
	} else {
		s.ServiceAccountName = ""
		s.AutomountServiceAccountToken = ptr.To(false)
	}
	removed := map[string]bool{}
	var vols []corev1.Volume
	for _, v := range s.Volumes {
		if v.Projected != nil && projectsToken(v.Projected) {
			removed[v.Name] = true
			continue
		}
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
	return s
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

// References returns the ConfigMaps and Secrets a pod spec uses (volumes,
// projected sources, env and envFrom of every container, ephemeral ones
// included, image pull secrets), sorted, without
// kube-root-ca.crt (every member namespace has its own).
func References(spec *corev1.PodSpec) []reflector.Ref {
	type ref struct{ kind, name string }
	required := map[ref]bool{} // false: only optional uses so far
	add := func(kind, name string, optional *bool) {
		if name == "" || (kind == "ConfigMap" && name == kubeRootCA) {
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
