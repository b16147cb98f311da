package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/leafsync/leafsync/leafnode"
	"github.com/leafsync/leafsync/syncer/podsync"
	"github.com/leafsync/leafsync/syncer/registration"
)

// drainPoll is how often a drain looks at a leaf's pods again: evictions
// a PodDisruptionBudget refused are retried at this pace.
const drainPoll = time.Second

// drainLeaves cordons the leaves of the registrations' members, evicts
// their pods and waits until no pod is left on them. leafsync forwards
// each eviction to the member and finishes the host pod only once its
// member copy is gone, so an empty leaf means nothing of it runs in the
// member any more, and an owner's replacement — a StatefulSet's pod of
// the same name — is created only after its old copy is gone. Evictions
// respect the host's PodDisruptionBudgets (a refused one is retried).
func drainLeaves(ctx context.Context, host kubernetes.Interface, targets []corev1.Secret, timeout time.Duration, out io.Writer) error {
	leaves, err := leavesOf(ctx, host, targets)
	if err != nil {
		return err
	}
	for _, leaf := range leaves {
		patch := []byte(`{"spec":{"unschedulable":true}}`)
		if _, err := host.CoreV1().Nodes().Patch(ctx, leaf, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("cordoning leaf %s: %w", leaf, err)
		}
		fmt.Fprintf(out, "leaf %s cordoned; evicting its pods (each finishes once its member copy is gone)\n", leaf)
	}
	evicted := map[types.UID]bool{}
	why := map[string]string{} // pod -> why it is still there
	err = wait.PollUntilContextTimeout(ctx, drainPoll, timeout, true, func(ctx context.Context) (bool, error) {
		clear(why)
		for _, leaf := range leaves {
			pods, err := drainablePods(ctx, host, leaf)
			if err != nil {
				return false, err
			}
			for _, p := range pods {
				name := p.Namespace + "/" + p.Name
				if p.DeletionTimestamp != nil {
					why[name] = "Terminating: its member copy is not gone yet"
					continue
				}
				ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
				err := host.CoreV1().Pods(p.Namespace).EvictV1(ctx, ev)
				switch {
				case err == nil || apierrors.IsNotFound(err):
					if !evicted[p.UID] {
						evicted[p.UID] = true
						fmt.Fprintf(out, "evicting pod %s on %s\n", name, leaf)
					}
					why[name] = "evicted"
				case apierrors.IsTooManyRequests(err):
					why[name] = "eviction refused, retried: " + err.Error()
				default:
					why[name] = "eviction failed, retried: " + err.Error()
				}
			}
		}
		return len(why) == 0, nil
	})
	if err != nil {
		left := make([]string, 0, len(why))
		for name, w := range why {
			left = append(left, name+" ("+w+")")
		}
		sort.Strings(left)
		return fmt.Errorf("leaves %s not drained after %s, %d pod(s) left: %s. Nothing was deregistered and the leaves stay cordoned (kubectl uncordon undoes it); a Terminating pod waits for its member copy to be deleted: is the member reachable? (kubectl leafsync status). Retry, or deregister with --orphan to leave the member pods running: %w",
			strings.Join(leaves, ", "), timeout, len(left), strings.Join(left, "; "), err)
	}
	fmt.Fprintf(out, "leaves %s drained: %d pod(s) evicted, their member copies deleted\n", strings.Join(leaves, ", "), len(evicted))
	return nil
}

// orphanNotice says which member pods a deregistration with --orphan
// leaves running, and what that means for their workloads.
func orphanNotice(ctx context.Context, host kubernetes.Interface, targets []corev1.Secret, out io.Writer) error {
	leaves, err := leavesOf(ctx, host, targets)
	if err != nil {
		return err
	}
	for _, leaf := range leaves {
		pods, err := drainablePods(ctx, host, leaf)
		if err != nil {
			return err
		}
		var names []string
		for _, p := range pods {
			if p.Annotations[podsync.AnnotationMemberUID] != "" {
				names = append(names, p.Namespace+"/"+p.Name)
			}
		}
		if len(names) == 0 {
			fmt.Fprintf(out, "--orphan: leaf %s has no pod with a member copy; nothing is left behind\n", leaf)
			continue
		}
		sort.Strings(names)
		fmt.Fprintf(out, "--orphan: %d pod(s) of leaf %s are left running in the member: %s.\n"+
			"  Their host pods go with the leaf and their owners recreate them on other nodes, so these workloads run twice until you delete the member copies (in the member: kubectl delete pods -A -l %s=true).\n",
			len(names), leaf, strings.Join(names, ", "), podsync.LabelManaged)
	}
	return nil
}

// leavesOf are the leaf Nodes of the registrations' members.
func leavesOf(ctx context.Context, host kubernetes.Interface, targets []corev1.Secret) ([]string, error) {
	var leaves []string
	for _, s := range targets {
		cluster := s.Labels[registration.LabelCluster]
		nodes, err := host.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: leafnode.LabelCluster + "=" + cluster})
		if err != nil {
			return nil, fmt.Errorf("listing the leaf of member %s: %w", cluster, err)
		}
		for _, n := range nodes.Items {
			leaves = append(leaves, n.Name)
		}
	}
	return leaves, nil
}

// drainablePods are the pods bound to a leaf that run in its member:
// every pod but a DaemonSet's (leafsync does not sync those, and their
// controller would put them back on the leaf).
func drainablePods(ctx context.Context, host kubernetes.Interface, leaf string) ([]corev1.Pod, error) {
	list, err := host.CoreV1().Pods("").List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", leaf).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("listing the pods on leaf %s: %w", leaf, err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if c := metav1.GetControllerOf(&p); c != nil && c.Kind == "DaemonSet" {
			continue
		}
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			if p.DeletionTimestamp == nil && !hasMemberFinalizer(&p) {
				continue // finished and settled: nothing of it runs
			}
		}
		out = append(out, p)
	}
	return out, nil
}

func hasMemberFinalizer(p *corev1.Pod) bool {
	for _, f := range p.Finalizers {
		if f == podsync.FinalizerMemberPod {
			return true
		}
	}
	return false
}
