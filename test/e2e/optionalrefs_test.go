//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/leafsync/leafsync/test/harness"
)

// hostRef is a host ConfigMap or Secret a pod refers to.
type hostRef struct{ kind, name string }

// optionalRefs: a pod refers to each with optional: true, in its own way
// (a volume, envFrom, a projected source; withOptionalRefs).

var hostRefs = []hostRef{
	{"ConfigMap", "cm-volume"}, {"ConfigMap", "cm-env"}, {"ConfigMap", "cm-projected"},
	{"Secret", "secret-volume"}, {"Secret", "secret-env"}, {"Secret", "secret-projected"},
}

// withOptionalRefs gives a pod every hostRef: a configMap and a secret
// volume, envFrom both, and one projected volume with both as sources.
func withOptionalRefs(p *corev1.Pod) {
	yes := ptr.To(true)
	p.Spec.Volumes = append(p.Spec.Volumes,
		corev1.Volume{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "cm-volume"}, Optional: yes}}},
		corev1.Volume{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: "secret-volume", Optional: yes}}},
		corev1.Volume{Name: "projected", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "cm-projected"}, Optional: yes}},
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "secret-projected"}, Optional: yes}},
			}}}})
	c := &p.Spec.Containers[0]
	c.EnvFrom = append(c.EnvFrom,
		corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm-env"}, Optional: yes}},
		corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "secret-env"}, Optional: yes}})
	c.VolumeMounts = append(c.VolumeMounts,
		corev1.VolumeMount{Name: "cm", MountPath: "/etc/cm"},
		corev1.VolumeMount{Name: "secret", MountPath: "/etc/secret"},
		corev1.VolumeMount{Name: "projected", MountPath: "/etc/projected"})
}

// TestOptionalRefsFollowHost: the host ConfigMaps and Secrets a pod on a
// leaf refers to with optional: true — as a volume, through envFrom, as a
// projected source — are copied into the member when they are created in
// the host after the pod, follow the host's changes, and go from the
// member when they go from the host (and do not come back), so the member
// kubelet projects, updates and removes their files as a node's would (the
// conformance specs "optional updates should be reflected in volume"). The
// member pod stays the same pod throughout. A ConfigMap a second pod needs
// through a projected source (not optional) follows the host's change too,
// and its copy outlives the host object, as a kubelet keeps a volume's
// last files.
func TestOptionalRefsFollowHost(t *testing.T) {
	const name, leaf = "optional-refs", "leaf-member-a"
	f, member := podOnLeaf(t, name, withOptionalRefs)
	hc, mc := f.host.Client(), f.members["member-a"].Client()
	ctx := context.Background()
	wait := 2*podSyncResync + 5*time.Second

	// inMember: every copy in the member holds value under key "k"
	// ("": every copy is gone).
	inMember := func(value string) error {
		for _, r := range hostRefs {
			data, err := objectData(ctx, mc, r)
			switch {
			case value == "" && apierrors.IsNotFound(err):
			case value == "" && err == nil:
				return fmt.Errorf("%s %s still in the member", r.kind, r.name)
			case err != nil:
				return fmt.Errorf("%s %s: %w", r.kind, r.name, err)
			case data["k"] != value:
				return fmt.Errorf("member %s %s holds %q, want %q", r.kind, r.name, data["k"], value)
			}
		}
		mp, err := mc.CoreV1().Pods(appsNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if mp.UID != member.UID {
			return fmt.Errorf("member pod replaced: uid %s, was %s", mp.UID, member.UID)
		}
		return nil
	}
	// step changes every host object (value "": deletes it) and waits for
	// the member to follow.
	step := func(t *testing.T, what, value string, change func(hostRef) error) {
		for _, r := range hostRefs {
			if err := change(r); err != nil {
				t.Fatalf("%s %s in the host: %v", r.kind, r.name, err)
			}
		}
		start := time.Now()
		harness.Eventually(t, wait, what, func() error { return inMember(value) })
		t.Logf("%s %s after the host's change (resync %s)", what, time.Since(start).Round(time.Millisecond), podSyncResync)
	}

	if err := inMember(""); err != nil {
		t.Fatalf("before the host objects exist: %v", err)
	}
	t.Run("created in the host after the pod: copied", func(t *testing.T) {
		step(t, "member copies made", "v1", func(r hostRef) error { return createObject(ctx, hc, r, "v1") })
	})
	t.Run("changed in the host: the copies follow", func(t *testing.T) {
		step(t, "member copies updated", "v2", func(r hostRef) error { return updateObject(ctx, hc, r, "v2") })
	})
	t.Run("deleted in the host: the copies go, and stay gone", func(t *testing.T) {
		step(t, "member copies deleted", "", func(r hostRef) error { return deleteObject(ctx, hc, r) })
		time.Sleep(podSyncResync + time.Second) // a resync that would recreate a stale copy
		if err := inMember(""); err != nil {
			t.Error(err)
		}
	})
	t.Run("needed through a projected source: follows the host, outlives its deletion", func(t *testing.T) {
		needed := hostRef{"ConfigMap", "cm-needed"}
		holds := func(value string) func() error {
			return func() error {
				data, err := objectData(ctx, mc, needed)
				if err == nil && data["k"] != value {
					err = fmt.Errorf("member copy holds %q, want %q", data["k"], value)
				}
				return err
			}
		}
		if err := createObject(ctx, hc, needed, "v1"); err != nil {
			t.Fatal(err)
		}
		tmpl := leafWorkload("needs-projected", 1, leaf).PodTemplate()
		tmpl.Spec.Volumes = append(tmpl.Spec.Volumes, corev1.Volume{Name: "projected", VolumeSource: corev1.VolumeSource{
			Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ConfigMap: &corev1.ConfigMapProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: needed.name}}}}}}})
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "needs-projected", Namespace: appsNS, Labels: tmpl.Labels}, Spec: tmpl.Spec}
		if _, err := hc.CoreV1().Pods(appsNS).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitHostPodsReady(t, f, "app=needs-projected", 1, 30*time.Second, leaf)
		if err := updateObject(ctx, hc, needed, "v2"); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, wait, "member copy of the needed ConfigMap updated", holds("v2"))
		if err := deleteObject(ctx, hc, needed); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2*podSyncResync + time.Second) // resyncs that would delete it
		if err := holds("v2")(); err != nil {
			t.Errorf("the copy a running pod needs, after its host object went: %v", err)
		}
	})
}

