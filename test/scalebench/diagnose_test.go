//go:build e2e

package scalebench

import (
	"context"
	"fmt"
	"strings"
	"syscall"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// diagnose tells, for leaves that still show a removed member node, what
// each side holds: the leaf Node as the host has it now (read afresh: the
// bench's informer could be the one behind), the markerResource leafsync
// computed at its last sync of that member (leafsync_leaf_allocatable: if
// it is still there, leafsync's member caches never saw the removal; if
// not, the write did not land), and whether the member still has the
// node. Then every replica is asked for a goroutine dump (SIGQUIT: the Go
// runtime writes every goroutine's stack to the process log and exits;
// the step has failed anyway), to show a stuck informer or worker.
func (b *bench) diagnose(ctx context.Context, leaves []string, memberIdx int, node string) {
	snaps := b.ls.scrape(b.t)
	shown := 0
	for _, l := range b.w.unlike(leaves, false) {
		if shown == 5 {
			break
		}
		shown++
		n, err := b.host.Client().CoreV1().Nodes().Get(ctx, l, metav1.GetOptions{})
		if err != nil {
			b.t.Logf("diagnose %s: reading the leaf: %v", l, err)
			continue
		}
		cluster := strings.TrimPrefix(l, "leaf-")
		var computed []string
		for i, s := range snaps {
			f, ok := s["leafsync_leaf_allocatable"]
			if !ok {
				continue
			}
			for _, m := range f.Metric {
				labels := map[string]string{}
				for _, p := range m.Label {
					labels[p.GetName()] = p.GetValue()
				}
				if labels["cluster"] == cluster && labels["resource"] == string(markerResource) {
					computed = append(computed, fmt.Sprintf("%s %s=%g", b.ls.name(i), labels["resource"], m.GetGauge().GetValue()))
				}
			}
		}
		q := n.Status.Capacity[markerResource]
		b.t.Logf("diagnose %s: the host's leaf offers %s of %s (resourceVersion %s); leafsync computed %v", l, q.String(), markerResource, n.ResourceVersion, computed)
	}
	if _, err := b.members[memberIdx].Client().CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); err == nil {
		b.t.Logf("diagnose: member-%d still has node %s", memberIdx, node)
	} else {
		b.t.Logf("diagnose: member-%d: node %s: %v", memberIdx, node, err)
	}
	for _, l := range b.ls {
		_ = syscall.Kill(l.Pid(), syscall.SIGQUIT)
		b.t.Logf("diagnose: asked %s for a goroutine dump: see %s", l.Name, l.LogPath())
	}
}
