//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	"github.com/leafsync/leafsync/internal/syncer/podsync/eventmirror"
	"github.com/leafsync/leafsync/test/harness"
)

// TestMemberEventsMirrored: the Events a member records about a pod
// leafsync runs there reach its host pod (kwok records none: the test
// records them in the member as a kubelet would):
//   - a kubelet's Normal and Warning Events appear on the host pod, about
//     the host pod's UID and container, with their type, reason and
//     message, from leafsync.io/member-events on the leaf; a count that
//     grows in the member grows on the host;
//   - Events about a member pod leafsync did not create (whose name a
//     host pod also has) and about an earlier pod of the synced pod's name
//     (another UID) are never mirrored;
//   - after leafsync is killed and restarted, nothing mirrored before is
//     mirrored again (one host Event each), and what happens once the new
//     leader has listed the member's Events is (what that list shows is
//     its baseline).
func TestMemberEventsMirrored(t *testing.T) {
	f := newPodSyncFleet(t, "member-a")
	member := f.members["member-a"]
	hc, mc := f.host.Client(), member.Client()
	ctx := context.Background()
	const leaf = "leaf-member-a"
	first := f.startLeafsync(t, "leafsync-1")
	f.register(t, "member-a", nil)
	f.waitLeafReady(t, leaf, time.Minute)
	f.createWorkloads(t, []harness.LeafWorkload{leafWorkload("web", 1, leaf)}, nil)
	hp := waitHostPodsReady(t, f, "app=web", 1, 90*time.Second, leaf)[0]
	mp, err := mc.CoreV1().Pods(appsNS).Get(ctx, hp.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	container := hp.Spec.Containers[0].Name

	// record creates an Event in the member about a pod, as its kubelet
	// records one (core/v1, source kubelet), or counts it once more.
	record := func(t *testing.T, name, pod string, uid types.UID, typ, reason, message string) *corev1.Event {
		t.Helper()
		now := metav1.Now()
		ev, err := mc.CoreV1().Events(appsNS).Create(ctx, &corev1.Event{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: appsNS, Name: pod, UID: uid,
				FieldPath: "spec.containers{" + container + "}"},
			Type: typ, Reason: reason, Message: message, Count: 1, FirstTimestamp: now, LastTimestamp: now,
			Source: corev1.EventSource{Component: "kubelet", Host: mp.Spec.NodeName},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	again := func(t *testing.T, ev *corev1.Event) *corev1.Event {
		t.Helper()
		ev.Count++
		ev.LastTimestamp = metav1.Now()
		out, err := mc.CoreV1().Events(appsNS).Update(ctx, ev, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	// mirrored lists the host Events leafsync mirrored onto a host pod.
	mirrored := func(t *testing.T, uid types.UID) []corev1.Event {
		t.Helper()
		list, err := hc.CoreV1().Events(appsNS).List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("involvedObject.uid", string(uid)).String()})
		if err != nil {
			t.Fatal(err)
		}
		var out []corev1.Event
		for _, e := range list.Items {
			if e.ReportingController == eventmirror.ReportingController {
				out = append(out, e)
			}
		}
		return out
	}
	// waitMirrored waits for the host Events of a reason on the host pod
	// whose counts add up to count, and returns them.
	waitMirrored := func(t *testing.T, reason string, count int32, within time.Duration) []corev1.Event {
		t.Helper()
		var got []corev1.Event
		harness.Eventually(t, within, fmt.Sprintf("%s on host pod %s, count %d", reason, hp.Name, count), func() error {
			got = nil
			var sum int32
			for _, e := range mirrored(t, hp.UID) {
				if e.Reason == reason {
					got = append(got, e)
					sum += e.Count
				}
			}
			if sum != count {
				return fmt.Errorf("%d host Events, count %d", len(got), sum)
			}
			return nil
		})
		return got
	}

	// A member pod leafsync did not create, whose name a host pod has too
	// (neither is scheduled anywhere).
	nowhere := corev1.PodSpec{NodeSelector: map[string]string{"no-such-node": "true"},
		Containers: []corev1.Container{{Name: container, Image: "busybox"}}}
	foreignHost, err := hc.CoreV1().Pods(appsNS).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "foreign"}, Spec: nowhere}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	foreignMember, err := mc.CoreV1().Pods(appsNS).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "foreign"}, Spec: nowhere}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	var backOff *corev1.Event
	t.Run("a kubelet's Events reach the host pod", func(t *testing.T) {
		recorded := time.Now()
		record(t, "web-started", mp.Name, mp.UID, corev1.EventTypeNormal, "Started", "Started container "+container)
		backOff = record(t, "web-backoff", mp.Name, mp.UID, corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container "+container)
		backOff = again(t, backOff)
		started := waitMirrored(t, "Started", 1, 30*time.Second)
		t.Logf("Started on the host pod %s after it was recorded in the member", time.Since(recorded).Round(time.Millisecond))
		bo := waitMirrored(t, "BackOff", 2, 30*time.Second)
		for _, e := range append(started, bo...) {
			if e.InvolvedObject.Name != hp.Name || e.InvolvedObject.Kind != "Pod" || e.InvolvedObject.FieldPath != "spec.containers{"+container+"}" ||
				e.ReportingInstance != leaf || e.Source.Host != leaf {
				t.Errorf("host Event %s: about %+v, from %s on %s", e.Reason, e.InvolvedObject, e.ReportingController, e.ReportingInstance)
			}
		}
		if started[0].Type != corev1.EventTypeNormal || started[0].Message != "Started container "+container {
			t.Errorf("host Started: %s %q", started[0].Type, started[0].Message)
		}
		if len(bo) != 1 || bo[0].Type != corev1.EventTypeWarning || bo[0].Message != "Back-off restarting failed container "+container {
			t.Errorf("host BackOff: %+v", bo)
		}
	})

	t.Run("other pods' Events are not mirrored", func(t *testing.T) {
		record(t, "foreign-started", foreignMember.Name, foreignMember.UID, corev1.EventTypeNormal, "Started", "Started container "+container)
		record(t, "web-earlier", mp.Name, "uid-of-an-earlier-pod", corev1.EventTypeNormal, "Killing", "Stopping container of an earlier pod")
		// Mirrored in the order recorded: once a later one is there, the
		// two before it were looked at.
		record(t, "web-pulled", mp.Name, mp.UID, corev1.EventTypeNormal, "Pulled", "Container image already present on machine")
		waitMirrored(t, "Pulled", 1, 30*time.Second)
		if evs := mirrored(t, foreignHost.UID); len(evs) != 0 {
			t.Errorf("Events of a member pod leafsync did not create mirrored onto host pod foreign: %+v", evs)
		}
		for _, e := range mirrored(t, hp.UID) {
			if e.Reason == "Killing" {
				t.Errorf("an Event of an earlier pod mirrored: %q", e.Message)
			}
		}
	})

	t.Run("a restart mirrors nothing twice", func(t *testing.T) {
		before := map[string]int{}
		for _, e := range mirrored(t, hp.UID) {
			before[e.Reason]++
		}
		first.Kill()
		f.startLeafsync(t, "leafsync-2")
		restarted := time.Now()
		// What the new leader's first list of the member's Events shows is
		// its baseline, never mirrored: record a new Event every second
		// until one reaches the host pod.
		var n int
		var last time.Time
		harness.Eventually(t, 90*time.Second, "an Event recorded after the restart on the host pod", func() error {
			for _, e := range mirrored(t, hp.UID) {
				if e.Reason == "Created" {
					return nil
				}
			}
			if time.Since(last) >= time.Second {
				n++
				last = time.Now()
				record(t, fmt.Sprintf("web-created-%d", n), mp.Name, mp.UID, corev1.EventTypeNormal, "Created", fmt.Sprintf("Created container %s (%d)", container, n))
			}
			return fmt.Errorf("%d recorded, none mirrored", n)
		})
		t.Logf("an Event recorded after the restart on the host pod %s later (the %d recorded before were the new leader's baseline)",
			time.Since(restarted).Round(time.Millisecond), n-1)
		again(t, backOff)
		waitMirrored(t, "BackOff", 3, 30*time.Second)
		// Wait a little for any copy that was coming.
		time.Sleep(3 * time.Second)
		after := map[string]int{}
		var backOffs int32
		for _, e := range mirrored(t, hp.UID) {
			after[e.Reason]++
			if e.Reason == "BackOff" {
				backOffs += e.Count
			} else if e.Count != 1 {
				t.Errorf("host %s Event count %d, want 1", e.Reason, e.Count)
			}
		}
		if backOffs != 3 {
			t.Errorf("BackOff counted %d times on the host pod, 3 in the member", backOffs)
		}
		for _, reason := range []string{"Started", "Pulled"} {
			if after[reason] != 1 || before[reason] != 1 {
				t.Errorf("%s: %d host Events before the restart, %d after, want 1 and 1", reason, before[reason], after[reason])
			}
		}
		// The member scheduler's own Event, mirrored when the watch saw it.
		if after["Scheduled"] != before["Scheduled"] {
			t.Errorf("Scheduled: %d host Events before the restart, %d after", before["Scheduled"], after["Scheduled"])
		}
		t.Logf("host Events by reason after the restart: %v", after)
	})
}
