//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
	"github.com/leafsync/leafsync/test/harness"
)

// TestPersistentVolumesRealNode: the data a StatefulSet pod on a leaf
// writes to its claim is there for its replacement. The member has a
// real kubelet node; its claim binds to a hostPath PV there (the member's
// scheduler and PV controller). The pod writes a value to /data once and
// prints what /data holds; the host pod deleted, the new one (same claim,
// same leaf) prints the same value.
func TestPersistentVolumesRealNode(t *testing.T) {
	dir, err := harness.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	busybox := filepath.Join(dir, "conformance-images", "busybox.tar")
	image, err := harness.ImageRef(busybox)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	volumeControllers := []string{"persistentvolume-binder", "pvc-protection", "pv-protection"}
	network := harness.StartNodeNetwork(t)
	host := harness.StartCluster(t, harness.ClusterOptions{
		Name: "host", Controllers: append(slices.Clone(harness.HostControllers), volumeControllers...), Scheduler: true,
	})
	member := harness.StartCluster(t, harness.ClusterOptions{
		Name:        "member",
		Controllers: append(slices.Clone(harness.MemberControllers), append([]string{"nodelifecycle"}, volumeControllers...)...),
		Scheduler:   true, KubeletClientCert: true, Address: network.Gateway,
	})
	harness.StartNode(t, member, harness.NodeOptions{Name: "member-node", Network: network, Images: []string{busybox}})
	hc, mc := host.Client(), member.Client()

	wffc := ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)
	if _, err := hc.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: "leaf-standard"}, Provisioner: "leafsync.io/member", VolumeBindingMode: wffc,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := mc.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: "member-local"}, Provisioner: "kubernetes.io/no-provisioner", VolumeBindingMode: wffc,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pvDir, err := os.MkdirTemp("", "leafsync-pv-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(pvDir) })
	if _, err := mc.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "member-pv"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName:              "member-local",
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: pvDir, Type: ptr.To(corev1.HostPathDirectoryOrCreate)}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	serveMember(t, host, member, testConfig, map[string]string{"leafsync.io/storage-classes": "leaf-standard=member-local"})
	const leaf = realNodeLeaf
	if err := host.EnsureNamespace(ctx, appsNS); err != nil {
		t.Fatal(err)
	}

	db := leafWorkload("db", 1, leaf).StatefulSet()
	c := &db.Spec.Template.Spec.Containers[0]
	c.Image, c.ImagePullPolicy = image, corev1.PullIfNotPresent
	c.Command = []string{"sh", "-c", `[ -f /data/first ] || date +%s > /data/first; echo "data: $(cat /data/first)"; exec sleep 3600`}
	c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	db.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{
		ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To("leaf-standard"),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("100Mi")}},
		},
	}}
	start := time.Now()
	if _, err := hc.AppsV1().StatefulSets(appsNS).Create(ctx, db, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// written waits for host pod db-0 other than old to run in the member
	// and returns what its container printed of /data.
	written := func(old *corev1.Pod) (*corev1.Pod, string) {
		t.Helper()
		var hp *corev1.Pod
		var line string
		harness.Eventually(t, 3*time.Minute, "db-0 running on the real node, its data printed", func() error {
			p, err := hc.CoreV1().Pods(appsNS).Get(ctx, "db-0", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if old != nil && p.UID == old.UID {
				return fmt.Errorf("db-0 not replaced yet")
			}
			if p.Spec.NodeName != leaf || !podReady(p) {
				return fmt.Errorf("db-0 on %q ready %v", p.Spec.NodeName, podReady(p))
			}
			mp, err := mc.CoreV1().Pods(appsNS).Get(ctx, "db-0", metav1.GetOptions{})
			if err != nil || mp.Labels[podmeta.LabelHostUID] != string(p.UID) {
				return fmt.Errorf("member pod db-0 not the host pod's yet (%v)", err)
			}
			out, err := mc.CoreV1().Pods(appsNS).GetLogs("db-0", &corev1.PodLogOptions{}).DoRaw(ctx)
			if err != nil {
				return err
			}
			if line = strings.TrimSpace(string(out)); !strings.HasPrefix(line, "data: ") || len(line) <= len("data: ") {
				return fmt.Errorf("log %q", line)
			}
			hp = p
			return nil
		})
		return hp, line
	}
	first, before := written(nil)
	t.Logf("db-0 with its claim running on the real node %s after creation: %s", time.Since(start).Round(time.Second), before)
	start = time.Now()
	if err := hc.CoreV1().Pods(appsNS).Delete(ctx, "db-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	_, after := written(first)
	t.Logf("the replacement printed %s, %s after the delete", after, time.Since(start).Round(time.Second))
	if after != before {
		t.Errorf("the replacement found %q in its claim, the first pod wrote %q", after, before)
	}
	// The StatefulSet and its claim go before the node: nothing mounted left.
	if err := hc.AppsV1().StatefulSets(appsNS).Delete(ctx, "db", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 2*time.Minute, "member pod db-0 gone", func() error {
		if _, err := mc.CoreV1().Pods(appsNS).Get(ctx, "db-0", metav1.GetOptions{}); err == nil {
			return fmt.Errorf("still there")
		}
		return nil
	})
}
