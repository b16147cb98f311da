package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/leafsync/leafsync/internal/syncer/config"
	"github.com/leafsync/leafsync/internal/syncer/registration"
	"github.com/leafsync/leafsync/internal/syncer/shard"
	"github.com/leafsync/leafsync/internal/syncer/store/kubestore"
)

// leaderElectionID is the Lease in leafsync's namespace that replicas
// elect their leader with.
const leaderElectionID = "leafsync-leader"

func newDeregisterCommand() *cobra.Command {
	var kubeconfig, namespace string
	var clusters []string
	var all, orphan bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "deregister (--cluster NAME ... | --all) [--orphan]",
		Short: "Drain member clusters' leaves, deregister the members and wait until leafsync has removed what it made for them",
		Long: `deregister first drains the leaves of the named members (or of all): each
leaf is cordoned and its pods are evicted through the Eviction API, so the
host's PodDisruptionBudgets are respected (a refused eviction is retried).
leafsync deletes each evicted pod's member copy and finishes the host pod
only once that copy is gone; the pod's owner then recreates it on another
node. So no workload runs twice, not even a StatefulSet's pod. When the
leaves are empty and a read of each member (with its registration's
kubeconfig) finds no pod leafsync made there left — a member that was
down gets its deletes only once it answers — deregister deletes the
registration Secrets and waits until they are gone. leafsync holds each Secret with a finalizer until it
has removed what it made for the member: the leaf Node and its Lease, the
member's state and eviction-guard records. leafsync must be running for
all of this; if it is not, or a pod cannot leave within --timeout (a
member that does not answer, a PodDisruptionBudget that never allows it),
deregister says what is left and deregisters nothing.

--orphan skips the drain, for a member that leaves the fleet on purpose
with its workloads: its member pods are left running, and deregister
lists them. Their host pods go with the leaf and their owners recreate
them elsewhere, so those workloads then run twice.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if all == (len(clusters) > 0) {
				return errors.New("name the members with --cluster, or pass --all")
			}
			host, err := hostClient(kubeconfig)
			if err != nil {
				return err
			}
			return deregister(cmd.Context(), host, livePodsInMember(host), namespace, clusters, timeout, orphan, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "host cluster kubeconfig (default: $KUBECONFIG or ~/.kube/config, else in-cluster)")
	f.StringVarP(&namespace, "namespace", "n", config.Default().Namespace, "leafsync's namespace, where registration Secrets live")
	f.StringArrayVar(&clusters, "cluster", nil, "a member to deregister (repeatable)")
	f.BoolVar(&all, "all", false, "deregister every member")
	f.BoolVar(&orphan, "orphan", false, "do not drain: leave the members' pods running in the members (their workloads then run twice)")
	f.DurationVar(&timeout, "timeout", 2*time.Minute, "how long to wait for each step: the drain, then leafsync's cleanup")
	return cmd
}

func newUninstallCommand() *cobra.Command {
	var kubeconfig, namespace, deployment, ring string
	var orphan bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "uninstall --deployment NAME",
		Short: "Remove everything leafsync made in the host (the Helm chart's pre-delete hook runs it)",
		Long: `uninstall leaves nothing of leafsync's own objects in the host, in an order
that races with nothing:

 1. every member is deregistered (see deregister) while leafsync still runs:
    its leaf is drained (its pods move to other nodes once their member
    copies are gone; --orphan leaves the member pods running instead),
    then leaf Nodes and Leases, state and eviction-guard records go;
 2. leafsync's Deployment is scaled to zero and its pods are waited for, so
    that no replica recreates anything;
 3. what leafsync made for itself in its namespace is deleted: the
    leader-election Lease, the state store's ConfigMaps and, with --ring,
    the shard and member Leases of sharded replicas of that ring.

With members registered and no leafsync pod ready, it fails at once and
deletes nothing. The Helm chart runs it as a pre-delete hook; helm then
deletes the chart's own objects. With the etcd state-store backend, the
records in etcd are not touched.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			host, err := hostClient(kubeconfig)
			if err != nil {
				return err
			}
			return uninstall(cmd.Context(), host, livePodsInMember(host), namespace, deployment, ring, timeout, orphan, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "host cluster kubeconfig (default: $KUBECONFIG or ~/.kube/config, else in-cluster)")
	f.StringVarP(&namespace, "namespace", "n", config.Default().Namespace, "leafsync's namespace")
	f.StringVar(&deployment, "deployment", "", "leafsync's Deployment in that namespace; required")
	f.StringVar(&ring, "ring", "", "the ring (sharding.ring) whose shard and member Leases to delete; none when empty")
	f.BoolVar(&orphan, "orphan", false, "do not drain the leaves: leave the members' pods running in the members")
	f.DurationVar(&timeout, "timeout", 2*time.Minute, "how long to wait for each step")
	_ = cmd.MarkFlagRequired("deployment")
	return cmd
}

