package main

import (
	"context"
	"fmt"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	"github.com/virtual-kubelet/virtual-kubelet/node"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

const (
	contestantLabel = "leafsync.io/contestant"
	contestant      = "virtual-kubelet"
	// hostUIDAnnotation ties a member pod to one incarnation of its host pod,
	// so that a stale member pod of the same name is never taken for it.
	hostUIDAnnotation = "vk-baseline/host-uid"
)

// provider is a thin pass-through to one member cluster: the host pods VK
// hands us are created, read and deleted there under the same namespace and
// name. It implements node.NodeProvider, node.PodLifecycleHandler and
// node.PodNotifier.
type provider struct {
	member      kubernetes.Interface
	memberPods  corev1listers.PodLister // member pods with the contestant label
	memberInfor cache.SharedIndexInformer
	hostPods    corev1listers.PodLister // host pods bound to our node (VK's informer)
}

var (
	_ node.NodeProvider        = (*provider)(nil)
	_ node.PodLifecycleHandler = (*provider)(nil)
	_ node.PodNotifier         = (*provider)(nil)
)

// Ping asks the member API server whether it is ready. VK decides what a
// failure means (see the node controller): this only reports it.
func (p *provider) Ping(ctx context.Context) error {
	body, err := p.member.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("member /readyz: %w (%s)", err, body)
	}
	return nil
}

// NotifyNodeStatus is a no-op: the node's status is static, as with VK's
// NaiveNodeProvider; readiness is carried by pings and the Lease.
func (p *provider) NotifyNodeStatus(context.Context, func(*corev1.Node)) {}

func (p *provider) CreatePod(ctx context.Context, pod *corev1.Pod) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: pod.Namespace}}
	if _, err := p.member.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s in member: %w", pod.Namespace, err)
	}
	_, err := p.member.CoreV1().Pods(pod.Namespace).Create(ctx, memberPod(pod), metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// A retry after a create whose answer was lost, or an older
		// incarnation still terminating (then VK retries later).
		existing, gerr := p.member.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if gerr == nil && existing.Annotations[hostUIDAnnotation] == string(pod.UID) {
			return nil
		}
	}
	return err
}

// memberPod is the host pod as the member should run it: same name,
// namespace, labels and annotations, and a spec stripped of everything that
// refers to the host (its node, scheduler, service accounts, volumes,
// scheduling constraints). The member's scheduler places it on its nodes.
func memberPod(pod *corev1.Pod) *corev1.Pod {
	lbls := map[string]string{}
	for k, v := range pod.Labels {
		lbls[k] = v
	}
	lbls[contestantLabel] = contestant
	ann := map[string]string{}
	for k, v := range pod.Annotations {
		ann[k] = v
	}
	ann[hostUIDAnnotation] = string(pod.UID)

	spec := *pod.Spec.DeepCopy()
	spec.NodeName = ""
	spec.SchedulerName = ""
	spec.ServiceAccountName = ""
	spec.DeprecatedServiceAccount = ""
	spec.AutomountServiceAccountToken = ptr.To(false)
	spec.Volumes = nil
	spec.Tolerations = nil
	spec.Affinity = nil
	spec.NodeSelector = nil
	spec.TopologySpreadConstraints = nil
	// Set by the host's admission from host objects; the member's
	// admission recomputes them (or rejects a mismatch).
	spec.PriorityClassName = ""
	spec.Priority = nil
	spec.PreemptionPolicy = nil
	spec.RuntimeClassName = nil
	spec.Overhead = nil
	spec.EphemeralContainers = nil
	for i := range spec.InitContainers {
		spec.InitContainers[i].VolumeMounts = nil
		spec.InitContainers[i].VolumeDevices = nil
	}
	for i := range spec.Containers {
		spec.Containers[i].VolumeMounts = nil
		spec.Containers[i].VolumeDevices = nil
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, Labels: lbls, Annotations: ann},
		Spec:       spec,
	}
}

// UpdatePod is a no-op: the benchmark never updates running pods.
func (p *provider) UpdatePod(context.Context, *corev1.Pod) error { return nil }

