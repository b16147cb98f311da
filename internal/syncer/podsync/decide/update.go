package decide

import (
	"fmt"

	"github.com/leafsync/leafsync/internal/syncer/podsync/translate"
)

// decideUpdate adds UpdateMember when the member pod no longer shows the
// host pod as it is now: labels or annotations changed, a mutable spec
// field (images, activeDeadlineSeconds, tolerations) changed, or the host
// generation the member pod records is not the host pod's
// (translate.MemberUpdate). decideLive calls it for a running member pod
// only.
func decideUpdate(in Input, p *Plan) {
	mp := in.Member
	u := translate.MemberUpdate(in.Host, mp)
	if u == nil {
		return
	}
	p.add(Action{Type: UpdateMember, MemberUID: mp.UID, MemberResourceVersion: mp.ResourceVersion, Update: u,
		Reason: "HostPodUpdated", Message: fmt.Sprintf("host pod %s/%s changed (generation %d)", in.Host.Namespace, in.Host.Name, in.Host.Generation)})
}