// objectData is the data of a ConfigMap or Secret as strings.
func objectData(ctx context.Context, c kubernetes.Interface, r hostRef) (map[string]string, error) {
	if r.kind == "ConfigMap" {
		cm, err := c.CoreV1().ConfigMaps(appsNS).Get(ctx, r.name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return cm.Data, nil
	}
	s, err := c.CoreV1().Secrets(appsNS).Get(ctx, r.name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	data := map[string]string{}
	for k, v := range s.Data {
		data[k] = string(v)
	}
	return data, nil
}

// createObject creates r with "k": value.
func createObject(ctx context.Context, c kubernetes.Interface, r hostRef, value string) error {
	meta := metav1.ObjectMeta{Name: r.name, Namespace: appsNS}
	if r.kind == "ConfigMap" {
		_, err := c.CoreV1().ConfigMaps(appsNS).Create(ctx, &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"k": value}}, metav1.CreateOptions{})
		return err
	}
	_, err := c.CoreV1().Secrets(appsNS).Create(ctx, &corev1.Secret{ObjectMeta: meta, StringData: map[string]string{"k": value}}, metav1.CreateOptions{})
	return err
}

// updateObject sets r's "k" to value.
func updateObject(ctx context.Context, c kubernetes.Interface, r hostRef, value string) error {
	if r.kind == "ConfigMap" {
		cm, err := c.CoreV1().ConfigMaps(appsNS).Get(ctx, r.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cm.Data["k"] = value
		_, err = c.CoreV1().ConfigMaps(appsNS).Update(ctx, cm, metav1.UpdateOptions{})
		return err
	}
	s, err := c.CoreV1().Secrets(appsNS).Get(ctx, r.name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	s.Data["k"] = []byte(value)
	_, err = c.CoreV1().Secrets(appsNS).Update(ctx, s, metav1.UpdateOptions{})
	return err
}

func deleteObject(ctx context.Context, c kubernetes.Interface, r hostRef) error {
	if r.kind == "ConfigMap" {
		return c.CoreV1().ConfigMaps(appsNS).Delete(ctx, r.name, metav1.DeleteOptions{})
	}
	return c.CoreV1().Secrets(appsNS).Delete(ctx, r.name, metav1.DeleteOptions{})
}
