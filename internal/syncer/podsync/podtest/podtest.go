// Package podtest holds the fixtures pod sync's unit tests share (decide,
// translate): one member, one leaf, one StatefulSet host pod.
package podtest

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// T0 is the tests' now.
var T0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	// Cluster is the member's name.
	Cluster = "member-a"
	// Host is the host's identity.
	Host = "host-a"
	// Leaf is the member's leaf node.
	Leaf = "leaf-member-a"
)

// HostPod is a running host pod web-0 of StatefulSet web, bound to Leaf.
func HostPod(uid string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-0", Namespace: "apps", UID: types.UID(uid),
			Labels:            map[string]string{"app": "web"},
			CreationTimestamp: metav1.NewTime(T0.Add(-time.Hour)),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web", UID: "sts-uid", Controller: ptr.To(true),
			}},
		},
		Spec: corev1.PodSpec{
			NodeName:   Leaf,
			Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}
