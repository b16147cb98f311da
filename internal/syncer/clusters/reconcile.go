package clusters

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/leafsync/leafsync/internal/syncer/registration"
)

// The registration lifecycle of a Secret: valid and first of its cluster
// -> running (runtimes.apply); refused or duplicate -> reported, nothing
// runs; deleted or unlabelled -> stopped, cleanup hooks, finalizer removed.

// Reconcile brings one registration Secret's member in line with the Secret.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	key := req.NamespacedName
	log := c.log.WithValues("secret", key.String())
	if key.Namespace != c.opts.Namespace {
		return reconcile.Result{}, nil
	}
	var s corev1.Secret
	if err := c.client.Get(ctx, key, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, c.secretGone(ctx, key)
		}
		return reconcile.Result{}, err
	}
	if res, done, err := c.shardGate(ctx, &s); done {
		return res, err
	}
	cluster, labelled := s.Labels[registration.LabelCluster]
	if !s.DeletionTimestamp.IsZero() || !labelled {
		return c.deregister(ctx, &s)
	}

	// A Secret relabelled to another cluster deregisters the old one.
	if owned, ok := c.reg.clusterOf(key); ok && owned != cluster {
		if err := c.teardown(ctx, &s, owned, true); err != nil {
			_, _ = c.reporter.writeStatus(ctx, &s)
			return reconcile.Result{}, err
		}
	}

	winner, err := c.winner(ctx, cluster)
	if err != nil {
		return reconcile.Result{}, err
	}
	if winner != nil && winner.Name != s.Name {
		return c.duplicate(ctx, &s, winner)
	}

	spec, perr := registration.Parse(&s, c.opts.Policy)
	if perr == nil {
		var phase Phase
		if phase, perr = c.checkLeafName(ctx, &s, spec); perr != nil {
			res, err := c.refusedAs(ctx, &s, cluster, phase, perr.(*registration.Error))
			// Looked at again: the conflict may be resolved elsewhere;
			// sooner if the status write itself is deferred.
			if res.RequeueAfter <= 0 || res.RequeueAfter > leafNameRetry {
				res.RequeueAfter = leafNameRetry
			}
			return res, err
		}
	}
	if perr == nil {
		if err := c.reg.setThresholds(spec.Cluster, spec.Overrides); err != nil {
			perr = &registration.Error{Reason: registration.ReasonInvalidAnnotation, Message: fmt.Sprintf(
				"the threshold annotations give an inconsistent configuration: %v; fix them (see docs/annotations.md)", err)}
		}
	}
	if perr != nil {
		var re *registration.Error
		if !errors.As(perr, &re) {
			re = &registration.Error{Reason: registration.ReasonInvalidKubeconfig, Message: perr.Error()}
		}
		return c.refused(ctx, &s, cluster, re)
	}
	c.reporter.unknownAnnotations(&s)

	// Sharded: the finalizer is the writer's to add (once the runtime
	// took the member), and the saved state is restored at the take
	// (takeover.go).
	if c.acting(spec.Cluster) {
		if err := c.ensureFinalizer(ctx, &s); err != nil {
			return reconcile.Result{}, err
		}
	}
	if c.opts.Restore != nil && !c.reg.Sharded() {
		if _, running := c.reg.Member(spec.Cluster); !running {
			c.opts.Restore(ctx, spec.Cluster, c.reg)
		}
	}
	c.reg.accepted(spec.Cluster)
	if err := c.runtimes.apply(spec); err != nil {
		log.Error(err, "building member runtime")
		c.reg.forget(spec.Cluster) // if not registered: nothing will observe it
		re := &registration.Error{Reason: reasonClientSetupFailed, Message: fmt.Sprintf(
			"cannot build a client from the kubeconfig: %v; fix data.kubeconfig", err)}
		return c.refused(ctx, &s, cluster, re)
	}
	return c.reporter.writeStatus(ctx, &s)
}

// refused handles a Secret that cannot be used as it is.
func (c *Controller) refused(ctx context.Context, s *corev1.Secret, cluster string, re *registration.Error) (reconcile.Result, error) {
	return c.refusedAs(ctx, s, cluster, phaseRefused, re)
}

// refusedAs is refused with the phase of a Secret that runs nothing.
func (c *Controller) refusedAs(ctx context.Context, s *corev1.Secret, cluster string, phase Phase, re *registration.Error) (reconcile.Result, error) {
	c.reg.refuse(cluster, client.ObjectKeyFromObject(s), phase, re)
	return c.reporter.writeStatus(ctx, s)
}

// duplicate handles a Secret that loses to an older one.
func (c *Controller) duplicate(ctx context.Context, s *corev1.Secret, winner *corev1.Secret) (reconcile.Result, error) {
	key := client.ObjectKeyFromObject(s)
	cluster := s.Labels[registration.LabelCluster]
	if owned, ok := c.reg.clusterOf(key); ok {
		// An older Secret now claims the cluster: hand over without
		// cleanup (the cluster stays registered).
		if err := c.teardown(ctx, s, owned, false); err != nil {
			return reconcile.Result{}, err
		}
		c.enqueue(client.ObjectKeyFromObject(winner))
	}
	if !c.acting(cluster) {
		// Sharded: the member's writer says so.
		return reconcile.Result{}, nil
	}
	if err := c.removeFinalizer(ctx, s); err != nil {
		return reconcile.Result{}, err
	}
	c.reg.setStatus(Status{Cluster: cluster, Secret: key, Phase: PhaseDuplicate, Reason: reasonDuplicateCluster, Message: fmt.Sprintf(
		"Secret %s, created earlier, already registers cluster %q, so this Secret is ignored; delete one of the two Secrets, or give this one another %s label value",
		client.ObjectKeyFromObject(winner), cluster, registration.LabelCluster)})
	return c.reporter.writeStatus(ctx, s)
}