func hostClient(kubeconfig string) (kubernetes.Interface, error) {
	cfg, err := cliRESTConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	return newClient(cfg)
}

// deregister drains the leaves of clusters (all when empty; not with
// orphan), then deletes their registration Secrets and waits until
// leafsync has released them. memberPods reads what is left in a member.
func deregister(ctx context.Context, host kubernetes.Interface, memberPods memberPodsFunc, ns string, clusters []string, timeout time.Duration, orphan bool, out io.Writer) error {
	targets, err := registrations(ctx, host, ns, clusters)
	if err != nil {
		return err
	}
	return drainDeleteAndWait(ctx, host, memberPods, ns, targets, timeout, orphan, out)
}

// drainDeleteAndWait drains the targets' leaves (or, with orphan, says
// what it leaves running), then deletes and waits for the Secrets.
func drainDeleteAndWait(ctx context.Context, host kubernetes.Interface, memberPods memberPodsFunc, ns string, targets []corev1.Secret, timeout time.Duration, orphan bool, out io.Writer) error {
	if orphan {
		if err := orphanNotice(ctx, host, targets, memberPods, out); err != nil {
			return err
		}
	} else if err := drainLeaves(ctx, host, targets, memberPods, timeout, out); err != nil {
		return err
	}
	return deleteAndWait(ctx, host, ns, targets, timeout, out)
}

// registrations are the registration Secrets of clusters (all when
// empty); a named cluster without one is an error.
func registrations(ctx context.Context, host kubernetes.Interface, ns string, clusters []string) ([]corev1.Secret, error) {
	list, err := host.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: registration.LabelCluster})
	if err != nil {
		return nil, fmt.Errorf("listing registrations in %s: %w", ns, err)
	}
	var targets []corev1.Secret
	for _, s := range list.Items {
		if len(clusters) == 0 || slices.Contains(clusters, s.Labels[registration.LabelCluster]) {
			targets = append(targets, s)
		}
	}
	for _, c := range clusters {
		if !slices.ContainsFunc(targets, func(s corev1.Secret) bool { return s.Labels[registration.LabelCluster] == c }) {
			return nil, fmt.Errorf("no registration of member %q in namespace %s (kubectl leafsync status -n %s lists them)", c, ns, ns)
		}
	}
	return targets, nil
}