// DeletePod deletes the member pod with the host pod's grace period.
func (p *provider) DeletePod(ctx context.Context, pod *corev1.Pod) error {
	// Leave alone a member pod that belongs to another incarnation of the
	// host pod (pod is either a host pod or, from GetPod(s), a member pod).
	if m, err := p.memberPods.Pods(pod.Namespace).Get(pod.Name); err == nil &&
		m.UID != pod.UID && m.Annotations[hostUIDAnnotation] != string(pod.UID) {
		return errdefs.NotFoundf("member pod %s/%s belongs to another host pod", pod.Namespace, pod.Name)
	}
	opts := metav1.DeleteOptions{GracePeriodSeconds: pod.DeletionGracePeriodSeconds}
	err := p.member.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, opts)
	if apierrors.IsNotFound(err) {
		return errdefs.AsNotFound(err)
	}
	return err
}

func (p *provider) GetPod(_ context.Context, namespace, name string) (*corev1.Pod, error) {
	m, err := p.memberPods.Pods(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil, errdefs.AsNotFound(err)
	}
	if err != nil {
		return nil, err
	}
	return m.DeepCopy(), nil
}

func (p *provider) GetPodStatus(ctx context.Context, namespace, name string) (*corev1.PodStatus, error) {
	m, err := p.GetPod(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return &m.Status, nil
}

func (p *provider) GetPods(context.Context) ([]*corev1.Pod, error) {
	list, err := p.memberPods.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	out := make([]*corev1.Pod, 0, len(list))
	for _, m := range list {
		out = append(out, m.DeepCopy())
	}
	return out, nil
}

// NotifyPods passes every change of a member pod's status to VK at once,
// from the member pod informer, as real providers do.
func (p *provider) NotifyPods(ctx context.Context, notify func(*corev1.Pod)) {
	_, err := p.memberInfor.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { p.notifyStatus(ctx, obj, false, notify) },
		UpdateFunc: func(_, obj any) { p.notifyStatus(ctx, obj, false, notify) },
		DeleteFunc: func(obj any) { p.notifyStatus(ctx, obj, true, notify) },
	})
	if err != nil {
		log.G(ctx).WithError(err).Error("cannot watch member pods")
	}
}

// notifyStatus hands VK the host pod with the member pod's status. VK writes
// that object with UpdateStatus, so it must be the host pod (its UID), not
// the member's.
func (p *provider) notifyStatus(ctx context.Context, obj any, deleted bool, notify func(*corev1.Pod)) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	m, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	hp, err := p.hostPods.Pods(m.Namespace).Get(m.Name)
	if err != nil || string(hp.UID) != m.Annotations[hostUIDAnnotation] {
		return // not (or no longer) the pod of a host pod on this node
	}
	// Only the status passes: the API server rejects a status update that
	// changes deletion metadata, and a member pod deleted on its own ends
	// as Failed below, which its controller replaces.
	out := hp.DeepCopy()
	out.Status = *m.Status.DeepCopy()
	if deleted {
		if hp.Status.Phase == corev1.PodSucceeded || hp.Status.Phase == corev1.PodFailed {
			return
		}
		terminate(&out.Status, hp.DeletionTimestamp != nil)
		log.G(ctx).WithField("pod", m.Namespace+"/"+m.Name).WithField("phase", out.Status.Phase).Info("member pod gone")
	}
	notify(out)
}

// terminate gives a pod whose member pod is gone the terminal status VK's
// own sync-provider wrapper gives (node/sync.go): Succeeded when we deleted
// it, Failed/NotFound when it vanished on its own.
func terminate(st *corev1.PodStatus, deleting bool) {
	now := metav1.NewTime(time.Now())
	st.Phase, st.Reason, st.Message = corev1.PodSucceeded, "Terminated", ""
	exit, reason, msg := int32(0), "Terminated", "Container was terminated. The exit code may not reflect the real exit code"
	if !deleting {
		st.Phase, st.Reason = corev1.PodFailed, "NotFound"
		st.Message = "The pod status was not found and may have been deleted from the provider"
		exit, reason, msg = -137, "NotFound", "Container was not found and was likely deleted"
	}
	for i, cs := range st.ContainerStatuses {
		t := &corev1.ContainerStateTerminated{ExitCode: exit, Reason: reason, Message: msg, FinishedAt: now, ContainerID: cs.ContainerID}
		if cs.State.Running != nil {
			t.StartedAt = cs.State.Running.StartedAt
		}
		st.ContainerStatuses[i].State = corev1.ContainerState{Terminated: t}
		st.ContainerStatuses[i].Ready = false
	}
	for i, c := range st.Conditions {
		if c.Type == corev1.PodReady || c.Type == corev1.ContainersReady {
			st.Conditions[i].Status, st.Conditions[i].LastTransitionTime = corev1.ConditionFalse, now
		}
	}
}