// deregister handles a Secret being deleted or no longer labelled.
func (c *Controller) deregister(ctx context.Context, s *corev1.Secret) (reconcile.Result, error) {
	key := client.ObjectKeyFromObject(s)
	cluster := s.Labels[registration.LabelCluster]
	if owned, ok := c.reg.clusterOf(key); ok {
		cluster = owned
	}
	if controllerutil.ContainsFinalizer(s, registration.Finalizer) {
		if err := c.teardown(ctx, s, cluster, true); err != nil {
			_, _ = c.reporter.writeStatus(ctx, s)
			return reconcile.Result{}, err
		}
		if s.DeletionTimestamp.IsZero() {
			// Label removed: the Secret stays; so should nothing of ours.
			if err := c.reporter.clearStatus(ctx, s); err != nil {
				return reconcile.Result{}, err
			}
		}
		if err := c.removeFinalizer(ctx, s); err != nil {
			return reconcile.Result{}, err
		}
		c.releaseMember(ctx, cluster)
		c.reporter.event(s, corev1.EventTypeNormal, reasonDeregistered, "Deregister", fmt.Sprintf(
			"cluster %q is deregistered: its connection is closed and what leafsync created for it is removed", cluster))
	} else if owned, ok := c.reg.clusterOf(key); ok {
		// No finalizer (removed by hand): still stop and clean up.
		if err := c.teardown(ctx, s, owned, true); err != nil {
			return reconcile.Result{}, err
		}
	}
	c.forget(key)
	return reconcile.Result{}, nil
}

// secretGone handles a Secret that no longer exists.
func (c *Controller) secretGone(ctx context.Context, key types.NamespacedName) error {
	if owned, ok := c.reg.clusterOf(key); ok {
		d := c.runtimes.stop(owned, true)
		c.pendingCleanup[key] = d
	}
	if d, ok := c.pendingCleanup[key]; ok {
		if err := c.runHooks(ctx, d); err != nil {
			return err
		}
		delete(c.pendingCleanup, key)
	}
	c.forget(key)
	return nil
}

func (c *Controller) forget(key types.NamespacedName) {
	c.reg.forgetStatus(key)
	c.reporter.forget(key)
}

// teardown stops a cluster's runtime and, if cleanup, forgets its
// hysteresis state and runs the deregistration hooks.
func (c *Controller) teardown(ctx context.Context, s *corev1.Secret, cluster string, cleanup bool) error {
	d := c.runtimes.stop(cluster, cleanup)
	if d.Cluster == "" {
		d = Deregistration{Cluster: cluster, Secret: client.ObjectKeyFromObject(s), LeafName: leafNameOf(s, cluster), Annotations: leafsyncAnnotations(s)}
	}
	if !cleanup || cluster == "" {
		return nil
	}
	c.reg.setStatus(Status{Cluster: cluster, Secret: d.Secret, Phase: phaseTerminating, Reason: reasonDeregistering, Message: "removing what leafsync created for the cluster"})
	if err := c.runHooks(ctx, d); err != nil {
		// The caller writes this status (annotations and a Warning Event).
		c.reg.setStatus(Status{Cluster: cluster, Secret: d.Secret, Phase: phaseTerminating, Reason: reasonCleanupFailed, Message: err.Error()})
		return err
	}
	return nil
}

func (c *Controller) runHooks(ctx context.Context, d Deregistration) error {
	var errs []error
	for _, h := range c.reg.hooksCopy() {
		if err := h.fn(ctx, d); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", h.name, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("cleanup of cluster %q failed, will retry (the Secret keeps its %s finalizer until it succeeds): %w",
			d.Cluster, registration.Finalizer, errors.Join(errs...))
	}
	return nil
}

func leafsyncAnnotations(s *corev1.Secret) map[string]string {
	out := map[string]string{}
	for k, v := range s.Annotations {
		if strings.HasPrefix(k, registration.AnnotationPrefix) {
			out[k] = v
		}
	}
	return out
}

func (c *Controller) ensureFinalizer(ctx context.Context, s *corev1.Secret) error {
	if controllerutil.ContainsFinalizer(s, registration.Finalizer) {
		return nil
	}
	orig := s.DeepCopy()
	controllerutil.AddFinalizer(s, registration.Finalizer)
	return c.client.Patch(ctx, s, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
}

func (c *Controller) removeFinalizer(ctx context.Context, s *corev1.Secret) error {
	if !controllerutil.ContainsFinalizer(s, registration.Finalizer) {
		return nil
	}
	orig := s.DeepCopy()
	controllerutil.RemoveFinalizer(s, registration.Finalizer)
	err := c.client.Patch(ctx, s, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	return client.IgnoreNotFound(err)
}
