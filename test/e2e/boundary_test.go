//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
	"github.com/leafsync/leafsync/test/harness"
)

// The registration annotations of the member's owner (spelt out, not
// podsync's constants, so that the test also builds on a leafsync that
// lacks them and fails there).
const (
	annMemberNamespaces = "leafsync.io/member-namespaces"
	annPodSecurity      = "leafsync.io/pod-security"
)

// TestMemberOwnersBoundary: a host pod gets only what the host gave it and
// what the member's owner allowed (docs/pod-sync.md).
//   - a member Secret and PVC leafsync did not create, in a namespace the
//     registration lists: host pods naming them are not created in the
//     member, carry a Warning Event naming the conflict, and the member's
//     objects are unchanged;
//   - a ConfigMap that appears in the host 20 s after its pod: no member
//     pod before, the pod runs after, without a restart of leafsync;
//   - a member namespace leafsync did not create: refused until the
//     registration lists it; kube-public: refused;
//   - one pod per upstream baseline Pod Security check: refused with the
//     library's words, then created once the registration allows
//     privileged (the namespace leafsync created is relabelled with it).
func TestMemberOwnersBoundary(t *testing.T) {
	f := newPodSyncFleet(t, "member-a")
	member := f.members["member-a"]
	hc, mc := f.host.Client(), member.Client()
	ctx := context.Background()
	const leaf = "leaf-member-a"
	for _, ns := range []string{"team-x", "psa"} {
		if err := f.host.EnsureNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	// The member's own objects, made by its owner, not by leafsync.
	for _, ns := range []string{appsNS, "team-x"} {
		if err := member.EnsureNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	memberSecret, err := mc.CoreV1().Secrets(appsNS).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "db-creds", Namespace: appsNS}, Data: map[string][]byte{"password": []byte("member's own")},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	memberPVC, err := mc.CoreV1().PersistentVolumeClaims(appsNS).Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: appsNS},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The host has a Secret of that name too: it must not overwrite the member's.
	if _, err := hc.CoreV1().Secrets(appsNS).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "db-creds", Namespace: appsNS}, Data: map[string][]byte{"password": []byte("host's")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	f.startLeafsync(t, "leafsync")
	f.register(t, "member-a", map[string]string{annMemberNamespaces: appsNS})
	f.waitLeafReady(t, leaf, time.Minute)

	leafPod := func(t *testing.T, ns, name string, mutate func(*corev1.Pod)) *corev1.Pod {
		t.Helper()
		tmpl := leafWorkload(name, 1, leaf).PodTemplate()
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"boundary": name}}, Spec: tmpl.Spec}
		p.Spec.NodeName = leaf
		if mutate != nil {
			mutate(p)
		}
		if _, err := hc.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("host pod %s/%s: %v", ns, name, err)
		}
		return p
	}
	// warnings are the notes of the Warning Events with reason on the host
	// pods of ns, by pod name.
	warnings := func(ns, reason string) (map[string][]string, error) {
		evs, err := hc.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		out := map[string][]string{}
		for _, e := range evs.Items {
			if e.Regarding.Kind == "Pod" && e.Reason == reason && e.Type == corev1.EventTypeWarning {
				out[e.Regarding.Name] = append(out[e.Regarding.Name], e.Note)
			}
		}
		return out, nil
	}
	// eventSays reports the first of notes that holds every one of want.
	eventSays := func(notes []string, want ...string) (string, error) {
		for _, n := range notes {
			ok := true
			for _, w := range want {
				ok = ok && strings.Contains(n, w)
			}
			if ok {
				return n, nil
			}
		}
		return "", fmt.Errorf("no event says %q among %q", want, notes)
	}
	// waitEvent waits for a Warning Event with reason on host pod ns/name
	// whose note holds every one of want, and returns the note.
	waitEvent := func(t *testing.T, ns, name, reason string, want ...string) string {
		t.Helper()
		var note string
		harness.Eventually(t, 30*time.Second, fmt.Sprintf("a %s Event on %s/%s", reason, ns, name), func() error {
			ws, err := warnings(ns, reason)
			if err != nil {
				return err
			}
			note, err = eventSays(ws[name], want...)
			return err
		})
		return note
	}
	memberPod := func(ns, name string) (*corev1.Pod, error) {
		return mc.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	}
	noMemberPod := func(t *testing.T, ns, name string) {
		t.Helper()
		if p, err := memberPod(ns, name); err == nil {
			t.Errorf("member pod %s/%s created (uid %s)", ns, name, p.UID)
		}
	}
	waitRunning := func(t *testing.T, ns, name string) {
		t.Helper()
		harness.Eventually(t, 30*time.Second, fmt.Sprintf("%s/%s running in the member and the host", ns, name), func() error {
			if _, err := memberPod(ns, name); err != nil {
				return err
			}
			hp, err := hc.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if hp.Status.Phase != corev1.PodRunning {
				return fmt.Errorf("host pod %s", hp.Status.Phase)
			}
			return nil
		})
	}

	t.Run("names resolve to host objects only", func(t *testing.T) {
		leafPod(t, appsNS, "uses-creds", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db-creds"}}}}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "creds", MountPath: "/creds"}}
		})
		leafPod(t, appsNS, "uses-pvc", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		})
		time.Sleep(2 * podSyncResync) // time to create them, and a resync
		noMemberPod(t, appsNS, "uses-creds")
		noMemberPod(t, appsNS, "uses-pvc")
		s, err := mc.CoreV1().Secrets(appsNS).Get(ctx, "db-creds", metav1.GetOptions{})
		if err != nil || s.ResourceVersion != memberSecret.ResourceVersion || string(s.Data["password"]) != "member's own" {
			t.Errorf("member Secret changed: %v (resourceVersion %s, was %s)", err, s.ResourceVersion, memberSecret.ResourceVersion)
		}
		pvc, err := mc.CoreV1().PersistentVolumeClaims(appsNS).Get(ctx, "data", metav1.GetOptions{})
		if err != nil || pvc.ResourceVersion != memberPVC.ResourceVersion {
			t.Errorf("member PVC changed: %v", err)
		}
		note := waitEvent(t, appsNS, "uses-creds", "MemberObjectConflict", "Secret apps/db-creds", "member-a", "did not create")
		t.Logf("uses-creds: %s", note)
		note = waitEvent(t, appsNS, "uses-pvc", "NotSyncedVolumeClaim", "PersistentVolumeClaim data", "not supported yet")
		t.Logf("uses-pvc: %s", note)
	})

	t.Run("a ConfigMap that appears later", func(t *testing.T) {
		rec := recordPods(t, member.Cluster, "boundary=late")
		leafPod(t, appsNS, "late", func(p *corev1.Pod) {
			p.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "late-config"}}}}
		})
		time.Sleep(20 * time.Second)
		for _, e := range rec.events(t) {
			t.Errorf("member pod %s seen before its ConfigMap existed (%s)", e.pod.Name, e.typ)
		}
		note := waitEvent(t, appsNS, "late", "HostObjectNotFound", "ConfigMap apps/late-config")
		t.Logf("late: %s", note)
		if _, err := hc.CoreV1().ConfigMaps(appsNS).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "late-config", Namespace: appsNS}, Data: map[string]string{"MODE": "late"},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		created := time.Now()
		waitRunning(t, appsNS, "late")
		t.Logf("the pod ran %s after its ConfigMap appeared in the host", time.Since(created).Round(time.Millisecond))
		cm, err := mc.CoreV1().ConfigMaps(appsNS).Get(ctx, "late-config", metav1.GetOptions{})
		if err != nil || cm.Data["MODE"] != "late" || cm.Labels[podmeta.LabelManaged] != "true" {
			t.Errorf("member copy of the ConfigMap: %v %v", cm, err)
		}
	})

	t.Run("namespaces the member's owner allowed", func(t *testing.T) {
		leafPod(t, "team-x", "in-team-x", nil)
		leafPod(t, "kube-public", "in-kube-public", nil)
		time.Sleep(2 * podSyncResync)
		noMemberPod(t, "team-x", "in-team-x")
		noMemberPod(t, "kube-public", "in-kube-public")
		if n, err := mc.CoreV1().Namespaces().Get(ctx, "team-x", metav1.GetOptions{}); err != nil || n.Labels[podmeta.LabelManaged] != "" {
			t.Errorf("member namespace team-x changed: %v %v", n.Labels, err)
		}
		waitEvent(t, "team-x", "in-team-x", "NotSyncedNamespace", "namespace team-x", annMemberNamespaces)
		waitEvent(t, "kube-public", "in-kube-public", "NotSyncedNamespace", "kube-public")
		f.annotateRegistration(t, "member-a", map[string]string{annMemberNamespaces: appsNS + ",team-x"})
		waitRunning(t, "team-x", "in-team-x")
		time.Sleep(podSyncResync)
		noMemberPod(t, "kube-public", "in-kube-public")
	})

	t.Run("upstream Pod Security baseline checks", func(t *testing.T) {
		leafPod(t, "psa", "plain", nil) // leafsync creates the member namespace psa
		waitRunning(t, "psa", "plain")
		// procMount Unmasked in a user namespace: baseline allows it since
		// v1.35 (without hostUsers: false the API refuses the pod itself).
		leafPod(t, "psa", "userns-unmasked", func(p *corev1.Pod) {
			p.Spec.HostUsers = ptr.To(false)
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{ProcMount: ptr.To(corev1.UnmaskedProcMount)}
		})
		waitRunning(t, "psa", "userns-unmasked")
		if n, err := mc.CoreV1().Namespaces().Get(ctx, "psa", metav1.GetOptions{}); err != nil || n.Labels["pod-security.kubernetes.io/enforce"] != "baseline" {
			t.Fatalf("member namespace psa: %v %v", n, err)
		}
		sc := func(p *corev1.Pod) *corev1.SecurityContext {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{}
			return p.Spec.Containers[0].SecurityContext
		}
		checks := []struct {
			name, reason string
			mutate       func(*corev1.Pod)
		}{
			{"cap-sys-admin", "non-default capabilities", func(p *corev1.Pod) {
				sc(p).Capabilities = &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}
			}},
			{"host-port", "hostPort", func(p *corev1.Pod) {
				p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080, HostPort: 8080}}
			}},
			{"seccomp-unconfined", "seccompProfile", func(p *corev1.Pod) {
				p.Spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}
			}},
			{"apparmor-unconfined", "forbidden AppArmor profile", func(p *corev1.Pod) {
				sc(p).AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
			}},
			{"unsafe-sysctl", "forbidden sysctls", func(p *corev1.Pod) {
				p.Spec.SecurityContext = &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "kernel.msgmax", Value: "65536"}}}
			}},
			{"host-path", "hostPath volumes", func(p *corev1.Pod) {
				p.Spec.Volumes = []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
			}},
			{"host-network", "host namespaces", func(p *corev1.Pod) { p.Spec.HostNetwork = true }},
			{"host-pid", "host namespaces", func(p *corev1.Pod) { p.Spec.HostPID = true }},
			{"host-ipc", "host namespaces", func(p *corev1.Pod) { p.Spec.HostIPC = true }},
			{"privileged", "privileged", func(p *corev1.Pod) { sc(p).Privileged = ptr.To(true) }},
			{"selinux-type", "seLinuxOptions", func(p *corev1.Pod) {
				sc(p).SELinuxOptions = &corev1.SELinuxOptions{Type: "spc_t"}
			}},
			{"windows-host-process", "hostProcess", func(p *corev1.Pod) {
				p.Spec.HostNetwork = true // the API requires it of hostProcess pods
				p.Spec.SecurityContext = &corev1.PodSecurityContext{WindowsOptions: &corev1.WindowsSecurityContextOptions{HostProcess: ptr.To(true)}}
			}},
			{"probe-host", "probe or lifecycle host", func(p *corev1.Pod) {
				p.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
					TCPSocket: &corev1.TCPSocketAction{Host: "169.254.169.254", Port: intstr.FromInt32(80)},
				}}
			}},
		}
		for _, c := range checks {
			leafPod(t, "psa", c.name, c.mutate)
		}
		time.Sleep(2 * podSyncResync)
		for _, c := range checks {
			noMemberPod(t, "psa", c.name)
		}
		notes := map[string]string{}
		harness.Eventually(t, 30*time.Second, "a NotSyncedPodSecurity Event with the library's words on each pod", func() error {
			ws, err := warnings("psa", "NotSyncedPodSecurity")
			if err != nil {
				return err
			}
			for _, c := range checks {
				n, err := eventSays(ws[c.name], `violates PodSecurity "baseline:latest": `, c.reason, annPodSecurity)
				if err != nil {
					return fmt.Errorf("%s: %w", c.name, err)
				}
				notes[c.name] = n
			}
			return nil
		})
		for _, c := range checks {
			t.Logf("%s: %s", c.name, notes[c.name])
		}
		f.annotateRegistration(t, "member-a", map[string]string{annPodSecurity: "privileged"})
		for _, c := range checks {
			harness.Eventually(t, 30*time.Second, "member pod psa/"+c.name+" at privileged", func() error {
				_, err := memberPod("psa", c.name)
				return err
			})
		}
		if n, err := mc.CoreV1().Namespaces().Get(ctx, "psa", metav1.GetOptions{}); err != nil || n.Labels["pod-security.kubernetes.io/enforce"] != "privileged" {
			t.Errorf("member namespace psa not relabelled: %v %v", n.Labels, err)
		}
	})
}

// annotateRegistration merges annotations into a member's registration
// Secret (leafsync writes its status there too: retried on conflict).
func (f *fleet) annotateRegistration(t *testing.T, name string, annotations map[string]string) {
	t.Helper()
	secrets := f.host.Client().CoreV1().Secrets(leafsyncNamespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := secrets.Get(context.Background(), "member-"+name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		for k, v := range annotations {
			s.Annotations[k] = v
		}
		_, err = secrets.Update(context.Background(), s, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
