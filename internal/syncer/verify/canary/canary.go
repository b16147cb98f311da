package canary

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

const (
	// Namespace is leafsync's own member namespace, which leafsync creates
	// in every member for its claim (internal/syncer/clusters) and where
	// `leafsync register --create-service-account` puts its ServiceAccount.
	Namespace = "leafsync-system"
	// DefaultTimeout bounds a run from the pod's creation to the verdict:
	// room for an image pull and a cold start on a busy node.
	DefaultTimeout = 2 * time.Minute
	// ImageEnv names the environment variable with leafsync's own image,
	// which the chart sets from image.repository and image.tag.
	ImageEnv = "LEAFSYNC_IMAGE"
	// fallbackImage is the chart's default image (its appVersion as tag),
	// for a leafsync not deployed by the chart.
	fallbackImage = "ghcr.io/leafsync/leafsync:0.1.0"
	// LabelCanary marks canary pods.
	LabelCanary = "leafsync.io/canary"
	// container is the canary's one container.
	container = "verify"
)

// Result reasons.
const (
	ReasonPassed       = "Passed"
	ReasonCheckFailed  = "CheckFailed"
	ReasonRefused      = "PodRefused"
	ReasonImagePull    = "ImagePullFailed"
	ReasonNotScheduled = "NotScheduled"
	ReasonTimeout      = "Timeout"
	ReasonNoReport     = "NoReport"
)

// Options shape one canary run; zero values take the defaults.
type Options struct {
	// Image runs `leafsync verify` (default DefaultImage()).
	Image string
	// Namespace in the member (default Namespace).
	Namespace string
	// Timeout from creation to verdict (default DefaultTimeout).
	Timeout time.Duration
	// Clock measures the timeout and the duration (default the real clock).
	Clock clock.WithTicker
}

// Result is the verdict of one run.
type Result struct {
	Passed bool
	// Reason is one of the Reason* values.
	Reason string
	// Message says what failed and what to do ("" when passed).
	Message string
	// Checks are what the pod reported (none if it never reported).
	Checks []Check
	// Pod is the canary pod's name (deleted by the time Run returns).
	Pod string
	// Duration from the pod's creation to the verdict.
	Duration time.Duration
}

// FailedChecks names what failed: the failed checks of the pod's report,
// or the Reason when the pod never reported.
func FailedChecks(r Result) []string {
	var failed []string
	for _, c := range r.Checks {
		if c.Outcome == OutcomeFailed {
			failed = append(failed, c.Name)
		}
	}
	if len(failed) == 0 && !r.Passed {
		failed = append(failed, r.Reason)
	}
	return failed
}

// DefaultImage is leafsync's own image: $LEAFSYNC_IMAGE as the chart sets
// it, else the chart's default.
func DefaultImage() string {
	if img := os.Getenv(ImageEnv); img != "" {
		return img
	}
	return fallbackImage
}

