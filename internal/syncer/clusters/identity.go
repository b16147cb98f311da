package clusters

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/syncer/member"
	"github.com/leafsync/leafsync/internal/syncer/registration"
)

// The connect gate. A member runtime's informers start only after its
// member passed the identity check, so nothing reads or writes a cluster
// that is not the registered member:
//
//	probe /readyz ── fails ──> an observation like any probe's; try again
//	   │ ok
//	member identity (UID of kube-system) ≠ recorded ──> refused
//	   │ same, or none recorded yet
//	claim in the member held by another host ───────> refused
//	   │ ours (created if missing)
//	record the identity on the Secret (first contact) ──> runtime starts
//
// A refused reconnect (kubeconfig changed) is never promoted: the previous
// runtime keeps serving the recorded member. A refused first connect
// (leafsync started with a kubeconfig that reaches another cluster) keeps
// the runtime stopped and feeds the engine config failures: like a
// rejected credential, leafsync's own problem, so the leaf is cordoned and
// never NotReady, and no pod on it is touched. Either way the Secret gets
// a Warning Event and status reason; the check is tried again every probe
// interval, so putting the kubeconfig back, or clearing the recorded
// identity to confirm a rebuilt member, takes effect at the next try.

// verdict is the outcome of one identity check.
type verdict struct {
	// ok: the member is the recorded one and this host's.
	ok bool
	// refusal says why the member is refused.
	refusal *registration.Error
	// failure is set when the member could not be checked: the probe's
	// outcome, or the failure of the identity read.
	failure *hysteresis.Observation
}

// verify checks rt's member once (see the diagram above).
func (c *Controller) verify(ctx context.Context, spec *registration.Spec, rt *member.Runtime) verdict {
	if obs := rt.Prober().Probe(ctx); !obs.OK {
		return verdict{failure: &obs}
	}
	id, err := member.Identity(ctx, rt.Client())
	if err != nil {
		class := member.Classify(err)
		return verdict{failure: &hysteresis.Observation{Time: c.opts.Clock.Now(), Class: class, Detail: err.Error() +
			"; leafsync needs get on namespaces/kube-system in the member (`leafsync register --create-service-account` grants it)"}}
	}
	host, err := c.hostIdentity(ctx)
	if err != nil {
		return verdict{failure: &hysteresis.Observation{Time: c.opts.Clock.Now(), Class: hysteresis.ClassConfig, Detail: fmt.Sprintf(
			"leafsync cannot read its host's identity: %v; grant leafsync get on namespaces/kube-system in the host (the chart does)", err)}}
	}
	var s corev1.Secret
	if err := c.client.Get(ctx, spec.Secret, &s); err != nil {
		return verdict{} // tried again
	}
	recorded := s.Annotations[registration.AnnotationMemberIdentity]
	if recorded != "" && recorded != id {
		return verdict{refusal: &registration.Error{Reason: reasonMemberIdentityChanged, Message: fmt.Sprintf(
			"the kubeconfig reaches cluster %s (UID of its kube-system namespace), but this registration's member is %s (annotation %s, recorded at first contact), "+
				"so leafsync touches nothing in either cluster. If the kubeconfig is wrong, put the right one back; if the member really is another cluster now "+
				"(rebuilt), confirm it by removing the annotation: kubectl -n %s annotate secret %s %s-",
			id, recorded, registration.AnnotationMemberIdentity, s.Namespace, s.Name, registration.AnnotationMemberIdentity)}}
	}
	other, err := claim(ctx, rt.Client(), spec.Cluster, host)
	if err != nil {
		return verdict{failure: &hysteresis.Observation{Time: c.opts.Clock.Now(), Class: member.Classify(err), Detail: err.Error() +
			"; leafsync needs create on namespaces and configmaps in the member for its claim"}}
	}
	if other != "" {
		return verdict{refusal: &registration.Error{Reason: reasonMemberClaimed, Message: fmt.Sprintf(
			"member cluster %s is already registered as cluster %q by another host (host identity %s; claim ConfigMap %s/%s in the member), "+
				"so this host touches nothing there: two hosts syncing pods of one member under one name would take each other's pods. "+
				"Register the member under another cluster name, or, if that host no longer uses the member, delete the claim in the member",
			id, spec.Cluster, other, claimNamespace, claimName(spec.Cluster))}}
	}
	if recorded == "" {
		if err := c.recordIdentity(ctx, &s, id); err != nil {
			c.log.Info("recording the member identity failed; tried again", "cluster", spec.Cluster, "error", err.Error())
			return verdict{}
		}
		c.log.Info("member identity recorded", "cluster", spec.Cluster, "identity", id)
	}
	return verdict{ok: true}
}

// identityFieldManager owns the member identity annotation.
const identityFieldManager = "leafsync-member-identity"

// recordIdentity writes id on registration Secret s by server-side apply
// of that one annotation. No resourceVersion is sent: the registration's
// other writes to the Secret (finalizer, status, verification) never make
// it conflict, so a cache that lags them does not cost a probe interval.
// Not forced: an identity written meanwhile by another writer conflicts,
// and the next check reads it. The UID keeps the write from creating a
// Secret deleted meanwhile.
func (c *Controller) recordIdentity(ctx context.Context, s *corev1.Secret, id string) error {
	ac := corev1ac.Secret(s.Name, s.Namespace).WithUID(s.UID).
		WithAnnotations(map[string]string{registration.AnnotationMemberIdentity: id})
	return c.client.Apply(ctx, ac, client.FieldOwner(identityFieldManager))
}

// hostIdentity returns the host's identity, read once.
func (c *Controller) hostIdentity(ctx context.Context) (string, error) {
	if id := c.reg.HostIdentity(); id != "" {
		return id, nil
	}
	reader := c.opts.Reader
	if reader == nil {
		reader = c.client
	}
	var ns corev1.Namespace
	if err := reader.Get(ctx, types.NamespacedName{Name: member.IdentityNamespace}, &ns); err != nil {
		return "", err
	}
	if ns.UID == "" {
		return "", fmt.Errorf("the host's %s namespace has no UID", member.IdentityNamespace)
	}
	c.reg.setHostIdentity(string(ns.UID))
	return string(ns.UID), nil
}

// admit runs rt's identity check until it passes (true) or ctx ends.
func (r *runtimes) admit(ctx context.Context, spec *registration.Spec, rt *member.Runtime) bool {
	interval := r.probeInterval(spec.Cluster)
	observe := func(obs hysteresis.Observation) {
		if next := r.observe(spec.Cluster, rt, obs); next > 0 {
			interval = next
		}
	}
	for {
		v := r.verify(ctx, spec, rt)
		if ctx.Err() != nil {
			return false
		}
		switch {
		case v.ok:
			if r.reg.identityConfirmed(spec.Cluster, rt) {
				r.enqueue(spec.Secret)
			}
			return true
		case v.refusal != nil:
			if r.reg.identityRefused(spec.Cluster, rt, v.refusal) {
				r.log.Info("member refused", "cluster", spec.Cluster, "reason", v.refusal.Reason, "message", v.refusal.Message)
				r.enqueue(spec.Secret)
			}
			// Observed only while rt is the active runtime: leafsync's own
			// problem, so the leaf is cordoned, never NotReady.
			observe(hysteresis.Observation{Time: r.clock.Now(), Class: hysteresis.ClassConfig, Detail: v.refusal.Message})
		case v.failure != nil:
			observe(*v.failure)
		}
		t := r.clock.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C():
		}
	}
}
