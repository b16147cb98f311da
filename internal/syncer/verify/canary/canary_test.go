package canary

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestCanaryPod(t *testing.T) {
	p := canaryPod(Options{Image: "reg.example/leafsync:v1", Namespace: "leafsync-system", Timeout: time.Minute}.withDefaults())
	if p.Namespace != "leafsync-system" || p.Labels[LabelCanary] != "true" {
		t.Errorf("namespace %q labels %v", p.Namespace, p.Labels)
	}
	s := p.Spec
	if s.RestartPolicy != corev1.RestartPolicyNever || s.ActiveDeadlineSeconds == nil || *s.ActiveDeadlineSeconds != 61 {
		t.Errorf("restartPolicy %s activeDeadlineSeconds %v, want Never and 61", s.RestartPolicy, s.ActiveDeadlineSeconds)
	}
	if len(s.Tolerations) > 0 || s.NodeName != "" || len(s.NodeSelector) > 0 {
		t.Errorf("the canary must go where the member's scheduler puts pods: tolerations %v nodeName %q selector %v", s.Tolerations, s.NodeName, s.NodeSelector)
	}
	if s.AutomountServiceAccountToken == nil || !*s.AutomountServiceAccountToken || s.ServiceAccountName != "" {
		t.Errorf("the API check needs the namespace's default ServiceAccount's token: automount %v, serviceAccountName %q", s.AutomountServiceAccountToken, s.ServiceAccountName)
	}
	c := s.Containers[0]
	if len(s.Containers) != 1 || c.Image != "reg.example/leafsync:v1" || strings.Join(c.Args, " ") != "verify" || len(c.Command) > 0 {
		t.Errorf("container %s image %s command %v args %v, want the image's leafsync entrypoint with args [verify]", c.Name, c.Image, c.Command, c.Args)
	}
	if c.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
		t.Errorf("terminationMessagePolicy %s", c.TerminationMessagePolicy)
	}
	if c.Resources.Requests.Cpu().MilliValue() > 10 || c.Resources.Limits.Memory().Value() > 128<<20 || c.Resources.Limits.Cpu().IsZero() {
		t.Errorf("resources %v: want small requests and limits", c.Resources)
	}
	e, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := policy.AggregateCheckResults(e.EvaluatePod(psapi.LevelVersion{Level: psapi.LevelRestricted, Version: psapi.LatestVersion()}, &p.ObjectMeta, &p.Spec)); !r.Allowed {
		t.Errorf("the canary must pass the restricted Pod Security standard: %s", r.ForbiddenDetail())
	}
}

// member is a fake member whose created pods get status from withStatus
// (nil: none) and a generated name, as an API server gives them.
func member(withStatus func(*corev1.PodStatus)) *fake.Clientset {
	c := fake.NewClientset()
	c.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		if p.Name == "" {
			p.Name = p.GenerateName + "x1"
		}
		if withStatus != nil {
			withStatus(&p.Status)
		}
		return false, nil, nil
	})
	return c
}

func terminated(phase corev1.PodPhase, exit int32, message string) func(*corev1.PodStatus) {
	return func(s *corev1.PodStatus) {
		s.Phase = phase
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: container, State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: exit, Message: message},
		}}}
	}
}

func reportJSON(t *testing.T, checks ...Check) string {
	b, err := json.Marshal(NewReport(checks...))
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}

func noPodsLeft(t *testing.T, c *fake.Clientset) {
	t.Helper()
	pods, err := c.CoreV1().Pods(Namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) > 0 {
		t.Errorf("canary pod %s left in the member", pods.Items[0].Name)
	}
}

func TestRunReadsTheReport(t *testing.T) {
	api := Check{Name: CheckAPI, Outcome: OutcomePassed, Detail: "GET /version with the pod's token: v1.36.3"}
	dnsSkipped := Check{Name: CheckDNS, Outcome: OutcomeSkipped, Detail: "skipped: no cluster DNS"}
	dnsFailed := Check{Name: CheckDNS, Outcome: OutcomeFailed, Detail: "lookup kubernetes.default: i/o timeout"}
	for _, tc := range []struct {
		name       string
		status     func(*corev1.PodStatus)
		passed     bool
		reason     string
		message    []string
		failed     []string
		checkCount int
	}{
		{name: "passed", status: terminated(corev1.PodSucceeded, 0, reportJSON(t, api, dnsSkipped)), passed: true, reason: ReasonPassed, checkCount: 2},
		{name: "a check failed", status: terminated(corev1.PodFailed, 1, reportJSON(t, api, dnsFailed)), reason: ReasonCheckFailed,
			message: []string{"check dns failed", "i/o timeout", "CoreDNS"}, failed: []string{CheckDNS}, checkCount: 2},
		{name: "not leafsync verify", status: terminated(corev1.PodFailed, 1, `Error: unknown command "verify" for "leafsync"`), reason: ReasonNoReport,
			message: []string{"unknown command", "img:1", "leafsync.io/verify-canary-image"}, failed: []string{ReasonNoReport}},
		{name: "image pull", status: func(s *corev1.PodStatus) {
			s.Phase = corev1.PodPending
			s.ContainerStatuses = []corev1.ContainerStatus{{Name: container, State: corev1.ContainerState{
				Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image"},
			}}}
		}, reason: ReasonImagePull, message: []string{"cannot pull img:1", "leafsync.io/verify-canary-image", "leafsync.io/verify-canary=false"}, failed: []string{ReasonImagePull}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := member(tc.status)
			r, err := Run(context.Background(), c, Options{Image: "img:1"})
			if err != nil {
				t.Fatal(err)
			}
			if r.Passed != tc.passed || r.Reason != tc.reason || len(r.Checks) != tc.checkCount || r.Pod == "" {
				t.Errorf("got %+v, want passed %v reason %s and %d checks", r, tc.passed, tc.reason, tc.checkCount)
			}
			for _, m := range tc.message {
				if !strings.Contains(r.Message, m) {
					t.Errorf("message %q does not say %q", r.Message, m)
				}
			}
			if tc.passed && r.Message != "" {
				t.Errorf("message %q on a pass", r.Message)
			}
			if got := strings.Join(FailedChecks(r), ","); got != strings.Join(tc.failed, ",") {
				t.Errorf("FailedChecks %q, want %q", got, tc.failed)
			}
			noPodsLeft(t, c)
		})
	}
}

