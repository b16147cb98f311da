package decide

import (
	"fmt"

	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
	"github.com/leafsync/leafsync/internal/syncer/podsync/translate"
)

// decideUpdate adds UpdateMember when the member pod no longer shows the
// host pod as it is now: labels or annotations changed, a mutable spec
// field (images, activeDeadlineSeconds, tolerations) changed, or the host
// generation the member pod records is not the host pod's
// (translate.MemberUpdate). A member pod that has finished or is going is
// left alone: nothing written to it would run.
func decideUpdate(in Input, p *Plan) {
	mp := in.Member
	if mp.DeletionTimestamp != nil || podmeta.IsTerminal(mp) {
		return
	}
	u := translate.MemberUpdate(in.Host, mp)
	if u == nil {
		return
	}
	p.add(Action{Type: UpdateMember, MemberUID: mp.UID, MemberResourceVersion: mp.ResourceVersion, Update: u,
		Reason: "HostPodUpdated", Message: fmt.Sprintf("host pod %s/%s changed (generation %d)", in.Host.Namespace, in.Host.Name, in.Host.Generation)})
}
