//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/leafsync/leafsync/internal/leafnode"
	"github.com/leafsync/leafsync/internal/syncer/podsync/deletes"
	"github.com/leafsync/leafsync/internal/syncer/store"
	"github.com/leafsync/leafsync/internal/syncer/store/etcdstore"
	"github.com/leafsync/leafsync/internal/syncer/store/kubestore"
	"github.com/leafsync/leafsync/internal/syncer/store/storetest"
	"github.com/leafsync/leafsync/test/harness"
)

// storeCheckpoint is store.checkpointInterval in the restart tests: one
// probe interval, so that a restart mid-outage (restart gap ~1s) moves
// NotReady by less than one probe interval (docs/state-store.md has the
// bound; unit tests sweep it).
const storeCheckpoint = time.Second

// TestStoreRestartKube restarts leafsync (kill -9, start again) in the
// middle of an outage, of a flap and of a NotReady period, with the
// default kube backend (ConfigMaps in the host).
func TestStoreRestartKube(t *testing.T) {
	f := newFleet(t, harness.HostOptions{},
		harness.MemberOptions{Name: "member-a", Nodes: 1}, harness.MemberOptions{Name: "member-b", Nodes: 1})
	ks, err := kubestore.New(f.host.Client(), leafsyncNamespace, "")
	if err != nil {
		t.Fatal(err)
	}
	restartScenarios(t, f, "store:\n  backend: kube\n", ks, func(t *testing.T, cluster string) {
		cm, err := f.host.Client().CoreV1().ConfigMaps(leafsyncNamespace).Get(context.Background(), "leafsync-state-"+cluster, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the state of %s is not in the host: %v", cluster, err)
		}
		if cm.Labels[kubestore.LabelCluster] != cluster || cm.Data[kubestore.KeyState] == "" {
			t.Fatalf("ConfigMap %s: labels %v, keys %d", cm.Name, cm.Labels, len(cm.Data))
		}
		t.Logf("state of %s: ConfigMap %s/%s, %d bytes, resourceVersion %s", cluster, cm.Namespace, cm.Name, len(cm.Data[kubestore.KeyState]), cm.ResourceVersion)
	})
}

// TestStoreRestartEtcd is TestStoreRestartKube with the etcd backend, on
// an etcd of its own started by the harness.
func TestStoreRestartEtcd(t *testing.T) {
	f := newFleet(t, harness.HostOptions{},
		harness.MemberOptions{Name: "member-a", Nodes: 1}, harness.MemberOptions{Name: "member-b", Nodes: 1})
	etcd := harness.StartEtcd(t, harness.LogDir(t), harness.EtcdOptions{Name: "state-etcd"})
	snippet := fmt.Sprintf("store:\n  backend: etcd\n  etcd:\n    endpoints: [%s]\n    prefix: /leafsync-e2e/\n", strings.Join(etcd.Endpoints(), ", "))
	es2, err := etcdstore.New(etcdstore.Options{Endpoints: etcd.Endpoints(), Prefix: "/leafsync-e2e/"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = es2.Close() })
	restartScenarios(t, f, snippet, es2, func(t *testing.T, cluster string) {
		st, v, err := es2.Get(context.Background(), cluster)
		if err != nil {
			t.Fatalf("the state of %s is not in etcd: %v", cluster, err)
		}
		t.Logf("state of %s: etcd key %s, mod revision %s, term %d", cluster, es2.Key(cluster), v, st.Term)
	})
}

// snapshot is the part of a persisted hysteresis snapshot the tests read.
type snapshot struct {
	State string    `json:"state"`
	Since time.Time `json:"since"`
	Last  *struct {
		T  time.Time `json:"t"`
		OK bool      `json:"ok"`
	} `json:"last"`
	Penalty  float64 `json:"penalty"`
	Counters struct {
		FlapsSuppressed uint64            `json:"flapsSuppressed"`
		Transitions     map[string]uint64 `json:"transitions"`
	} `json:"counters"`
}

