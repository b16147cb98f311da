package harness

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// StartScheduler starts kube-scheduler in a cluster started without one
// (members: their pods are created without a node, as in a real member,
// and placed by the member's own scheduler). It stops with the cluster.
func (c *Cluster) StartScheduler() error {
	if c.scheduler != nil {
		return nil
	}
	return c.startScheduler()
}

// LiftNotReadyTaints removes the node.kubernetes.io/not-ready:NoSchedule
// taint that the API server puts on every new node (TaintNodesByCondition)
// from the cluster's Ready nodes, as the node lifecycle controller does in
// a real cluster. Members run no node lifecycle controller (kwok keeps
// their nodes alive), so their own scheduler needs this to place pods.
func (c *Cluster) LiftNotReadyTaints(ctx context.Context) error {
	nodes, err := c.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if NodeReady(n) != corev1.ConditionTrue {
			continue
		}
		var keep []corev1.Taint
		for _, t := range n.Spec.Taints {
			if t.Key != corev1.TaintNodeNotReady {
				keep = append(keep, t)
			}
		}
		if len(keep) == len(n.Spec.Taints) {
			continue
		}
		n.Spec.Taints = keep
		if _, err := c.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("untainting node %s: %w", n.Name, err)
		}
	}
	return nil
}

// LeafWorkload shapes a Deployment or StatefulSet whose pods run on leaves:
// they tolerate the leafsync.io/leaf taint, are pinned by required node
// affinity to the given leaves (so where replacements land is
// deterministic), and tolerate not-ready/unreachable for TolerationSeconds,
// as the DefaultTolerationSeconds admission plugin would with 300s.
type LeafWorkload struct {
	Namespace, Name string
	Replicas        int32
	// Leaves are the leaf node names the pods may run on (required).
	Leaves []string
	// TolerationSeconds of the not-ready and unreachable NoExecute
	// tolerations (0: 300, the admission default).
	TolerationSeconds int64
	// TerminationGracePeriodSeconds of the pods (nil: the API default).
	TerminationGracePeriodSeconds *int64
	// Image of the one container (default registry.example/app:1).
	Image string
	// ConfigMap and Secret, when set, are used by the pods (a volume
	// and an env var), so that leafsync has to copy them.
	ConfigMap, Secret string
}

// Labels are the pods' labels (and the selector).
func (w LeafWorkload) Labels() map[string]string { return map[string]string{"app": w.Name} }

// PodTemplate is the workload's pod template.
func (w LeafWorkload) PodTemplate() corev1.PodTemplateSpec {
	tol := w.TolerationSeconds
	if tol == 0 {
		tol = 300
	}
	image := w.Image
	if image == "" {
		image = "registry.example/app:1"
	}
	c := corev1.Container{
		Name:  "app",
		Image: image,
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi"),
		}},
	}
	spec := corev1.PodSpec{
		TerminationGracePeriodSeconds: w.TerminationGracePeriodSeconds,
		Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: w.Leaves}},
			}}},
		}},
		Tolerations: []corev1.Toleration{
			{Key: "leafsync.io/leaf", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
			{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(tol)},
			{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(tol)},
		},
	}
	if w.ConfigMap != "" {
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "config", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: w.ConfigMap}},
		}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "config", MountPath: "/etc/app"})
	}
	if w.Secret != "" {
		c.Env = append(c.Env, corev1.EnvVar{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: w.Secret}, Key: "password"},
		}})
	}
	spec.Containers = []corev1.Container{c}
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: w.Labels()}, Spec: spec}
}

// Deployment is the workload as a Deployment.
func (w LeafWorkload) Deployment() *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: w.Name, Namespace: w.Namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(w.Replicas),
			Selector: &metav1.LabelSelector{MatchLabels: w.Labels()},
			Template: w.PodTemplate(),
		},
	}
}

// StatefulSet is the workload as a StatefulSet with parallel pod
// management (replacements are created at once, not one by one).
func (w LeafWorkload) StatefulSet() *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: w.Name, Namespace: w.Namespace},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(w.Replicas),
			Selector:            &metav1.LabelSelector{MatchLabels: w.Labels()},
			Template:            w.PodTemplate(),
			ServiceName:         w.Name,
			PodManagementPolicy: appsv1.ParallelPodManagement,
		},
	}
}

// WaitPods polls the pods matching selector in namespace until cond
// accepts them, and returns them.
func (c *Cluster) WaitPods(ctx context.Context, namespace, selector string, timeout time.Duration, cond func([]corev1.Pod) error) ([]corev1.Pod, error) {
	deadline := time.Now().Add(timeout)
	for {
		list, err := c.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err == nil {
			if err = cond(list.Items); err == nil {
				return list.Items, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("pods %q in %s (cluster %s) after %s: %w", selector, namespace, c.Name, timeout, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
