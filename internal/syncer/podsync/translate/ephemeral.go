package translate

import corev1 "k8s.io/api/core/v1"

// Ephemeral containers (kubectl debug) are never in the pod leafsync
// creates: the API refuses a pod created with them, so MemberSpec leaves
// them out and HostSpecHash does not see them (an adopted member pod only
// ever gains them). They are added to the running member pod through its
// ephemeralcontainers subresource, and can never be changed or removed.

// MemberEphemeralContainers are the host pod's ephemeral containers as the
// member pod gets them, translated as MemberSpec translates containers:
// mounts of the token volumes it removes are dropped (removedTokenVolumes);
// targetContainerName is kept (the member pod has the same containers).
func MemberEphemeralContainers(hp *corev1.Pod) []corev1.EphemeralContainer {
	if len(hp.Spec.EphemeralContainers) == 0 {
		return nil
	}
	removed := removedTokenVolumes(hp)
	out := make([]corev1.EphemeralContainer, len(hp.Spec.EphemeralContainers))
	for i := range hp.Spec.EphemeralContainers {
		hp.Spec.EphemeralContainers[i].DeepCopyInto(&out[i])
		if len(removed) > 0 {
			out[i].VolumeMounts = keepMounts(out[i].VolumeMounts, removed)
		}
	}
	return out
}

// MissingEphemeral are the host pod's ephemeral containers (translated)
// whose names the member pod lacks, in the host's order.
func MissingEphemeral(hp, mp *corev1.Pod) []corev1.EphemeralContainer {
	have := map[string]bool{}
	for _, c := range mp.Spec.EphemeralContainers {
		have[c.Name] = true
	}
	var missing []corev1.EphemeralContainer
	for _, c := range MemberEphemeralContainers(hp) {
		if !have[c.Name] {
			missing = append(missing, c)
		}
	}
	return missing
}

// MemberSpecWithEphemeral is MemberSpec with the host pod's ephemeral
// containers: the member pod's spec once they were all added, which is
// what its ConfigMap and Secret copies must serve (References).
func MemberSpecWithEphemeral(hp *corev1.Pod) corev1.PodSpec {
	s := MemberSpec(hp)
	s.EphemeralContainers = MemberEphemeralContainers(hp)
	return s
}
