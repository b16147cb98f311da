package podsync

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/leafsync/leafsync/internal/runner"
	"github.com/leafsync/leafsync/internal/syncer/member"
	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
)

// TestNameFreedAsksOnlyTheMemberHoldingTheName: a member pod of leafsync's
// that goes frees its name for the host pod of that name only, so only the
// member following that pod's leaf looks again; a pod leafsync did not
// place frees nothing. Asking every member made a fleet's pod deletes cost
// O(members²) queue adds.
func TestNameFreedAsksOnlyTheMemberHoldingTheName(t *testing.T) {
	hostPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db-0"}, Spec: corev1.PodSpec{NodeName: "leaf-b"}}
	c := &Controller{hostPods: newHostPods(fake.NewClientset(hostPod))}
	ctx, cancel := context.WithCancel(context.Background())
	c.hostPods.start(ctx)
	defer c.hostPods.stop() // after cancel: stop waits for the informer
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), c.hostPods.HasSynced) {
		t.Fatal("host pods did not sync")
	}
	queues := map[string]*memberSync{}
	for _, cluster := range []string{"a", "b", "c"} {
		ms := &memberSync{c: c, cluster: cluster, queue: runner.New[key](runner.Func[key](nil), runner.Options[key]{Name: "test"})}
		c.hostPods.setLeaf(ms, "", "leaf-"+cluster)
		c.members.Set(cluster, ms)
		queues[cluster] = ms
	}
	lens := func() map[string]int {
		return map[string]int{"a": queues["a"].queue.Len(), "b": queues["b"].queue.Len(), "c": queues["c"].queue.Len()}
	}

	ours := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db-0", Labels: map[string]string{podmeta.LabelHostUID: "old"}}}
	foreign := &member.ForeignPod{Namespace: "default", Name: "db-0"}
	c.nameFreed("b", foreign)
	c.nameFreed("a", foreign)
	c.nameFreed("b", ours) // its own: b's pod informer asks b
	if got := lens(); got["a"]+got["b"]+got["c"] != 0 {
		t.Fatalf("queued %v for a foreign pod or b's own, want nothing", got)
	}
	c.nameFreed("a", cache.DeletedFinalStateUnknown{Key: "default/db-0", Obj: ours})
	if got := lens(); got["a"] != 0 || got["b"] != 1 || got["c"] != 0 {
		t.Errorf("queued %v after a's copy of db-0 went, want only b (its leaf holds the host pod db-0)", got)
	}
	c.nameFreed("a", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-0"}})
	if got := lens(); got["a"]+got["b"]+got["c"] != 1 {
		t.Errorf("queued %v for a name no host pod holds, want nothing more", got)
	}
}