// deleteAndWait deletes the registration Secrets and waits until leafsync
// has released every one (its finalizer gone, so the Secret is gone).
func deleteAndWait(ctx context.Context, host kubernetes.Interface, ns string, targets []corev1.Secret, timeout time.Duration, out io.Writer) error {
	for _, s := range targets {
		err := host.CoreV1().Secrets(ns).Delete(ctx, s.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &s.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting Secret %s/%s: %w", ns, s.Name, err)
		}
		fmt.Fprintf(out, "member %s: Secret %s/%s deleted; waiting for leafsync's cleanup\n", s.Labels[registration.LabelCluster], ns, s.Name)
	}
	var left []string
	err := wait.PollUntilContextTimeout(ctx, cleanupPoll, timeout, true, func(ctx context.Context) (bool, error) {
		// One List per poll, whatever the number of members.
		list, err := host.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		left = left[:0]
		for _, cur := range list.Items {
			if slices.ContainsFunc(targets, func(s corev1.Secret) bool { return s.UID == cur.UID }) {
				left = append(left, fmt.Sprintf("%s (status: %s)", cur.Name, cur.Annotations[registration.AnnotationStatus]))
			}
		}
		return len(left) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("registration Secrets still there after %s: %s. leafsync removes its finalizer once it has cleaned up a member; is it running? (kubectl -n %s get pods; kubectl leafsync status -n %s): %w",
			timeout, strings.Join(left, ", "), ns, ns, err)
	}
	fmt.Fprintf(out, "%d member(s) deregistered\n", len(targets))
	return nil
}

// uninstall: members deregistered, leafsync stopped, its own objects
// deleted (see newUninstallCommand).
func uninstall(ctx context.Context, host kubernetes.Interface, memberPods memberPodsFunc, ns, deployment, ring string, timeout time.Duration, orphan bool, out io.Writer) error {
	dep, err := host.AppsV1().Deployments(ns).Get(ctx, deployment, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("leafsync's Deployment %s/%s: %w", ns, deployment, err)
	}
	// Only a running leafsync can clean up after its members: without
	// one, say so at once and delete nothing.
	regs, err := registrations(ctx, host, ns, nil)
	if err != nil {
		return err
	}
	if len(regs) > 0 && dep.Status.ReadyReplicas == 0 {
		return fmt.Errorf("leafsync is not running (Deployment %s/%s has no ready replica), so it cannot remove what it made for its %d member(s); nothing was deleted. Start it (kubectl -n %s scale deployment %s --replicas=1), or uninstall without this step (helm uninstall --no-hooks) and remove the leaves by hand (kubectl get nodes -l %s)",
			ns, deployment, len(regs), ns, deployment, registration.LabelCluster)
	}
	if err := drainDeleteAndWait(ctx, host, memberPods, ns, regs, timeout, orphan, out); err != nil {
		return err
	}
	scale := []byte(`{"spec":{"replicas":0}}`)
	if _, err := host.AppsV1().Deployments(ns).Patch(ctx, deployment, types.MergePatchType, scale, metav1.PatchOptions{}, "scale"); err != nil {
		return fmt.Errorf("scaling %s/%s to zero: %w", ns, deployment, err)
	}
	sel, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector)
	if err != nil {
		return err
	}
	err = wait.PollUntilContextTimeout(ctx, cleanupPoll, timeout, true, func(ctx context.Context) (bool, error) {
		pods, err := host.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
		return err == nil && len(pods.Items) == 0, err
	})
	if err != nil {
		return fmt.Errorf("leafsync's pods still running %s after scaling %s to zero: %w", timeout, deployment, err)
	}
	fmt.Fprintf(out, "Deployment %s/%s scaled to zero; no leafsync pod runs\n", ns, deployment)
	err = host.CoordinationV1().Leases(ns).Delete(ctx, leaderElectionID, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the leader-election Lease %s/%s: %w", ns, leaderElectionID, err)
	}
	shardLeases, err := deleteRingLeases(ctx, host, ns, ring)
	if err != nil {
		return err
	}
	cms, err := host.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: kubestore.LabelManagedBy + "=leafsync"})
	if err != nil {
		return err
	}
	for _, cm := range cms.Items {
		if err := host.CoreV1().ConfigMaps(ns).Delete(ctx, cm.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting ConfigMap %s/%s: %w", ns, cm.Name, err)
		}
	}
	fmt.Fprintf(out, "leader-election Lease, %d shard and member Lease(s) and %d state ConfigMap(s) deleted; leafsync left nothing of its own in the host\n", shardLeases, len(cms.Items))
	return nil
}

// deleteRingLeases deletes the shard and member Leases of ring (none when
// ring is empty) and returns how many there were. Only that ring's: a
// namespace may hold two installations.
func deleteRingLeases(ctx context.Context, host kubernetes.Interface, ns, ring string) (int, error) {
	if ring == "" {
		return 0, nil
	}
	leases, err := host.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{LabelSelector: shard.LabelRing + "=" + ring})
	if err != nil {
		return 0, fmt.Errorf("listing the Leases of ring %q: %w", ring, err)
	}
	for _, l := range leases.Items {
		if err := host.CoordinationV1().Leases(ns).Delete(ctx, l.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return 0, fmt.Errorf("deleting Lease %s/%s: %w", ns, l.Name, err)
		}
	}
	return len(leases.Items), nil
}