// TestRunFollowsThePod: the verdict comes from the pod's later status, not
// only the one it was created with.
func TestRunFollowsThePod(t *testing.T) {
	c := member(func(s *corev1.PodStatus) { s.Phase = corev1.PodRunning })
	go func() {
		ctx := context.Background()
		_ = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			p, err := c.CoreV1().Pods(Namespace).Get(ctx, "leafsync-canary-x1", metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			terminated(corev1.PodSucceeded, 0, reportJSON(t, Check{Name: CheckAPI, Outcome: OutcomePassed}))(&p.Status)
			_, err = c.CoreV1().Pods(Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
			return err == nil, nil
		})
	}()
	r, err := Run(context.Background(), c, Options{Timeout: time.Minute})
	if err != nil || !r.Passed {
		t.Fatalf("got %+v, %v; want a pass", r, err)
	}
	noPodsLeft(t, c)
}

// TestRunTimeout: a pod that never finishes is a verdict at the timeout,
// on the injected clock, and is deleted.
func TestRunTimeout(t *testing.T) {
	for _, tc := range []struct {
		name, reason, says string
		status             func(*corev1.PodStatus)
	}{
		{"unschedulable", ReasonNotScheduled, "0/3 nodes are available", func(s *corev1.PodStatus) {
			s.Phase = corev1.PodPending
			s.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes are available"}}
		}},
		{"running", ReasonTimeout, "phase Running, running", func(s *corev1.PodStatus) {
			s.Phase = corev1.PodRunning
			s.ContainerStatuses = []corev1.ContainerStatus{{Name: container, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := member(tc.status)
			clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			go stepWhenWaiting(clk, 2*time.Minute)
			r, err := Run(context.Background(), c, Options{Clock: clk, Timeout: 2 * time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if r.Passed || r.Reason != tc.reason || !strings.Contains(r.Message, tc.says) || r.Duration != 2*time.Minute {
				t.Errorf("got %+v, want reason %s saying %q after 2m", r, tc.reason, tc.says)
			}
			noPodsLeft(t, c)
		})
	}
}

func stepWhenWaiting(clk *clocktesting.FakeClock, d time.Duration) {
	_ = wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return clk.HasWaiters(), nil
	})
	clk.Step(d)
}

// TestRunCancelled: no verdict, and the pod is still deleted.
func TestRunCancelled(t *testing.T) {
	c := member(func(s *corev1.PodStatus) { s.Phase = corev1.PodRunning })
	clk := clocktesting.NewFakeClock(time.Now())
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_ = wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return clk.HasWaiters(), nil
		})
		cancel()
	}()
	if _, err := Run(ctx, c, Options{Clock: clk}); !errors.Is(err, context.Canceled) {
		t.Errorf("err %v, want context.Canceled", err)
	}
	noPodsLeft(t, c)
}

// TestRunRefused: a member's refusal is a verdict; not reaching it is not.
func TestRunRefused(t *testing.T) {
	refuse := func(err error) *fake.Clientset {
		c := fake.NewClientset()
		c.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, err })
		return c
	}
	r, err := Run(context.Background(), refuse(apierrors.NewForbidden(corev1.Resource("pods"), "", errors.New("exceeded quota"))), Options{})
	if err != nil || r.Reason != ReasonRefused || !strings.Contains(r.Message, "exceeded quota") {
		t.Errorf("forbidden: got %+v, %v; want a PodRefused verdict naming the cause", r, err)
	}
	if r, err := Run(context.Background(), refuse(errors.New("dial tcp: connection refused")), Options{}); err == nil {
		t.Errorf("unreachable member: got verdict %+v, want an error", r)
	}
}

// TestRunRemovesFinishedCanaries: canaries left by an interrupted run are
// cleaned up by the next one; a running one (another run's) is not touched.
func TestRunRemovesFinishedCanaries(t *testing.T) {
	c := member(terminated(corev1.PodSucceeded, 0, reportJSON(t, Check{Name: CheckAPI, Outcome: OutcomePassed})))
	ctx := context.Background()
	for name, phase := range map[string]corev1.PodPhase{"old-failed": corev1.PodFailed, "other-running": corev1.PodRunning} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace, Labels: map[string]string{LabelCanary: "true"}}, Status: corev1.PodStatus{Phase: phase}}
		if err := c.Tracker().Create(corev1.SchemeGroupVersion.WithResource("pods"), p, Namespace); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Run(ctx, c, Options{}); err != nil {
		t.Fatal(err)
	}
	pods, _ := c.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{})
	if len(pods.Items) != 1 || pods.Items[0].Name != "other-running" {
		t.Errorf("left %v, want only other-running", pods.Items)
	}
}
