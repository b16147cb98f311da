package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
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
	"k8s.io/client-go/rest"

	"github.com/leafsync/leafsync/internal/leafnode"
	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
	"github.com/leafsync/leafsync/internal/syncer/registration"
)

// How often deregister looks again: drainPoll at a leaf's pods (evictions
// a PodDisruptionBudget refused are retried at this pace), cleanupPoll at
// the registration Secrets and leafsync's pods. Variables so that the
// tests, which wait on a fake API server, need not wait a second a round.
var (
	drainPoll   = time.Second
	cleanupPoll = 500 * time.Millisecond
)

// memberPodsFunc lists the pods leafsync made in a registration's member
// for this host, by a live read of the member.
type memberPodsFunc func(ctx context.Context, reg *corev1.Secret) ([]string, error)

// drainLeaves cordons the leaves of the registrations' members, evicts
// their pods and waits until no pod is left on them and no pod of
// leafsync's is left in their members. leafsync forwards each eviction to
// the member and finishes the host pod only once its member copy is gone,
// so an owner's replacement — a StatefulSet's pod of the same name — is
// created only after its old copy is gone. A member that is down when its
// pod is evicted gets the delete later (leafsync records it and finishes
// the host pod at once): the live read of the member waits for that too,
// so the registration, and the record, stay until the copies are gone.
// Evictions respect the host's PodDisruptionBudgets (a refused one is
// retried).
func drainLeaves(ctx context.Context, host kubernetes.Interface, targets []corev1.Secret, memberPods memberPodsFunc, timeout time.Duration, out io.Writer) error {
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
	evicted, skipped := map[types.UID]bool{}, map[string]bool{}
	var why map[string]string // what is still there -> why
	err = wait.PollUntilContextTimeout(ctx, drainPoll, timeout, true, func(ctx context.Context) (bool, error) {
		cur := map[string]string{}
		defer func() { why = cur }()
		for _, leaf := range leaves {
			pods, err := drainablePods(ctx, host, leaf)
			if err != nil {
				// Retried; the last account of what is left stands (a
				// list cut short by the deadline says nothing new).
				maps.Copy(cur, why)
				if len(why) == 0 {
					cur["leaf "+leaf] = err.Error()
				}
				continue
			}
			for _, p := range pods {
				name := p.Namespace + "/" + p.Name
				if p.DeletionTimestamp != nil {
					cur[name] = "Terminating: its member copy is not gone yet"
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
					cur[name] = "evicted"
				case apierrors.IsTooManyRequests(err):
					cur[name] = "eviction refused, retried: " + err.Error()
				default:
					cur[name] = "eviction failed, retried: " + err.Error()
				}
			}
		}
		if len(cur) > 0 {
			return false, nil
		}
		for i := range targets {
			left, err := memberPods(ctx, &targets[i])
			member := "member " + targets[i].Labels[registration.LabelCluster]
			var unusable *registration.Error
			switch {
			case errors.As(err, &unusable):
				// A Secret leafsync refuses runs nothing: its leaf, drained
				// above, is all there is to wait for.
				if !skipped[member] {
					skipped[member] = true
					fmt.Fprintf(out, "%s: its registration is not usable (%v), so the member is not read\n", member, err)
				}
			case err != nil:
				cur[member] = "cannot read its pods: " + err.Error()
			case len(left) > 0:
				cur[member] = fmt.Sprintf("%d pod(s) of leafsync's still in it: %s", len(left), strings.Join(left, ", "))
			}
		}
		return len(cur) == 0, nil
	})
	if err != nil {
		left := make([]string, 0, len(why))
		for name, w := range why {
			left = append(left, name+" ("+w+")")
		}
		sort.Strings(left)
		return fmt.Errorf("leaves %s not drained after %s, %d left: %s. Nothing was deregistered and the leaves stay cordoned (kubectl uncordon undoes it); a Terminating pod waits for its member copy to be deleted, and leafsync deletes a copy only while its member answers (kubectl leafsync status). Retry, or deregister with --orphan to leave the member pods running: %w",
			strings.Join(leaves, ", "), timeout, len(left), strings.Join(left, "; "), err)
	}
	fmt.Fprintf(out, "leaves %s drained: %d pod(s) evicted; no pod of leafsync's left in the member(s)\n", strings.Join(leaves, ", "), len(evicted))
	return nil
}