func (o Options) withDefaults() Options {
	if o.Image == "" {
		o.Image = DefaultImage()
	}
	if o.Namespace == "" {
		o.Namespace = Namespace
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o
}

// Run creates one canary pod in the member, waits for its report (at most
// opts.Timeout), deletes the pod, also on timeout and cancellation, and
// returns the verdict. Whatever the member did is a verdict (Passed false,
// a Reason and a Message); err is only for no verdict: ctx ended, or the
// member could not be talked to (retry later, it says nothing of the member).
func Run(ctx context.Context, member kubernetes.Interface, opts Options) (Result, error) {
	opts = opts.withDefaults()
	pods := member.CoreV1().Pods(opts.Namespace)
	removeFinished(ctx, pods)
	start := opts.Clock.Now()
	pod, err := pods.Create(ctx, canaryPod(opts), metav1.CreateOptions{FieldManager: "leafsync"})
	if err != nil {
		if !memberAnswered(err) {
			return Result{}, fmt.Errorf("creating the canary pod: %w", err)
		}
		return Result{Reason: ReasonRefused, Message: fmt.Sprintf(
			"the member refused the canary pod in namespace %s: %v; leafsync's pods need to be admitted there (rights, admission policies, quotas)", opts.Namespace, err)}, nil
	}
	defer deletePod(ctx, pods, pod)

	r, err := await(ctx, member, pod, opts)
	r.Pod, r.Duration = pod.Name, opts.Clock.Since(start)
	return r, err
}

// canaryPod is tiny, runs once, and passes the restricted Pod Security
// standard; the member namespace's default ServiceAccount's token lets it
// ask the API server as a pod would (/version needs no rights).
func canaryPod(o Options) *corev1.Pod {
	res := func(cpu, mem string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "leafsync-canary-",
			Namespace:    o.Namespace,
			Labels:       map[string]string{LabelCanary: "true", "app.kubernetes.io/managed-by": "leafsync"},
		},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			// The kubelet ends it even if leafsync is gone before deleting it.
			ActiveDeadlineSeconds:         ptr.To(int64(o.Timeout.Seconds()) + 1),
			AutomountServiceAccountToken:  ptr.To(true),
			EnableServiceLinks:            ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To(int64(1)),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:            container,
				Image:           o.Image,
				Args:            []string{"verify"}, // the image's entrypoint is leafsync
				ImagePullPolicy: corev1.PullIfNotPresent,
				Resources:       corev1.ResourceRequirements{Requests: res("10m", "32Mi"), Limits: res("250m", "128Mi")},
				// A crash (or an image without `leafsync verify`) still
				// says why, from the log's tail.
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					ReadOnlyRootFilesystem:   ptr.To(true),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
}

// memberAnswered: the error is the member's answer (a refusal), not a
// failure to reach it or an overloaded server.
func memberAnswered(err error) bool {
	var status apierrors.APIStatus
	return errors.As(err, &status) && !apierrors.IsTooManyRequests(err) && !apierrors.IsServerTimeout(err) &&
		!apierrors.IsTimeout(err) && !apierrors.IsServiceUnavailable(err)
}

// await watches the pod until it has a verdict or opts.Timeout passes.
func await(ctx context.Context, member kubernetes.Interface, pod *corev1.Pod, opts Options) (Result, error) {
	waitCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var timedOut atomic.Bool
	timer := opts.Clock.NewTimer(opts.Timeout)
	defer timer.Stop()
	go func() {
		select {
		case <-timer.C():
			timedOut.Store(true)
			cancel()
		case <-waitCtx.Done():
		}
	}()

	last := pod
	var verdict *Result
	byName := fields.OneTermEqualSelector("metadata.name", pod.Name).String()
	// The fake clientset of unit tests has no watch-list semantics; the
	// wrapper tells the informer so.
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = byName
			return member.CoreV1().Pods(pod.Namespace).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = byName
			return member.CoreV1().Pods(pod.Namespace).Watch(ctx, o)
		},
	}, member)
	_, err := watchtools.UntilWithSync(waitCtx, lw, &corev1.Pod{}, nil, func(ev watch.Event) (bool, error) {
		p, ok := ev.Object.(*corev1.Pod)
		if !ok || p.UID != pod.UID {
			return false, nil
		}
		if ev.Type == watch.Deleted {
			verdict = &Result{Reason: ReasonNoReport, Message: "the canary pod was deleted before it finished (by someone else than leafsync)"}
			return true, nil
		}
		last = p
		verdict = judge(p, opts)
		return verdict != nil, nil
	})
	switch {
	case verdict != nil:
		return *verdict, nil
	case ctx.Err() != nil:
		return Result{}, ctx.Err()
	case timedOut.Load():
		return timeout(last, opts), nil
	default:
		return Result{}, fmt.Errorf("watching the canary pod: %w", err)
	}
}

