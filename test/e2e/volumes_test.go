//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
	"github.com/leafsync/leafsync/test/harness"
)

// TestPersistentVolumes: host PVCs of pods on a leaf, provisioned by
// leafsync into the member (internal/syncer/volumes). Both clusters run
// the PV controller (persistentvolume-binder, with pvc- and pv-protection)
// and a scheduler, so binding is Kubernetes' own on both sides
// (WaitForFirstConsumer: the member's scheduler binds the member claim to
// a static PV); kwok only runs the member pods.
//   - a StatefulSet of 2 with a volumeClaimTemplate on the leaf: host
//     claims Bound to leafsync's stand-in PVs (pinned to the leaf), member
//     claims Bound, pods Running; the member's capacity (the static PV's
//     1Gi, above the 100Mi asked) reaches the host claim;
//   - a pod deleted comes back on the same leaf with the same claim (the
//     same member claim, UID unchanged);
//   - a claim whose class the registration does not map: a Warning Event
//     naming the class and the annotation, no stand-in, no member claim;
//   - a member claim of the name that leafsync did not create: an Event,
//     the member's claim untouched, no stand-in;
//   - the StatefulSet and its claims deleted: member claims and stand-ins go;
//   - the member deregistered: a pod of a claim in it, free by its own
//     affinity to run on a host node, is held Pending (the stand-in's
//     nodeAffinity) with an Event saying its data is in member-a.
func TestPersistentVolumes(t *testing.T) {
	hostCtl, memberCtl := harness.HostControllers, harness.MemberControllers
	// The PV controller binds; the protection controllers remove the
	// finalizers the API server puts on every claim and PV once unused.
	volumeControllers := []string{"persistentvolume-binder", "pvc-protection", "pv-protection"}
	harness.HostControllers = append(slices.Clone(hostCtl), volumeControllers...)
	harness.MemberControllers = append(slices.Clone(memberCtl), volumeControllers...)
	f := newPodSyncFleet(t, "member-a")
	harness.HostControllers, harness.MemberControllers = hostCtl, memberCtl
	member := f.members["member-a"]
	hc, mc := f.host.Client(), member.Client()
	ctx := context.Background()
	const leaf = "leaf-member-a"

	wffc := ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)
	for _, sc := range []*storagev1.StorageClass{
		{ObjectMeta: metav1.ObjectMeta{Name: "leaf-standard"}, Provisioner: "leafsync.io/member", VolumeBindingMode: wffc},
		{ObjectMeta: metav1.ObjectMeta{Name: "leaf-unmapped"}, Provisioner: "leafsync.io/member", VolumeBindingMode: wffc},
	} {
		if _, err := hc.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := mc.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: "member-local"}, Provisioner: "kubernetes.io/no-provisioner", VolumeBindingMode: wffc,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("member-pv-%d", i)},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName:              "member-local",
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: fmt.Sprintf("/data/pv-%d", i)}},
			},
		}
		if _, err := mc.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	f.startLeafsync(t, "leafsync")
	f.register(t, "member-a", map[string]string{"leafsync.io/storage-classes": "leaf-standard=member-local"})
	f.waitLeafReady(t, leaf, time.Minute)

	claimTemplate := func(name, class string) corev1.PersistentVolumeClaim {
		return corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: ptr.To(class),
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("100Mi")}},
			},
		}
	}
	withClaim := func(spec *corev1.PodSpec, claim string) {
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim},
		}})
		spec.Containers[0].VolumeMounts = append(spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "data", MountPath: "/data"})
	}

	start := time.Now()
	db := leafWorkload("db", 2, leaf).StatefulSet()
	withClaim(&db.Spec.Template.Spec, "data")
	db.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{claimTemplate("data", "leaf-standard")}
	if _, err := hc.AppsV1().StatefulSets(appsNS).Create(ctx, db, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitHostPodsReady(t, f, "app=db", 2, 3*time.Minute, leaf)
	t.Logf("StatefulSet of 2 with claims Running on the leaf after %s", time.Since(start).Round(time.Second))

	// poll waits (generously: the machine is loaded) for cond.
	poll := func(what string, timeout time.Duration, cond func() error) {
		t.Helper()
		var last error
		err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
			last = cond()
			return last == nil, nil
		})
		if err != nil {
			t.Fatalf("%s: %v", what, last)
		}
	}
	memberClaimUIDs := map[string]string{}
	t.Run("claims Bound in both clusters, capacity flows back", func(t *testing.T) {
		for _, name := range []string{"data-db-0", "data-db-1"} {
			poll(name, time.Minute, func() error {
				hcl, err := hc.CoreV1().PersistentVolumeClaims(appsNS).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				if hcl.Status.Phase != corev1.ClaimBound || hcl.Spec.VolumeName != "leafsync-"+string(hcl.UID) {
					return fmt.Errorf("host claim %s: %s, volume %q", name, hcl.Status.Phase, hcl.Spec.VolumeName)
				}
				pv, err := hc.CoreV1().PersistentVolumes().Get(ctx, hcl.Spec.VolumeName, metav1.GetOptions{})
				if err != nil {
					return err
				}
				terms := pv.Spec.NodeAffinity.Required.NodeSelectorTerms
				if len(terms) != 1 || terms[0].MatchExpressions[0].Key != corev1.LabelHostname || terms[0].MatchExpressions[0].Values[0] != leaf {
					return fmt.Errorf("stand-in %s is not pinned to %s: %+v", pv.Name, leaf, terms)
				}
				mcl, err := mc.CoreV1().PersistentVolumeClaims(appsNS).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				if mcl.Status.Phase != corev1.ClaimBound || mcl.Labels[podmeta.LabelManaged] != "true" || *mcl.Spec.StorageClassName != "member-local" {
					return fmt.Errorf("member claim %s: %s, labels %v, class %v", name, mcl.Status.Phase, mcl.Labels, *mcl.Spec.StorageClassName)
				}
				if got := hcl.Status.Capacity[corev1.ResourceStorage]; got.String() != "1Gi" {
					return fmt.Errorf("host claim %s capacity %s, member's is 1Gi", name, got.String())
				}
				memberClaimUIDs[name] = string(mcl.UID)
				return nil
			})
		}
	})

	t.Run("a deleted pod comes back with the same claim on the same leaf", func(t *testing.T) {
		old, err := hc.CoreV1().Pods(appsNS).Get(ctx, "db-0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := hc.CoreV1().Pods(appsNS).Delete(ctx, "db-0", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		poll("db-0 back", 3*time.Minute, func() error {
			p, err := hc.CoreV1().Pods(appsNS).Get(ctx, "db-0", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if p.UID == old.UID || p.Spec.NodeName != leaf || !podReady(p) {
				return fmt.Errorf("db-0 uid %s on %q ready %v", p.UID, p.Spec.NodeName, podReady(p))
			}
			mp, err := mc.CoreV1().Pods(appsNS).Get(ctx, "db-0", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if mp.Labels[podmeta.LabelHostUID] != string(p.UID) {
				return fmt.Errorf("member pod db-0 is still the old one")
			}
			if i := slices.IndexFunc(mp.Spec.Volumes, func(v corev1.Volume) bool { return v.PersistentVolumeClaim != nil }); i < 0 || mp.Spec.Volumes[i].PersistentVolumeClaim.ClaimName != "data-db-0" {
				return fmt.Errorf("member pod db-0 volumes %+v", mp.Spec.Volumes)
			}
			return nil
		})
		mcl, err := mc.CoreV1().PersistentVolumeClaims(appsNS).Get(ctx, "data-db-0", metav1.GetOptions{})
		if err != nil || string(mcl.UID) != memberClaimUIDs["data-db-0"] {
			t.Fatalf("member claim data-db-0 replaced (uid %v, was %s): %v", mcl.UID, memberClaimUIDs["data-db-0"], err)
		}
	})

	// claimPod is a pod on the leaf using claim name, created with it.
	claimPod := func(name, class string) {
		t.Helper()
		cl := claimTemplate(name, class)
		if _, err := hc.CoreV1().PersistentVolumeClaims(appsNS).Create(ctx, &cl, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tpl := leafWorkload(name, 1, leaf).PodTemplate()
		withClaim(&tpl.Spec, name)
		if _, err := hc.CoreV1().Pods(appsNS).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: tpl.Labels}, Spec: tpl.Spec}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// claimEvent waits for a Warning Event with reason on host claim name.
	claimEvent := func(name, reason string) string {
		t.Helper()
		var note string
		poll(reason+" on "+name, 2*time.Minute, func() error {
			evs, err := hc.EventsV1().Events(appsNS).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			for _, e := range evs.Items {
				if e.Reason == reason && e.Regarding.Kind == "PersistentVolumeClaim" && e.Regarding.Name == name && e.Type == corev1.EventTypeWarning {
					note = e.Note
					return nil
				}
			}
			return fmt.Errorf("no %s Event on claim %s", reason, name)
		})
		return note
	}
	noStandIn := func(name string) {
		t.Helper()
		hcl, err := hc.CoreV1().PersistentVolumeClaims(appsNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := hc.CoreV1().PersistentVolumes().Get(ctx, "leafsync-"+string(hcl.UID), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("claim %s: a stand-in PV exists (%v)", name, err)
		}
		if hcl.Status.Phase == corev1.ClaimBound {
			t.Errorf("claim %s is Bound", name)
		}
	}

	t.Run("an unmapped class is refused with an Event, nothing is made", func(t *testing.T) {
		claimPod("scratch", "leaf-unmapped")
		note := claimEvent("scratch", "StorageClassNotMapped")
		if !strings.Contains(note, "leaf-unmapped") || !strings.Contains(note, "leafsync.io/storage-classes") {
			t.Errorf("the Event does not name the class and the annotation: %q", note)
		}
		if pods := hostEvents(t, f, "StorageClassNotMapped"); !strings.Contains(pods["scratch"], "leaf-unmapped") {
			t.Errorf("no StorageClassNotMapped Event on pod scratch: %v", pods)
		}
		noStandIn("scratch")
		if _, err := mc.CoreV1().PersistentVolumeClaims(appsNS).Get(ctx, "scratch", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("member claim scratch: %v", err)
		}
	})

	t.Run("a member claim leafsync did not create is refused, never touched", func(t *testing.T) {
		theirs := claimTemplate("taken", "member-local")
		own, err := mc.CoreV1().PersistentVolumeClaims(appsNS).Create(ctx, &theirs, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		claimPod("taken", "leaf-standard")
		note := claimEvent("taken", "MemberObjectConflict")
		if !strings.Contains(note, "member-a") {
			t.Errorf("the Event does not name the member: %q", note)
		}
		noStandIn("taken")
		cur, err := mc.CoreV1().PersistentVolumeClaims(appsNS).Get(ctx, "taken", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(cur.Labels, own.Labels) || cur.DeletionTimestamp != nil {
			t.Errorf("the member's claim changed: labels %v, deleting %v", cur.Labels, cur.DeletionTimestamp)
		}
	})

	t.Run("deleting the StatefulSet and its claims cleans member claims and stand-ins", func(t *testing.T) {
		var standIns []string
		for _, name := range []string{"data-db-0", "data-db-1"} {
			hcl, err := hc.CoreV1().PersistentVolumeClaims(appsNS).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			standIns = append(standIns, hcl.Spec.VolumeName)
		}
		if err := hc.AppsV1().StatefulSets(appsNS).Delete(ctx, "db", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"data-db-0", "data-db-1"} {
			if err := hc.CoreV1().PersistentVolumeClaims(appsNS).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		poll("member claims and stand-ins gone", 3*time.Minute, func() error {
			for _, name := range []string{"data-db-0", "data-db-1"} {
				if _, err := mc.CoreV1().PersistentVolumeClaims(appsNS).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("member claim %s: %v", name, err)
				}
			}
			for _, pv := range standIns {
				if _, err := hc.CoreV1().PersistentVolumes().Get(ctx, pv, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("stand-in %s: %v", pv, err)
				}
			}
			return nil
		})
		if _, err := mc.CoreV1().PersistentVolumeClaims(appsNS).Get(ctx, "taken", metav1.GetOptions{}); err != nil {
			t.Errorf("the member's own claim taken: %v", err)
		}
	})

	t.Run("a pod whose data is in a member gone is held, with an Event", func(t *testing.T) {
		solo := leafWorkload("solo", 1, leaf).StatefulSet()
		withClaim(&solo.Spec.Template.Spec, "data")
		solo.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{claimTemplate("data", "leaf-standard")}
		// Its own affinity lets it run on the host's worker too: only its
		// claim keeps it to the leaf.
		solo.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Values = []string{leaf, "host-worker-0"}
		solo.Spec.Template.Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = []corev1.PreferredSchedulingTerm{{
			Weight: 100, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{leaf}}}},
		}}
		if _, err := hc.AppsV1().StatefulSets(appsNS).Create(ctx, solo, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitHostPodsReady(t, f, "app=solo", 1, 3*time.Minute, leaf)
		if err := hc.CoreV1().Secrets(leafsyncNamespace).Delete(ctx, "member-member-a", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		poll("leaf gone", 2*time.Minute, func() error {
			if _, err := hc.CoreV1().Nodes().Get(ctx, leaf, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("leaf %s: %v", leaf, err)
			}
			return nil
		})
		old, err := hc.CoreV1().Pods(appsNS).Get(ctx, "solo-0", metav1.GetOptions{})
		if err == nil {
			if err := hc.CoreV1().Pods(appsNS).Delete(ctx, "solo-0", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
		}
		poll("solo-0 held with an Event", 3*time.Minute, func() error {
			p, err := hc.CoreV1().Pods(appsNS).Get(ctx, "solo-0", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if old != nil && p.UID == old.UID {
				return fmt.Errorf("solo-0 not replaced yet")
			}
			if p.Spec.NodeName != "" {
				t.Fatalf("solo-0 placed on %s, away from its data", p.Spec.NodeName)
			}
			if note := hostEvents(t, f, "VolumeInMember")["solo-0"]; !strings.Contains(note, "member-a") {
				return fmt.Errorf("no VolumeInMember Event naming member-a on solo-0 (%q)", note)
			}
			return nil
		})
	})
}