// livePodsInMember reads, in the member, the pods leafsync made there for
// this host (podsync's labels: managed, the cluster's name, the host's
// identity or none), with the registration's own kubeconfig.
func livePodsInMember(host kubernetes.Interface) memberPodsFunc {
	var hostID string
	return func(ctx context.Context, reg *corev1.Secret) ([]string, error) {
		if hostID == "" {
			ns, err := host.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
			if err != nil {
				return nil, fmt.Errorf("reading the host's identity (namespace kube-system): %w", err)
			}
			hostID = string(ns.UID)
		}
		spec, err := registration.Parse(reg, registration.Policy{AllowExecAuth: true, AllowFileReferences: true})
		if err != nil {
			return nil, err
		}
		cfg := rest.CopyConfig(spec.RESTConfig)
		cfg.Timeout = 10 * time.Second
		member, err := newClient(cfg)
		if err != nil {
			return nil, err
		}
		list, err := member.CoreV1().Pods("").List(ctx, metav1.ListOptions{
			LabelSelector: podmeta.LabelManaged + "=true," + podmeta.LabelCluster + "=" + spec.Cluster,
		})
		if err != nil {
			return nil, err
		}
		var names []string
		for _, p := range list.Items {
			if h, ok := p.Labels[podmeta.LabelHost]; !ok || h == hostID {
				names = append(names, p.Namespace+"/"+p.Name)
			}
		}
		sort.Strings(names)
		return names, nil
	}
}

// orphanNotice says which pods a deregistration with --orphan leaves
// running in the members, and what that means for their workloads: read
// from each member; from the leaf's pods when the member cannot be read.
func orphanNotice(ctx context.Context, host kubernetes.Interface, targets []corev1.Secret, memberPods memberPodsFunc, out io.Writer) error {
	const twice = "  Their host pods go with the leaf and their owners recreate them on other nodes, so these workloads run twice until you delete them in the member (kubectl delete pods -A -l " + podmeta.LabelManaged + "=true).\n"
	for i := range targets {
		cluster := targets[i].Labels[registration.LabelCluster]
		names, err := memberPods(ctx, &targets[i])
		if err == nil {
			if len(names) == 0 {
				fmt.Fprintf(out, "--orphan: member %s holds no pod leafsync made; nothing is left behind\n", cluster)
			} else {
				fmt.Fprintf(out, "--orphan: %d pod(s) leafsync made in member %s are left running: %s.\n"+twice, len(names), cluster, strings.Join(names, ", "))
			}
			continue
		}
		leaves, lerr := leavesOf(ctx, host, targets[i:i+1])
		if lerr != nil {
			return lerr
		}
		names = names[:0]
		for _, leaf := range leaves {
			pods, err := drainablePods(ctx, host, leaf)
			if err != nil {
				return err
			}
			for _, p := range pods {
				if p.Annotations[podmeta.AnnotationMemberUID] != "" {
					names = append(names, p.Namespace+"/"+p.Name)
				}
			}
		}
		sort.Strings(names)
		fmt.Fprintf(out, "--orphan: member %s cannot be read (%v): whatever leafsync made there is left running (its leaf has %d pod(s) with a member copy: %s).\n"+twice,
			cluster, err, len(names), strings.Join(names, ", "))
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
	// Two Secrets of one cluster (a duplicate) name one leaf.
	slices.Sort(leaves)
	return slices.Compact(leaves), nil
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
		if f == podmeta.FinalizerMemberPod {
			return true
		}
	}
	return false
}
