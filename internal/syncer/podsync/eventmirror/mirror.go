package eventmirror

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
)

// hostPod is the host pod a member Event is about: a reference to it (the
// member pod's host UID label, the Event's container path), or nil when
// the Event is not about mp (another pod of the name, an Event without a
// pod UID) or mp is not a pod leafsync runs for this host's registration
// of cluster.
func hostPod(ev *corev1.Event, mp *corev1.Pod, cluster, host string) *corev1.ObjectReference {
	if mp == nil || ev.InvolvedObject.UID == "" || ev.InvolvedObject.UID != mp.UID || !podmeta.Ours(mp, cluster, host) {
		return nil
	}
	return &corev1.ObjectReference{
		Kind: "Pod", APIVersion: "v1", Namespace: mp.Namespace, Name: mp.Name,
		UID: types.UID(mp.Labels[podmeta.LabelHostUID]), FieldPath: ev.InvolvedObject.FieldPath,
	}
}

// newObservation reports whether ev has an occurrence that seen (the same
// Event as last seen, nil if never) had not: it is new, or its count grew.
func newObservation(seen, ev *corev1.Event) bool {
	if seen == nil || seen.UID != ev.UID {
		return true
	}
	return observations(ev) > observations(seen)
}

// observations is how often an Event happened: its count (core/v1) or its
// series count (events.k8s.io), at least once.
func observations(ev *corev1.Event) int32 {
	n := max(ev.Count, 1)
	if ev.Series != nil {
		n = max(n, ev.Series.Count)
	}
	return n
}

// mirror records on host pods the occurrences of one member's pod Events
// that it has not seen before.
type mirror struct {
	cluster string
	host    func() string
	pods    corelisters.PodLister

	mu       sync.Mutex
	recorder record.EventRecorder
	// baseline is what the watch before this one saw, nil for the first
	// watch of this process: its first list is the baseline itself.
	baseline cache.Store
}

func newMirror(cluster string, host func() string, pods corelisters.PodLister, recorder record.EventRecorder, baseline cache.Store) *mirror {
	return &mirror{cluster: cluster, host: host, pods: pods, recorder: recorder, baseline: baseline}
}

// added takes an Event of the watch's first list (initial) or a new one.
func (m *mirror) added(ev *corev1.Event, initial bool) {
	var seen *corev1.Event
	if initial {
		m.mu.Lock()
		baseline := m.baseline
		m.mu.Unlock()
		if baseline == nil {
			return
		}
		if obj, ok, _ := baseline.Get(ev); ok {
			seen, _ = obj.(*corev1.Event)
		}
	}
	m.observe(seen, ev)
}

// updated takes a changed Event.
func (m *mirror) updated(old, ev *corev1.Event) { m.observe(old, ev) }

func (m *mirror) observe(seen, ev *corev1.Event) {
	if !newObservation(seen, ev) {
		return
	}
	mp, err := m.pods.Pods(ev.InvolvedObject.Namespace).Get(ev.InvolvedObject.Name)
	if err != nil {
		return
	}
	ref := hostPod(ev, mp, m.cluster, m.host())
	if ref == nil {
		return
	}
	m.mu.Lock()
	r := m.recorder
	m.mu.Unlock()
	r.Event(ref, ev.Type, ev.Reason, ev.Message)
}

// synced: the first list is in; the baseline is no longer needed.
func (m *mirror) synced() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.baseline = nil
}

// pendingBaseline is the baseline while the first list is not in.
func (m *mirror) pendingBaseline() cache.Store {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.baseline
}

func (m *mirror) setRecorder(r record.EventRecorder) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recorder = r
}
