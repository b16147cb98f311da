package podsync

import (
	"context"
	"errors"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/leafsync/leafsync/internal/syncer/podsync/translate"
	"github.com/leafsync/leafsync/internal/syncer/reflector"
)

// hostServices is the host's Services, from one informer: a pod about to
// be created in a member gets the Services of its namespace copied there
// first (reflector's Service kind), so the member's kubelet injects their
// environment variables, as a node's kubelet does from the host's.
type hostServices struct {
	factory informers.SharedInformerFactory
	lister  corelisters.ServiceLister
	synced  cache.InformerSynced
}

func newHostServices(host kubernetes.Interface) *hostServices {
	f := informers.NewSharedInformerFactoryWithOptions(host, 0, informers.WithTransform(func(obj any) (any, error) {
		if s, ok := obj.(*corev1.Service); ok {
			s.ManagedFields = nil
		}
		return obj, nil
	}))
	inf := f.Core().V1().Services()
	return &hostServices{factory: f, lister: inf.Lister(), synced: inf.Informer().HasSynced}
}

// start runs the informer until ctx ends.
func (s *hostServices) start(ctx context.Context) { s.factory.Start(ctx.Done()) }

// errServicesNotSynced: the pod waits for the host's Services to be known,
// or it would start without their environment.
var errServicesNotSynced = errors.New("the host's Services are not known yet")

// refs are the Services to copy into a member namespace for the pods of
// host namespace ns.
func (s *hostServices) refs(namespace string) ([]reflector.Ref, error) {
	if !s.synced() {
		return nil, errServicesNotSynced
	}
	svcs, err := s.lister.Services(namespace).List(labels.Everything())
	return serviceRefs(svcs), err
}

// serviceRefs are the Services of a namespace that are copied, by name: a
// Service is never needed (a pod does not wait for one, and one deleted in
// the host goes from the member). Not copied: ExternalName Services (no
// clusterIP, so no environment; the member resolves nothing for them), and
// the host API server's own Service, default/kubernetes: the member's
// kubelet injects the member's, and its namesake in the member is the
// member's own (which pods run as, and whom they talk to, is #30's).
func serviceRefs(svcs []*corev1.Service) []reflector.Ref {
	var out []reflector.Ref
	for _, s := range svcs {
		if s.Spec.Type == corev1.ServiceTypeExternalName || (s.Namespace == "default" && s.Name == "kubernetes") {
			continue
		}
		out = append(out, reflector.Ref{Kind: "Service", Name: s.Name, Optional: true})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// podRefs are the host objects to copy into member namespace ns before
// pod (of spec) is created there: what it references and its namespace's
// Services.
func (c *Controller) podRefs(namespace, pod string, spec *corev1.PodSpec) ([]reflector.Ref, error) {
	svcs, err := c.services.refs(namespace)
	return append(translate.References(pod, spec), svcs...), err
}
