package harness

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
)

// NodeSpec is the shape of fake nodes kwok simulates.
type NodeSpec struct {
	// Allocatable (and capacity) of each node; empty means 4 CPU, 16Gi, 110 pods.
	Allocatable corev1.ResourceList
	// Labels added to each node (e.g. topology.kubernetes.io/zone).
	Labels map[string]string
}

// DefaultAllocatable is a typical small worker.
func DefaultAllocatable() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("4"),
		corev1.ResourceMemory:           resource.MustParse("16Gi"),
		corev1.ResourcePods:             resource.MustParse("110"),
		corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
	}
}

// AddNodes creates n kwok-simulated nodes named prefix-0..n-1 and waits
// until kwok has made them Ready. The cluster must run kwok.
func (c *Cluster) AddNodes(ctx context.Context, prefix string, n int, spec NodeSpec) ([]string, error) {
	if spec.Allocatable == nil {
		spec.Allocatable = DefaultAllocatable()
	}
	var names []string
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("%s-%d", prefix, i)
		lbls := map[string]string{"type": "kwok", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}
		for k, v := range spec.Labels {
			lbls[k] = v
		}
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        name,
				Labels:      lbls,
				Annotations: map[string]string{KwokNodeAnnotation: "fake"},
			},
			Status: corev1.NodeStatus{Allocatable: spec.Allocatable, Capacity: spec.Allocatable},
		}
		if _, err := c.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating node %s: %w", name, err)
		}
		names = append(names, name)
	}
	return names, c.WaitNodesReady(ctx, names, 60*time.Second)
}

// WaitNodesReady waits until every named node reports Ready=True.
func (c *Cluster) WaitNodesReady(ctx context.Context, names []string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for _, name := range names {
		for {
			node, err := c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err == nil && NodeReady(node) == corev1.ConditionTrue {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("node %s not Ready after %s (is kwok running? see %s/kwok.log)", name, timeout, c.logDir)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}

// NodeReady returns the status of a node's Ready condition ("" if none).
func NodeReady(node *corev1.Node) corev1.ConditionStatus {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}

// PodSpec shapes pods created with AddPods.
type PodSpec struct {
	Namespace string
	// Requests of the single container; empty means 100m CPU, 128Mi.
	Requests corev1.ResourceList
	Labels   map[string]string
}

// AddPods creates n pods named prefix-0..n-1 bound round-robin to the
// given nodes (no scheduler needed) and waits until they are Running.
func (c *Cluster) AddPods(ctx context.Context, prefix string, n int, nodes []string, spec PodSpec) ([]string, error) {
	if spec.Namespace == "" {
		spec.Namespace = "default"
	}
	if spec.Requests == nil {
		spec.Requests = corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("100m"),
			corev1.ResourceMemory: resource.MustParse("128Mi"),
		}
	}
	if err := c.EnsureNamespace(ctx, spec.Namespace); err != nil {
		return nil, err
	}
	var names []string
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("%s-%d", prefix, i)
		// Extended resources (vendor/name) cannot be overcommitted: their
		// limit must equal the request.
		limits := corev1.ResourceList{}
		for name, q := range spec.Requests {
			if strings.Contains(string(name), "/") {
				limits[name] = q
			}
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: spec.Namespace, Labels: spec.Labels},
			Spec: corev1.PodSpec{
				NodeName:                      nodes[i%len(nodes)],
				TerminationGracePeriodSeconds: ptr.To[int64](0),
				Containers: []corev1.Container{{
					Name:      "app",
					Image:     "registry.example/app:1",
					Resources: corev1.ResourceRequirements{Requests: spec.Requests, Limits: limits},
				}},
			},
		}
		if _, err := c.client.CoreV1().Pods(spec.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("creating pod %s: %w", name, err)
		}
		names = append(names, name)
	}
	return names, c.WaitPodsRunning(ctx, spec.Namespace, names, 60*time.Second)
}

// WaitPodsRunning waits until every named pod is Running.
func (c *Cluster) WaitPodsRunning(ctx context.Context, namespace string, names []string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for _, name := range names {
		for {
			pod, err := c.client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
			if err == nil && pod.Status.Phase == corev1.PodRunning {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("pod %s/%s not Running after %s (see %s/kwok.log)", namespace, name, timeout, c.logDir)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}

// EnsureNamespace creates a namespace if it does not exist and, when KCM
// runs, waits for its default ServiceAccount so pods can be created in it.
func (c *Cluster) EnsureNamespace(ctx context.Context, name string) error {
	_, err := c.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if c.kcm == nil {
		return nil
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := c.client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no default ServiceAccount in namespace %s after 30s: %w", name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// CountPods counts pods matching a label selector in a namespace.
func (c *Cluster) CountPods(ctx context.Context, namespace string, selector labels.Selector) (int, error) {
	list, err := c.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return 0, err
	}
	return len(list.Items), nil
}