// judge is the verdict on a pod that needs no more waiting, nil otherwise.
func judge(p *corev1.Pod, o Options) *Result {
	cs := containerStatus(p)
	if w := cs.State.Waiting; w != nil && pullFailed(w.Reason) {
		return &Result{Reason: ReasonImagePull, Message: pullMessage(o.Image, w.Reason+": "+w.Message)}
	}
	if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
		return nil
	}
	t := cs.State.Terminated
	if t == nil {
		// Failed before the container ran (e.g. activeDeadlineSeconds).
		return &Result{Reason: ReasonNoReport, Message: fmt.Sprintf("the canary pod ended %s (%s) before its container ran: %s", p.Status.Phase, p.Status.Reason, p.Status.Message)}
	}
	var rep Report
	if err := json.Unmarshal([]byte(strings.TrimSpace(t.Message)), &rep); err != nil || len(rep.Checks) == 0 {
		return &Result{Reason: ReasonNoReport, Message: fmt.Sprintf(
			"the canary pod ended %s (exit code %d) without a report (%q): image %s does not run `leafsync verify` of this leafsync; set leafsync.io/verify-canary-image to leafsync's own image",
			p.Status.Phase, t.ExitCode, truncate(t.Message, 200), o.Image)}
	}
	if rep.Passed {
		return &Result{Passed: true, Reason: ReasonPassed, Checks: rep.Checks}
	}
	return &Result{Reason: ReasonCheckFailed, Checks: rep.Checks, Message: failedMessage(rep.Checks, o.Namespace)}
}

// timeout is the verdict when the pod had none in time, from what it
// last showed.
func timeout(p *corev1.Pod, o Options) Result {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return Result{Reason: ReasonNotScheduled, Message: fmt.Sprintf(
				"no member node took the canary pod within %s (%s); the member needs a Ready, schedulable node with room for a small pod", o.Timeout, c.Message)}
		}
	}
	state := "no container status"
	if cs := containerStatus(p); cs.State.Waiting != nil {
		state = "waiting: " + cs.State.Waiting.Reason
	} else if cs.State.Running != nil {
		state = "running"
	}
	return Result{Reason: ReasonTimeout, Message: fmt.Sprintf(
		"the canary pod did not finish within %s (phase %s, %s); see its node's kubelet and the pod's events in namespace %s", o.Timeout, p.Status.Phase, state, o.Namespace)}
}

func containerStatus(p *corev1.Pod) corev1.ContainerStatus {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == container {
			return cs
		}
	}
	return corev1.ContainerStatus{}
}

// pullFailed: the kubelet gave up pulling for now (it retries with a
// back-off), or never will.
func pullFailed(reason string) bool {
	switch reason {
	case "ImagePullBackOff", "ErrImagePull", "InvalidImageName", "ErrImageNeverPull":
		return true
	}
	return false
}

func pullMessage(image, why string) string {
	return fmt.Sprintf("the member cannot pull %s (%s): set leafsync.io/verify-canary-image to an image the member can pull (leafsync's own image, e.g. mirrored to the member's registry), or turn the canary off with leafsync.io/verify-canary=false", image, why)
}

// advice says what to look at when a check fails.
var advice = map[string]string{
	CheckAPI: "pods in the member cannot reach its API server: check the kubernetes Service, kube-proxy or the CNI, and network policies of namespace %s",
	CheckDNS: "cluster DNS in the member does not resolve kubernetes.default: check CoreDNS (kube-dns) and network policies of namespace %s",
}

func failedMessage(checks []Check, ns string) string {
	var msgs []string
	for _, c := range checks {
		if c.Outcome == OutcomeFailed {
			msgs = append(msgs, fmt.Sprintf("check %s failed (%s): %s", c.Name, c.Detail, fmt.Sprintf(advice[c.Name], ns)))
		}
	}
	return strings.Join(msgs, "; ")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// deletePod deletes the canary, also when ctx has ended. Not by force: a
// finished pod goes at once anyway, a running one within its 1s grace
// period, and its node's kubelet cleans up before the object is gone.
func deletePod(ctx context.Context, pods corev1client.PodInterface, pod *corev1.Pod) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_ = pods.Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}})
}

// removeFinished deletes canaries that ended while nobody waited for them
// (leafsync stopped during a run; activeDeadlineSeconds ended the pod).
func removeFinished(ctx context.Context, pods corev1client.PodInterface) {
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: LabelCanary})
	if err != nil {
		return // the run itself will say what is wrong
	}
	for i := range list.Items {
		if p := &list.Items[i]; p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			deletePod(ctx, pods, p)
		}
	}
}
