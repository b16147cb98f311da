package syncer

import (
	"context"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// TestLeafNodeInformerRunsOnEveryShardedReplica: the leaves of a
// non-leading sharded replica wait for this informer, so it must not wait
// for leadership (controller-runtime runs a runnable that does not say on
// the leader only).
func TestLeafNodeInformerRunsOnEveryShardedReplica(t *testing.T) {
	run := func(context.Context) error { return nil }
	var sharded manager.Runnable = &replicaRunnable{sharded: true, run: run}
	if le, ok := sharded.(manager.LeaderElectionRunnable); !ok || le.NeedLeaderElection() {
		t.Fatal("sharded: the leaf Node informer waits for leadership")
	}
	var leader manager.Runnable = &replicaRunnable{run: run}
	if le, ok := leader.(manager.LeaderElectionRunnable); !ok || !le.NeedLeaderElection() {
		t.Fatal("unsharded: the leaf Node informer must run on the leader only, as before")
	}
}
