package decide

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
	"github.com/leafsync/leafsync/internal/syncer/podsync/translate"
)

// decideEphemeral adds its action when the host pod has ephemeral
// containers (kubectl debug) the member pod lacks. They can only be added,
// never changed or removed, so only the missing names go (decideLive calls
// it for a running member pod only). Each is held to the member's Pod
// Security level with the pod as it would then be, as the member's
// admission would: one refused is
// never sent, the host pod gets a Warning Event, and the pod keeps
// running; it is looked at again when a pod changes, not on a timer.
func decideEphemeral(in Input, p *Plan) {
	hp, mp := in.Host, in.Member
	missing := translate.MissingEphemeral(hp, mp)
	if len(missing) == 0 {
		return
	}
	after, _ := translate.MemberPod(hp, in.Cluster, "", "")
	after.Spec.EphemeralContainers = mp.Spec.EphemeralContainers
	var add []corev1.EphemeralContainer
	var refused []string
	for _, c := range missing {
		try := after.DeepCopy()
		try.Spec.EphemeralContainers = append(try.Spec.EphemeralContainers, c)
		if v := podSecurityViolations(in.Admission.Level(), try); v != "" {
			refused = append(refused, v)
			continue
		}
		after = try
		add = append(add, c)
	}
	if len(refused) > 0 {
		p.add(Action{Type: Event, Warning: true, Reason: "EphemeralContainerNotSynced", Message: fmt.Sprintf(
			"violates PodSecurity %q: %s; not added in member %s, whose registration holds its pods to %s; the member's owner can set %s on the Secret",
			string(in.Admission.Level())+":latest", strings.Join(refused, "; "), in.Cluster, in.Admission.Level(), podmeta.AnnotationPodSecurity)})
	}
	if len(add) > 0 {
		p.add(Action{Type: UpdateEphemeral, MemberUID: mp.UID, Ephemeral: add})
	}
}
