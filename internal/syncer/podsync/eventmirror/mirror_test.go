package eventmirror

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
)

const (
	cluster = "member-a"
	host    = "host-id"
	hostUID = "host-pod-uid"
)

// memberPod is a member pod leafsync runs for host pod hostUID.
func memberPod(name string, uid types.UID) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, UID: uid, Labels: map[string]string{
		podmeta.LabelManaged: "true", podmeta.LabelCluster: cluster, podmeta.LabelHost: host, podmeta.LabelHostUID: hostUID,
	}}}
}

// kubeletEvent is an Event a member's kubelet records about a pod.
func kubeletEvent(name, pod string, podUID types.UID, reason string, count int32) *corev1.Event {
	return &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, UID: types.UID("uid-" + name)},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "apps", Name: pod, UID: podUID,
			FieldPath: "spec.containers{c}"},
		Reason: reason, Message: reason + " container c", Type: corev1.EventTypeNormal, Count: count,
		Source: corev1.EventSource{Component: "kubelet", Host: "node-1"},
	}
}

func TestHostPod(t *testing.T) {
	mp := memberPod("web", "member-uid")
	foreign := memberPod("web", "member-uid")
	foreign.Labels = map[string]string{"app": "web"}
	otherHost := memberPod("web", "member-uid")
	otherHost.Labels[podmeta.LabelHost] = "another-host"
	for _, tc := range []struct {
		name string
		ev   *corev1.Event
		mp   *corev1.Pod
		want bool
	}{
		{"leafsync's member pod", kubeletEvent("e", "web", "member-uid", "Started", 1), mp, true},
		{"no member pod", kubeletEvent("e", "web", "member-uid", "Started", 1), nil, false},
		{"an earlier pod of the name", kubeletEvent("e", "web", "earlier-uid", "Started", 1), mp, false},
		{"no pod UID in the Event", kubeletEvent("e", "web", "", "Started", 1), mp, false},
		{"a member pod leafsync did not create", kubeletEvent("e", "web", "member-uid", "Started", 1), foreign, false},
		{"another host's member pod", kubeletEvent("e", "web", "member-uid", "Started", 1), otherHost, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref := hostPod(tc.ev, tc.mp, cluster, host)
			if (ref != nil) != tc.want {
				t.Fatalf("hostPod = %+v, want a reference: %v", ref, tc.want)
			}
			if ref == nil {
				return
			}
			want := corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "apps", Name: "web", UID: hostUID, FieldPath: "spec.containers{c}"}
			if *ref != want {
				t.Errorf("hostPod = %+v, want %+v", *ref, want)
			}
		})
	}
}

func TestNewObservation(t *testing.T) {
	ev := func(count, series int32) *corev1.Event {
		e := kubeletEvent("e", "web", "member-uid", "BackOff", count)
		if series > 0 {
			e.Series = &corev1.EventSeries{Count: series}
		}
		return e
	}
	other := ev(1, 0)
	other.UID = "another-event"
	for _, tc := range []struct {
		name     string
		seen, ev *corev1.Event
		want     bool
	}{
		{"unseen", nil, ev(1, 0), true},
		{"unseen, events.k8s.io without a count", nil, ev(0, 0), true},
		{"same count", ev(2, 0), ev(2, 0), false},
		{"count up", ev(2, 0), ev(3, 0), true},
		{"series up", ev(0, 2), ev(0, 3), true},
		{"a new series of a once-seen Event", ev(0, 0), ev(0, 2), true},
		{"count down (a recreated Event of that name)", ev(3, 0), ev(1, 0), false},
		{"seen was another Event of the name", other, ev(1, 0), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := newObservation(tc.seen, tc.ev); got != tc.want {
				t.Errorf("newObservation = %v, want %v", got, tc.want)
			}
		})
	}
}

// fixture is a member's mirror with a fake recorder and a pod cache.
type fixture struct {
	pods     cache.Indexer
	recorder *record.FakeRecorder
}

func newFixture(pods ...*corev1.Pod) *fixture {
	f := &fixture{pods: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}), recorder: record.NewFakeRecorder(100)}
	for _, p := range pods {
		_ = f.pods.Add(p)
	}
	return f
}

func (f *fixture) mirror(baseline cache.Store) *mirror {
	return newMirror(cluster, func() string { return host }, corelisters.NewPodLister(f.pods), f.recorder, baseline)
}

func (f *fixture) recorded(t *testing.T) []string {
	t.Helper()
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestMirrorDedupe(t *testing.T) {
	f := newFixture(memberPod("web", "member-uid"))
	started := kubeletEvent("started", "web", "member-uid", "Started", 1)
	backOff := kubeletEvent("backoff", "web", "member-uid", "BackOff", 1)
	backOff.Type = corev1.EventTypeWarning

	// leafsync starts: what the first list shows was mirrored by a
	// leafsync before, or happened before this one ran.
	m := f.mirror(nil)
	m.added(started, true)
	m.added(backOff, true)
	if got := f.recorded(t); len(got) != 0 {
		t.Fatalf("the first list mirrored %v", got)
	}

	// Watched: a new Event, a count up; a relist's unchanged Event is not.
	pulled := kubeletEvent("pulled", "web", "member-uid", "Pulled", 1)
	m.added(pulled, false)
	backOff2 := backOff.DeepCopy()
	backOff2.Count = 2
	m.updated(backOff, backOff2)
	m.updated(started, started.DeepCopy())
	stale := kubeletEvent("stale", "web", "earlier-uid", "Killing", 1)
	m.added(stale, false)
	foreign := kubeletEvent("foreign", "db", "db-uid", "Started", 1)
	m.added(foreign, false)
	want := []string{"Normal Pulled Pulled container c", "Warning BackOff BackOff container c"}
	if got := f.recorded(t); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("mirrored %q, want %q", got, want)
	}

	// A new runtime (a reconnect): its first list is compared with what
	// the last synced watch saw, so Events of the gap are mirrored once
	// and nothing seen before is mirrored again.
	seen := cache.NewStore(cache.MetaNamespaceKeyFunc)
	for _, e := range []*corev1.Event{started, backOff2, pulled} {
		_ = seen.Add(e)
	}
	next := f.mirror(seen)
	backOff3 := backOff2.DeepCopy()
	backOff3.Count = 3
	created := kubeletEvent("created", "web", "member-uid", "Created", 1)
	for _, e := range []*corev1.Event{started, backOff3, pulled, created} {
		next.added(e, true)
	}
	want = []string{"Warning BackOff BackOff container c", "Normal Created Created container c"}
	if got := f.recorded(t); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after a reconnect mirrored %q, want %q", got, want)
	}
}