func readRecord(t *testing.T, s store.Store, cluster string) (storetest.State, snapshot, error) {
	t.Helper()
	st, err := readCluster(context.Background(), s, cluster)
	if err != nil {
		return st, snapshot{}, err
	}
	var snap snapshot
	if err := json.Unmarshal(st.Hysteresis, &snap); err != nil {
		return st, snap, fmt.Errorf("record of %s: %w", cluster, err)
	}
	return st, snap, nil
}

// restartScenarios runs the restart scenarios on a fleet of two members:
// member-a has an outage, member-b flaps. s reads the store leafsync uses;
// inspect checks the record where it should be, raw.
func restartScenarios(t *testing.T, f *fleet, storeSnippet string, s store.Store, inspect func(*testing.T, string)) {
	// The flap must look to the engine as it does in production, where the
	// breaker's openTimeout (5s) equals the probe interval: with the test's
	// 1s probes, a 5s open breaker would fail the probes after the heal
	// for up to 5s more and stretch a 7s flap past notReadyAfter.
	base := strings.Replace(testConfig, "members:\n  probeTimeout: 1s\n",
		"members:\n  probeTimeout: 1s\n  breaker:\n    openTimeout: 1s\n", 1)
	if base == testConfig {
		t.Fatal("testConfig has no members section to add the breaker's openTimeout to")
	}
	cfg := base + storeSnippet + fmt.Sprintf("  checkpointInterval: %s\n", storeCheckpoint)
	f.config = filepath.Join(harness.LogDir(t), "leafsync-store-config.yaml")
	if err := os.WriteFile(f.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	// leafsync processes belong to the whole test, not to the subtest that
	// starts them (a subtest's cleanup would kill them).
	top := t
	a, b := f.members["member-a"], f.members["member-b"]
	const leafA, leafB = "leaf-member-a", "leaf-member-b"
	gen := 1
	ls := f.startLeafsync(t, "leafsync-1")
	f.register(t, "member-a", nil)
	f.register(t, "member-b", nil)
	f.waitLeafReady(t, leafA, time.Minute)
	f.waitLeafReady(t, leafB, time.Minute)

	// restart kills leafsync and starts a new process at once; it returns
	// when the new one is ready.
	restart := func(t *testing.T) time.Duration {
		t.Helper()
		ls.Kill()
		killed := time.Now()
		gen++
		ls = f.startLeafsync(top, fmt.Sprintf("leafsync-%d", gen))
		took := time.Since(killed)
		t.Logf("leafsync killed and started again (process %d ready after %s)", gen, took.Round(time.Millisecond))
		return took
	}
	// waitState waits until a member's record says state.
	waitState := func(t *testing.T, cluster, state string) snapshot {
		t.Helper()
		var snap snapshot
		harness.Eventually(t, 20*time.Second, cluster+" saved as "+state, func() (err error) {
			if _, snap, err = readRecord(t, s, cluster); err != nil {
				return err
			}
			if snap.State != state {
				return fmt.Errorf("saved state %s", snap.State)
			}
			return nil
		})
		return snap
	}
	cordoned := func(leaf string) func() error {
		return func() error {
			if !hasTaint(f.node(t, leaf), leafnode.TaintUnreachable, corev1.TaintEffectNoSchedule) {
				return fmt.Errorf("not cordoned")
			}
			return nil
		}
	}
	uncordoned := func(leaf string) func() error {
		return func() error {
			if hasTaint(f.node(t, leaf), leafnode.TaintUnreachable, corev1.TaintEffectNoSchedule) {
				return fmt.Errorf("still cordoned")
			}
			return nil
		}
	}

	t.Run("flap without restart is saved", func(t *testing.T) {
		b.proxy.Cut()
		cutAt := time.Now()
		harness.Eventually(t, 10*time.Second, "member-b cordoned", cordoned(leafB))
		time.Sleep(time.Until(cutAt.Add(5 * time.Second)))
		if err := b.proxy.Heal(); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, 15*time.Second, "member-b uncordoned", uncordoned(leafB))
		snap := waitState(t, "member-b", "Ready")
		if snap.Counters.FlapsSuppressed != 1 {
			t.Fatalf("member-b saved with %d flaps, want 1", snap.Counters.FlapsSuppressed)
		}
		inspect(t, "member-b")
	})

	// An owed delete: the host deleted the pod while member-a was down, so
	// leafsync owes the delete of member pod workload/web-0 (created below,
	// behind leafsync's back, as if leafsync had synced it). Pod sync
	// executes it once member-a is Ready again — if the record survived.
	// Without it, pod sync would keep the pod as an orphan (Deferred).
	const owedPod, owedUID = "web-0", "1d7c0b7e-0000-4000-8000-00000000e2e0"
	memberPodExists := func() (bool, error) {
		p, err := a.Client().CoreV1().Pods("workload").Get(context.Background(), owedPod, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && p.DeletionTimestamp == nil, err
	}
	var termBefore uint64
	t.Run("restart mid-outage and mid-flap", func(t *testing.T) {
		recB := recordNode(t, f.host, leafB)
		a.proxy.Cut()
		b.proxy.Cut()
		cutAt := time.Now()
		if _, err := a.AddPods(context.Background(), "web", 1, []string{"member-a-node-0"}, harness.PodSpec{Namespace: "workload",
			Labels: map[string]string{"leafsync.io/managed": "true", "leafsync.io/cluster": "member-a", "leafsync.io/host-uid": owedUID}}); err != nil {
			t.Fatal(err)
		}
		suspectSince := waitState(t, "member-a", "Suspect").Since
		waitState(t, "member-b", "Suspect")
		time.Sleep(time.Until(cutAt.Add(4 * time.Second)))
		rec, before, err := readRecord(t, s, "member-a")
		if err != nil {
			t.Fatal(err)
		}
		termBefore = rec.Term
		ls.Kill()
		killedAt := time.Now()
		// While no leafsync runs, the previous process's last act: an owed
		// delete recorded for member-a (pod sync writes these through the
		// Keeper). It must survive the restart.
		addOwed(t, s, "member-a", deletes.PendingDelete{Kind: deletes.Owed, Namespace: "workload", Name: owedPod,
			HostUID: owedUID, Since: time.Now().UTC().Truncate(time.Second)})
		gen++
		ls = f.startLeafsync(top, fmt.Sprintf("leafsync-%d", gen))
		restartedAt := time.Now()
		t.Logf("leafsync killed %s into the outage, new process ready %s later", killedAt.Sub(cutAt).Round(time.Millisecond), time.Since(killedAt).Round(time.Millisecond))
		// The engine's view of the restart: the last observation the old
		// process saved, and the first the new one saved (it checkpoints
		// at once: the outage is in progress).
		harness.Eventually(t, 10*time.Second, "member-a saved by the new process", func() error {
			rec, after, err := readRecord(t, s, "member-a")
			if err != nil {
				return err
			}
			if rec.Term <= termBefore || after.Last == nil || before.Last == nil {
				return fmt.Errorf("not yet")
			}
			t.Logf("member-a: last observation saved before the kill %s after the cut; first after the restart %s after the cut (an evidence gap of %s, of which the engine credits at most %s)",
				before.Last.T.Sub(cutAt).Round(time.Millisecond), after.Last.T.Sub(cutAt).Round(time.Millisecond),
				after.Last.T.Sub(before.Last.T).Round(time.Millisecond), 3*probeInterval/2)
			return nil
		})
		time.Sleep(time.Until(cutAt.Add(7 * time.Second)))
		if err := b.proxy.Heal(); err != nil {
			t.Fatal(err)
		}
		t.Logf("member-b healed after a %s flap", time.Since(cutAt).Round(time.Millisecond))

		var notReadyAt time.Time
		harness.Eventually(t, notReadyAfter+probeInterval+writeSlack+10*time.Second, "leaf-member-a NotReady", func() error {
			if st := harness.NodeReady(f.node(t, leafA)); st == corev1.ConditionTrue {
				return fmt.Errorf("Ready=%s", st)
			}
			notReadyAt = time.Now()
			return nil
		})
		took := notReadyAt.Sub(cutAt)
		t.Logf("leaf-member-a NotReady %s after the cut, with a restart in between (notReadyAfter %s + probe interval %s; without a restart TestLeafNode measures the same bound)",
			took.Round(time.Millisecond), notReadyAfter, probeInterval)
		if took < notReadyAfter {
			t.Errorf("NotReady after %s: before notReadyAfter %s", took, notReadyAfter)
		}
		// A restart that reset the engine's clock would go NotReady no
		// sooner than notReadyAfter after the new process's first probe.
		if !notReadyAt.Before(restartedAt.Add(notReadyAfter)) {
			t.Errorf("NotReady %s after the new process was ready: the restart reset the outage's clock (a fresh start takes notReadyAfter %s)", notReadyAt.Sub(restartedAt).Round(time.Millisecond), notReadyAfter)
		}
		harness.Eventually(t, 15*time.Second, "member-b uncordoned", uncordoned(leafB))
		snapA := waitState(t, "member-a", "NotReady")
		// The engine's own times (first failed probe, decision), free of
		// probe phase and write latency: without a restart the decision
		// comes in [notReadyAfter, notReadyAfter+probeInterval) after the
		// first failure; the restart may add less than one probe interval.
		decided := snapA.Since.Sub(suspectSince)
		t.Logf("engine: first failed probe to NotReady decision %s (uninterrupted: [%s, %s))", decided.Round(time.Millisecond), notReadyAfter, notReadyAfter+probeInterval)
		if decided < notReadyAfter || decided >= notReadyAfter+2*probeInterval {
			t.Errorf("engine decided NotReady %s after the first failed probe: not within one probe interval of an uninterrupted run", decided)
		}
		if n := snapA.Counters.Transitions["Ready->Suspect"]; n != 1 {
			t.Errorf("member-a: %d Ready->Suspect transitions: the restart restarted the outage", n)
		}
		for _, o := range recB.observations(t) {
			if o.ready != corev1.ConditionTrue {
				t.Fatalf("leaf-member-b Ready=%s at %s during a 7s flap with a restart", o.ready, o.at.Format(time.StampMilli))
			}
		}
		snapB := waitState(t, "member-b", "Ready")
		if snapB.Counters.FlapsSuppressed != 2 || snapB.Counters.Transitions["Ready->Suspect"] != 2 || snapB.Counters.Transitions["Suspect->NotReady"] != 0 {
			t.Errorf("member-b after two flaps, one with a restart: flaps %d, transitions %v (want 2 flaps, 2 Ready->Suspect, no NotReady)",
				snapB.Counters.FlapsSuppressed, snapB.Counters.Transitions)
		}
		if snapB.Penalty <= 1000 {
			t.Errorf("member-b flap penalty %g: the first flap's penalty was lost", snapB.Penalty)
		}
		t.Logf("member-b: %d flaps suppressed, penalty %.0f; member-a transitions %v", snapB.Counters.FlapsSuppressed, snapB.Penalty, snapA.Counters.Transitions)
	})

	t.Run("owed delete survives the restart", func(t *testing.T) {
		// The new process restored member-a's record with the owed delete
		// and has checkpointed member-a since (it is failing): the delete
		// is still there, in a record it wrote under its own term.
		harness.Eventually(t, 10*time.Second, "member-a rewritten by the new process", func() error {
			rec, _, err := readRecord(t, s, "member-a")
			if err != nil {
				return err
			}
			if rec.Term <= termBefore {
				return fmt.Errorf("record term %d, previous process's %d", rec.Term, termBefore)
			}
			if !hasOwed(rec, owedPod) {
				t.Fatalf("the new process dropped the owed delete: deletes %v", rec.Deletes)
			}
			return nil
		})
		if ok, err := memberPodExists(); !ok || err != nil {
			t.Fatalf("member pod %s deleted while member-a is unreachable (%v)", owedPod, err)
		}
		inspect(t, "member-a")
	})

	t.Run("restart while NotReady keeps it NotReady", func(t *testing.T) {
		recA := recordNode(t, f.host, leafA)
		restart(t)
		started := time.Now()
		// Wait until the new process has probed member-a and saved it.
		harness.Eventually(t, 15*time.Second, "member-a observed by the new process", func() error {
			_, snap, err := readRecord(t, s, "member-a")
			if err != nil {
				return err
			}
			if snap.Last == nil || !snap.Last.T.After(started) {
				return fmt.Errorf("last saved observation %v", snap.Last)
			}
			return nil
		})
		for _, o := range recA.observations(t) {
			if o.ready == corev1.ConditionTrue {
				t.Fatalf("leaf-member-a Ready=True at %s after a restart during its outage", o.at.Format(time.StampMilli))
			}
		}
		rec, snap, err := readRecord(t, s, "member-a")
		if err != nil {
			t.Fatal(err)
		}
		if snap.State != "NotReady" || snap.Counters.Transitions["Suspect->NotReady"] != 1 || snap.Counters.Transitions["Ready->Suspect"] != 1 {
			t.Errorf("member-a after a restart while NotReady: %s, transitions %v", snap.State, snap.Counters.Transitions)
		}
		if !hasOwed(rec, owedPod) {
			t.Errorf("owed delete lost over the second restart: %v", rec.Deletes)
		}
		t.Logf("%d versions of leaf-member-a watched across the restart, none Ready", len(recA.observations(t)))
	})

	var healAt time.Time
	t.Run("recovery after the restarts", func(t *testing.T) {
		if err := a.proxy.Heal(); err != nil {
			t.Fatal(err)
		}
		healAt = time.Now()
		f.waitLeafReady(t, leafA, readyAfter+probeInterval+writeSlack+10*time.Second)
		back := time.Since(healAt)
		t.Logf("leaf-member-a Ready %s after the heal (readyAfter %s)", back.Round(time.Millisecond), readyAfter)
		if back < readyAfter {
			t.Errorf("Ready %s after the heal, before readyAfter %s", back, readyAfter)
		}
		snap := waitState(t, "member-a", "Ready")
		for k, want := range map[string]uint64{"Ready->Suspect": 1, "Suspect->NotReady": 1, "NotReady->Recovering": 1, "Recovering->Ready": 1} {
			if snap.Counters.Transitions[k] != want {
				t.Errorf("member-a %s = %d, want %d (all: %v)", k, snap.Counters.Transitions[k], want, snap.Counters.Transitions)
			}
		}
	})

	t.Run("owed delete executed after the restarts", func(t *testing.T) {
		harness.Eventually(t, 60*time.Second, "member pod "+owedPod+" deleted by pod sync", func() error {
			if ok, err := memberPodExists(); ok || err != nil {
				return fmt.Errorf("still there (%v)", err)
			}
			return nil
		})
		t.Logf("owed delete of member pod workload/%s executed (seen %s after the heal; pod sync waits for Ready) by a process two restarts after it was recorded",
			owedPod, time.Since(healAt).Round(time.Millisecond))
		harness.Eventually(t, 30*time.Second, "owed record dropped once executed", func() error {
			rec, _, err := readRecord(t, s, "member-a")
			if err != nil {
				return err
			}
			if hasOwed(rec, owedPod) {
				return fmt.Errorf("still recorded")
			}
			return nil
		})
	})

	t.Run("readiness reports the store", func(t *testing.T) {
		if err := ls.Ready(); err != nil {
			t.Fatal(err)
		}
		detail, err := httpGet("http://" + ls.HealthAddr + "/readyz/state-store")
		if err != nil || detail != "ok" {
			t.Fatalf("/readyz/state-store = %q, %v", detail, err)
		}
	})

	t.Run("deregistration removes the record", func(t *testing.T) {
		if err := f.host.Client().CoreV1().Secrets(leafsyncNamespace).Delete(context.Background(), "member-member-b", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, 30*time.Second, "member-b's record deleted", func() error {
			_, _, err := s.Get(context.Background(), "member-b")
			if errors.Is(err, store.ErrNotFound) {
				return nil
			}
			return fmt.Errorf("still there (%v)", err)
		})
		if _, _, err := s.Get(context.Background(), "member-a"); err != nil {
			t.Fatalf("member-a's record: %v", err)
		}
	})
}

// readCluster reads a member's records, assembled.
func readCluster(ctx context.Context, s store.Store, cluster string) (storetest.State, error) {
	cs, err := store.ReadCluster(ctx, s, cluster)
	if err != nil {
		return storetest.State{}, err
	}
	return storetest.Read(cs)
}

func hasOwed(st storetest.State, name string) bool {
	for _, d := range st.Deletes {
		if d.Kind == deletes.Owed && d.Name == name {
			return true
		}
	}
	return false
}

// addOwed adds a pending delete to a record, conditionally.
func addOwed(t *testing.T, s store.Store, cluster string, d deletes.PendingDelete) {
	t.Helper()
	cs, v, err := s.Get(context.Background(), cluster)
	if err != nil {
		t.Fatal(err)
	}
	st, err := storetest.Read(cs)
	if err != nil {
		t.Fatal(err)
	}
	st.Deletes = append(st.Deletes, d)
	if _, err := s.Put(context.Background(), cluster, storetest.Record(st), v); err != nil {
		t.Fatalf("recording an owed delete for %s: %v", cluster, err)
	}
}

// TestStoreKubeConformance runs the backend suite against a real
// kube-apiserver: two replicas racing on the same ConfigMap, exactly one
// wins each round; terms; scan; fencing; large records.
func TestStoreKubeConformance(t *testing.T) {
	host := harness.StartCluster(t, harness.ClusterOptions{Name: "host"})
	if err := host.EnsureNamespace(context.Background(), leafsyncNamespace); err != nil {
		t.Fatal(err)
	}
	storetest.Run(t, func(t *testing.T) store.Store {
		// A client of its own per replica, as two processes would have.
		c, err := kubernetes.NewForConfig(host.RESTConfig())
		if err != nil {
			t.Fatal(err)
		}
		s, err := kubestore.New(c, leafsyncNamespace, "")
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestStoreEtcdConformance runs the backend suite against a real etcd.
func TestStoreEtcdConformance(t *testing.T) {
	etcd := harness.StartEtcd(t, harness.LogDir(t), harness.EtcdOptions{Name: "state-etcd"})
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := etcdstore.New(etcdstore.Options{Endpoints: etcd.Endpoints()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

// TestEtcdStoreSurvivesMemberLoss writes the state of a fleet to a
// three-member etcd, kills the etcd leader mid-way, keeps writing, and
// checks that every record is intact on the survivors and, after it
// rejoins, on the killed member alone.
func TestEtcdStoreSurvivesMemberLoss(t *testing.T) {
	ctx := context.Background()
	etcd := harness.StartEtcd(t, harness.LogDir(t), harness.EtcdOptions{Members: 3, Name: "state-etcd"})
	eps := etcd.Endpoints()
	s, err := etcdstore.New(etcdstore.Options{Endpoints: eps, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	k := store.NewKeeper(s, logr.Discard(), store.KeeperOptions{Writer: "e2e", CallTimeout: 3 * time.Second})
	runCtx, stop := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { defer close(stopped); k.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-stopped })
	const clusters = 30
	name := func(i int) string { return fmt.Sprintf("member-%02d", i) }
	want := map[string]storetest.State{}
	write := func(round int) {
		for i := range clusters {
			storetest.Update(k, name(i), func(st *storetest.State) {
				st.Hysteresis = json.RawMessage(fmt.Sprintf(`{"version":1,"cluster":%q,"round":%d}`, name(i), round))
				st.Deletes = append(st.Deletes, deletes.PendingDelete{Kind: deletes.Owed, Namespace: "ns",
					Name: fmt.Sprintf("pod-%d", round), HostUID: fmt.Sprintf("uid-%d-%d", i, round), Since: time.Unix(int64(round), 0).UTC()})
			})
			want[name(i)] = storetest.Memory(k, name(i))
		}
	}
	flush := func(what string) {
		start := time.Now()
		harness.Eventually(t, 30*time.Second, what, func() error { return k.Flush(ctx) })
		t.Logf("%s: written in %s", what, time.Since(start).Round(time.Millisecond))
	}
	write(1)
	flush("round 1, three members")

	leader := etcdLeader(t, eps)
	etcd.KillMember(leader)
	killed := time.Now()
	t.Logf("killed etcd member %d (the leader)", leader)
	write(2)
	flush("round 2, leader just killed")
	write(3)
	flush("round 3, two members")
	t.Logf("writes resumed %s after the leader was killed; %+v", time.Since(killed).Round(time.Millisecond), k.Stats())

	var survivors []string
	for i, ep := range eps {
		if i != leader {
			survivors = append(survivors, ep)
		}
	}
	check := func(what string, endpoints []string) {
		r, err := etcdstore.New(etcdstore.Options{Endpoints: endpoints})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		harness.Eventually(t, 30*time.Second, what, func() error {
			for c, w := range want {
				st, err := readCluster(ctx, r, c)
				if err != nil {
					return fmt.Errorf("%s: %w", c, err)
				}
				if string(st.Hysteresis) != string(w.Hysteresis) || len(st.Deletes) != 3 {
					return fmt.Errorf("%s: %s with %d deletes, want %s with 3", c, st.Hysteresis, len(st.Deletes), w.Hysteresis)
				}
			}
			return nil
		})
		t.Logf("%s: all %d records intact", what, clusters)
	}
	check("read from the two survivors", survivors)
	if err := etcd.RestartMember(leader); err != nil {
		t.Fatal(err)
	}
	check("read from the restarted member alone", eps[leader:leader+1])
}

// etcdLeader returns the index of the current etcd leader.
func etcdLeader(t *testing.T, eps []string) int {
	t.Helper()
	r, err := etcdstore.New(etcdstore.Options{Endpoints: eps})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cli, err := r.Client(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var leaderID uint64
	ids := map[uint64]int{}
	for i, ep := range eps {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := cli.Status(ctx, ep)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		ids[st.Header.MemberId] = i
		leaderID = st.Leader
	}
	i, ok := ids[leaderID]
	if !ok {
		t.Fatal(errors.New("no etcd leader"))
	}
	return i
}

// httpGet returns the body of a GET (any status).
func httpGet(url string) (string, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(body)), err
}

// TestStoreUnavailable kills the state store's etcd under a running
// leafsync: decisions go on from memory (a flap cordons and uncordons, an
// outage goes NotReady on time), readiness stays up with the store's
// problem as a detail, and the state queued in memory is written once etcd
// is back.
func TestStoreUnavailable(t *testing.T) {
	f := newFleet(t, harness.HostOptions{}, harness.MemberOptions{Name: "member-a", Nodes: 1})
	etcd := harness.StartEtcd(t, harness.LogDir(t), harness.EtcdOptions{Name: "state-etcd"})
	cfg := testConfig + fmt.Sprintf("store:\n  backend: etcd\n  callTimeout: 2s\n  checkpointInterval: %s\n  etcd:\n    endpoints: [%s]\n", storeCheckpoint, strings.Join(etcd.Endpoints(), ", "))
	f.config = filepath.Join(harness.LogDir(t), "leafsync-store-config.yaml")
	if err := os.WriteFile(f.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := etcdstore.New(etcdstore.Options{Endpoints: etcd.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	a := f.members["member-a"]
	const leaf = "leaf-member-a"
	ls := f.startLeafsync(t, "leafsync")
	f.register(t, "member-a", nil)
	f.waitLeafReady(t, leaf, time.Minute)
	detail := func() string {
		d, err := httpGet("http://" + ls.HealthAddr + "/readyz/state-store")
		if err != nil {
			return err.Error()
		}
		return d
	}
	if d := detail(); d != "ok" {
		t.Fatalf("/readyz/state-store with etcd up: %q", d)
	}

	etcd.KillMember(0)
	t.Log("state store's etcd killed")
	rec := recordNode(t, f.host, leaf)
	a.proxy.Cut()
	cutAt := time.Now()
	harness.Eventually(t, 10*time.Second, "cordoned during the flap", func() error {
		if !hasTaint(f.node(t, leaf), leafnode.TaintUnreachable, corev1.TaintEffectNoSchedule) {
			return fmt.Errorf("not cordoned")
		}
		return nil
	})
	time.Sleep(time.Until(cutAt.Add(5 * time.Second)))
	if err := a.proxy.Heal(); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 15*time.Second, "uncordoned after the flap", func() error {
		if hasTaint(f.node(t, leaf), leafnode.TaintUnreachable, corev1.TaintEffectNoSchedule) {
			return fmt.Errorf("still cordoned")
		}
		return nil
	})
	for _, o := range rec.observations(t) {
		if o.ready != corev1.ConditionTrue {
			t.Fatalf("leaf Ready=%s at %s during a flap with the store down", o.ready, o.at.Format(time.StampMilli))
		}
	}
	var d string
	harness.Eventually(t, 20*time.Second, "store problem reported", func() error {
		if d = detail(); !strings.Contains(d, "failing for") {
			return fmt.Errorf("/readyz/state-store: %q", d)
		}
		return nil
	})
	t.Logf("/readyz/state-store: %s", d)
	if err := ls.Ready(); err != nil {
		t.Fatalf("/readyz failed because the store is down: %v", err)
	}

	a.proxy.Cut()
	cutAt = time.Now()
	var notReadyAt time.Time
	harness.Eventually(t, notReadyAfter+probeInterval+writeSlack+10*time.Second, "leaf NotReady", func() error {
		if st := harness.NodeReady(f.node(t, leaf)); st == corev1.ConditionTrue {
			return fmt.Errorf("Ready=%s", st)
		}
		notReadyAt = time.Now()
		return nil
	})
	took := notReadyAt.Sub(cutAt)
	t.Logf("with the store down, leaf NotReady %s after the cut", took.Round(time.Millisecond))
	if took < notReadyAfter || took > notReadyAfter+probeInterval+writeSlack {
		t.Errorf("NotReady after %s with the store down, want [%s, %s]", took, notReadyAfter, notReadyAfter+probeInterval+writeSlack)
	}

	if err := etcd.RestartMember(0); err != nil {
		t.Fatal(err)
	}
	backAt := time.Now()
	harness.Eventually(t, 60*time.Second, "state queued in memory written", func() error {
		_, snap, err := readRecord(t, s, "member-a")
		if err != nil {
			return err
		}
		if snap.State != "NotReady" || snap.Counters.FlapsSuppressed != 1 {
			return fmt.Errorf("saved %s with %d flaps", snap.State, snap.Counters.FlapsSuppressed)
		}
		return nil
	})
	t.Logf("etcd back: queued state written %s later", time.Since(backAt).Round(time.Millisecond))
	harness.Eventually(t, 30*time.Second, "store detail ok", func() error {
		if d := detail(); d != "ok" {
			return fmt.Errorf("%q", d)
		}
		return nil
	})
	if err := a.proxy.Heal(); err != nil {
		t.Fatal(err)
	}
	f.waitLeafReady(t, leaf, readyAfter+probeInterval+writeSlack+15*time.Second)
}
