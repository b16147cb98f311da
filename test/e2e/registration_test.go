//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/leafsync/leafsync/internal/leafnode"
	"github.com/leafsync/leafsync/test/harness"
)

// Registration annotations and reasons (docs/annotations.md). Spelled out
// here rather than imported: the test checks the documented contract.
const (
	annStatus        = "leafsync.io/status"
	annStatusReason  = "leafsync.io/status-reason"
	annStatusMessage = "leafsync.io/status-message"
	annStatusTime    = "leafsync.io/status-time"
	labelCluster     = "leafsync.io/cluster"
	finalizerCleanup = "leafsync.io/cleanup"
)

// TestRegistration drives registration Secrets through their life against a
// real host and two real members: connect, credential and endpoint rotation
// without a leaf transition, every kind of bad Secret (each an Event with
// its documented reason, none touching the good members), deregistration,
// and the circuit breaker of a cut member.
func TestRegistration(t *testing.T) {
	f := newFleet(t, harness.HostOptions{},
		harness.MemberOptions{Name: "member-a", Nodes: 1, Pods: 1},
		harness.MemberOptions{Name: "member-b", Nodes: 1, Pods: 1})
	ctx := context.Background()
	hc := f.host.Client()
	a, b := f.members["member-a"], f.members["member-b"]
	// A second way to member-a, for the endpoint rotation. Made here, not
	// in the sub-test, so that it outlives the sub-test.
	aProxy2 := harness.NewFaultProxy(t, "member-a-rotated", a.Addr())
	ls := f.startLeafsync(t, "leafsync")
	const leafA, leafB = "leaf-member-a", "leaf-member-b"

	t.Run("two members connect", func(t *testing.T) {
		start := time.Now()
		f.register(t, "member-a", nil)
		f.register(t, "member-b", nil)
		for _, name := range []string{"member-a", "member-b"} {
			s := waitStatus(t, f, "member-"+name, "Connected", "MemberConnected", time.Minute)
			if !hasFinalizer(s, finalizerCleanup) {
				t.Errorf("Secret %s is Connected without finalizer %s: %v", s.Name, finalizerCleanup, s.Finalizers)
			}
			ev := waitEvent(t, f, "member-"+name, "MemberConnected", start, 30*time.Second)
			if ev.Type != corev1.EventTypeNormal {
				t.Errorf("MemberConnected Event of %s is %s", s.Name, ev.Type)
			}
		}
		f.waitLeafReady(t, leafA, time.Minute)
		f.waitLeafReady(t, leafB, time.Minute)
		t.Logf("both members Connected and their leaves Ready %s after the Secrets were created", time.Since(start).Round(time.Millisecond))
		for leaf, cluster := range map[string]string{leafA: "member-a", leafB: "member-b"} {
			if got := f.node(t, leaf).Labels[labelCluster]; got != cluster {
				t.Errorf("leaf %s has label %s=%q, want %q", leaf, labelCluster, got, cluster)
			}
		}
	})

	t.Run("kubeconfig rotation reconnects without a leaf transition", func(t *testing.T) {
		// The new credential: a ServiceAccount token (the old one is the
		// admin client certificate), through a new endpoint (a second
		// proxy in front of the same API server).
		if _, err := a.Client().RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "leafsync-rotated"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: leafsyncNamespace, Name: "leafsync-rotated"}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		newKC, err := a.ServiceAccountKubeconfig(ctx, leafsyncNamespace, "leafsync-rotated", aProxy2.Addr())
		if err != nil {
			t.Fatal(err)
		}
		// The credential works on its own before leafsync is given it.
		harness.Eventually(t, 30*time.Second, "rotated credential can list nodes", func() error {
			_, err := clientFor(t, newKC).CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			return err
		})

		probesBefore := scrape(t, ls)
		failedBefore := probeFailures(probesBefore, "member-a")
		rec := recordNode(t, f.host, leafA)
		rotatedAt := time.Now()
		patchKubeconfig(t, f, "member-member-a", newKC)

		// leafsync's own account of the swap is only the signal to go on;
		// the proof that the new kubeconfig is in use is the cut below.
		harness.Eventually(t, 60*time.Second, "leafsync reports member-a reconnected", func() error {
			if n := logCount(t, ls, `"msg":"member reconnected"`, `"cluster":"member-a"`, `"synced":true`); n != 1 {
				return fmt.Errorf("%d reconnects with synced caches logged", n)
			}
			return nil
		})
		s := waitStatus(t, f, "member-member-a", "Connected", "MemberConnected", 30*time.Second)
		// Reconnecting is reported only if the swap outlasts the spacing
		// of status writes (5s); a fast swap shows no status change at all.
		reconnecting := "not reported (the swap finished within the 5s spacing of status writes)"
		for _, ev := range secretEvents(t, f, "member-member-a") {
			if ev.Reason == "Reconnecting" && !eventTime(ev).Before(rotatedAt) {
				reconnecting = "reported: " + ev.Note
			}
		}
		t.Logf("status-time %s; Reconnecting %s", s.Annotations[annStatusTime], reconnecting)
		t.Logf("member-a reconnected with the rotated kubeconfig (new endpoint, ServiceAccount token): swap logged and status Connected %s after the Secret update", time.Since(rotatedAt).Round(time.Millisecond))

		// Cut the old endpoint for good: if anything still used the old
		// connection, probes would fail and the leaf would be cordoned
		// after cordonAfter (2s).
		a.proxy.Cut()
		cutAt := time.Now()
		okAtCut := metricValue(scrape(t, ls), "leafsync_probe_results_total", "cluster", "member-a", "result", "ok")
		harness.Eventually(t, 30*time.Second, "5 successful probes of member-a after the old endpoint is cut", func() error {
			ok := metricValue(scrape(t, ls), "leafsync_probe_results_total", "cluster", "member-a", "result", "ok")
			if ok < okAtCut+5 {
				return fmt.Errorf("%v successful probes since the cut", ok-okAtCut)
			}
			return nil
		})
		t.Logf("old endpoint cut for %s: member-a still probed OK through the new one", time.Since(cutAt).Round(time.Millisecond))
		s = getSecret(t, f, "member-member-a")
		if s.Annotations[annStatus] != "Connected" {
			t.Errorf("member-a status %s/%s after the old endpoint was cut", s.Annotations[annStatus], s.Annotations[annStatusReason])
		}
		if failed := probeFailures(scrape(t, ls), "member-a"); failed != failedBefore {
			t.Errorf("%v failed probes of member-a during the rotation and the cut of the old endpoint", failed-failedBefore)
		}

		// A rotation to a kubeconfig leafsync refuses keeps the connection
		// in use: the status keeps its phase with the refusal as reason.
		patchKubeconfig(t, f, "member-member-a", kubeconfigData(t, newKC, func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.Token = ""
			u.Exec = &clientcmdapi.ExecConfig{APIVersion: "client.authentication.k8s.io/v1", Command: "gke-gcloud-auth-plugin",
				InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
		})["kubeconfig"])
		refusedAt := time.Now()
		waitStatus(t, f, "member-member-a", "Connected", "ExecAuthRefused", 30*time.Second)
		waitEvent(t, f, "member-member-a", "ExecAuthRefused", refusedAt, 30*time.Second)
		patchKubeconfig(t, f, "member-member-a", newKC)
		waitStatus(t, f, "member-member-a", "Connected", "MemberConnected", 30*time.Second)
		if n := logCount(t, ls, `"msg":"member reconnected"`, `"cluster":"member-a"`); n != 1 {
			t.Errorf("%d reconnects of member-a logged; the refused kubeconfig and the return to the one in use should cause none", n-1)
		}
		if failed := probeFailures(scrape(t, ls), "member-a"); failed != failedBefore {
			t.Errorf("%v failed probes of member-a after the refused rotation", failed-failedBefore)
		}

		obs := rec.observations(t)
		checkUntouched(t, leafA, obs)
		t.Logf("%d versions of %s watched through the rotation, a refused rotation and the cut of the old endpoint: Ready=True in all, never cordoned", len(obs), leafA)
		if err := a.proxy.Heal(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("bad Secrets are refused with an Event and touch no other member", func(t *testing.T) {
		recA, recB := recordNode(t, f.host, leafA), recordNode(t, f.host, leafB)
		good := map[string]*corev1.Secret{}
		for _, name := range []string{"member-member-a", "member-member-b"} {
			good[name] = getSecret(t, f, name)
		}
		start := time.Now()

		bKC := b.KubeconfigVia(b.proxy.Addr())
		closedPort, err := harness.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			secret, cluster string
			annotations     map[string]string
			data            map[string][]byte
			phase, reason   string
		}{
			{secret: "bad-missing-key", cluster: "bad-missing-key", data: map[string][]byte{"config": bKC},
				phase: "Refused", reason: "MissingKubeconfig"},
			{secret: "bad-yaml", cluster: "bad-yaml", data: map[string][]byte{"kubeconfig": []byte("apiVersion: v1\nclusters: [ {{ not yaml\n")},
				phase: "Refused", reason: "InvalidKubeconfig"},
			{secret: "bad-exec", cluster: "bad-exec", data: kubeconfigData(t, bKC, func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
				u.ClientCertificateData, u.ClientKeyData = nil, nil
				u.Exec = &clientcmdapi.ExecConfig{APIVersion: "client.authentication.k8s.io/v1", Command: "aws",
					Args: []string{"eks", "get-token"}, InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
			}), phase: "Refused", reason: "ExecAuthRefused"},
			{secret: "bad-file-ref", cluster: "bad-file-ref", data: kubeconfigData(t, bKC, func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) {
				c.CertificateAuthorityData = nil
				c.CertificateAuthority = "/etc/kubernetes/pki/ca.crt"
			}), phase: "Refused", reason: "FileReferenceRefused"},
			{secret: "bad-insecure", cluster: "bad-insecure", data: kubeconfigData(t, bKC, func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) {
				c.CertificateAuthorityData = nil
				c.InsecureSkipTLSVerify = true
			}), phase: "Refused", reason: "InsecureTLSRefused"},
			{secret: "bad-annotation", cluster: "bad-annotation", data: map[string][]byte{"kubeconfig": bKC},
				annotations: map[string]string{"leafsync.io/not-ready-after": "soon"},
				phase:       "Refused", reason: "InvalidAnnotation"},
			// Same cluster name as member-b, created later: member-b's
			// Secret is older and keeps the cluster.
			{secret: "member-b-again", cluster: "member-b", data: map[string][]byte{"kubeconfig": a.KubeconfigVia(aProxy2.Addr())},
				phase: "Duplicate", reason: "DuplicateCluster"},
			{secret: "bad-unreachable", cluster: "bad-unreachable", data: kubeconfigData(t, bKC, func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) {
				c.Server = fmt.Sprintf("https://127.0.0.1:%d", closedPort)
			}), phase: "Unreachable", reason: "MemberUnreachable"},
			{secret: "bad-tls", cluster: "bad-tls", data: kubeconfigData(t, bKC, func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) {
				c.CertificateAuthorityData = a.CACert() // a CA, but not the one that signed member-b's server certificate
			}), phase: "Misconfigured", reason: "MemberTLSError"},
			{secret: "bad-token", cluster: "bad-token", data: kubeconfigData(t, bKC, func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
				u.ClientCertificateData, u.ClientKeyData = nil, nil
				u.Token = "bogus-token-that-no-member-issued"
			}), phase: "Unauthorized", reason: "MemberUnauthorized"},
		}
		for _, tc := range cases {
			s := &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: tc.secret, Namespace: leafsyncNamespace,
					Labels: map[string]string{labelCluster: tc.cluster}, Annotations: tc.annotations},
				Data: tc.data,
			}
			if _, err := hc.CoreV1().Secrets(leafsyncNamespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
				t.Fatalf("creating Secret %s: %v", tc.secret, err)
			}
		}
		for _, tc := range cases {
			s := waitStatus(t, f, tc.secret, tc.phase, tc.reason, time.Minute)
			ev := waitEvent(t, f, tc.secret, tc.reason, start, 30*time.Second)
			if ev.Type != corev1.EventTypeWarning {
				t.Errorf("%s: Event %s is %s, want Warning", tc.secret, tc.reason, ev.Type)
			}
			if s.Annotations[annStatusMessage] == "" || ev.Note == "" {
				t.Errorf("%s: no message for people (annotation %q, Event note %q)", tc.secret, s.Annotations[annStatusMessage], ev.Note)
			}
			t.Logf("%-16s %s/%s: %s", tc.secret, tc.phase, tc.reason, truncateText(ev.Note, 160))
			if tc.phase == "Refused" || tc.phase == "Duplicate" {
				// Nothing runs for it: no finalizer, and no leaf.
				if hasFinalizer(s, finalizerCleanup) {
					t.Errorf("%s is %s but carries finalizer %s", tc.secret, tc.phase, finalizerCleanup)
				}
				if tc.phase == "Refused" {
					if _, err := hc.CoreV1().Nodes().Get(ctx, "leaf-"+tc.cluster, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
						t.Errorf("%s is refused, yet Get of leaf-%s gives %v", tc.secret, tc.cluster, err)
					}
				}
			}
		}

		// Each problem is in leafsync's metrics, next to the good members'
		// series: a bad Secret must not break the scrape.
		m := scrape(t, ls)
		for _, tc := range cases {
			if tc.phase == "Duplicate" {
				continue // the cluster's series belong to the Secret that registers it
			}
			if v, ok := m.get("leafsync_registration_problem", "cluster", tc.cluster, "reason", tc.reason); !ok || v != 1 {
				t.Errorf("leafsync_registration_problem{cluster=%q,reason=%q} = %v (exported: %v), want 1", tc.cluster, tc.reason, v, ok)
			}
		}
		for _, cluster := range []string{"member-a", "member-b"} {
			if st, ok := m.get("leafsync_breaker_state", "cluster", cluster); !ok || st != 0 {
				t.Errorf("leafsync_breaker_state{cluster=%q} = %v (exported: %v) with the bad Secrets present, want 0", cluster, st, ok)
			}
		}

		// The duplicate's removal must not deregister member-b, and the
		// others must go completely (finalizers included).
		for _, tc := range cases {
			if err := hc.CoreV1().Secrets(leafsyncNamespace).Delete(ctx, tc.secret, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		for _, tc := range cases {
			f.waitGone(t, "Secret "+tc.secret, func() error {
				_, err := hc.CoreV1().Secrets(leafsyncNamespace).Get(ctx, tc.secret, metav1.GetOptions{})
				return err
			})
			if tc.cluster != "member-b" {
				f.waitGone(t, "leaf-"+tc.cluster, func() error {
					_, err := hc.CoreV1().Nodes().Get(ctx, "leaf-"+tc.cluster, metav1.GetOptions{})
					return err
				})
			}
		}
		// Let member-b's runtime show a reaction to the duplicate's
		// deletion, if it had one: a few more successful probes.
		okNow := metricValue(scrape(t, ls), "leafsync_probe_results_total", "cluster", "member-b", "result", "ok")
		harness.Eventually(t, 30*time.Second, "3 more probes of member-b after the bad Secrets are gone", func() error {
			if ok := metricValue(scrape(t, ls), "leafsync_probe_results_total", "cluster", "member-b", "result", "ok"); ok < okNow+3 {
				return fmt.Errorf("%v probes", ok-okNow)
			}
			return nil
		})

		for name, before := range good {
			after := getSecret(t, f, name)
			for _, k := range []string{annStatus, annStatusReason, annStatusTime} {
				if after.Annotations[k] != before.Annotations[k] {
					t.Errorf("Secret %s: %s changed from %q to %q while bad Secrets came and went", name, k, before.Annotations[k], after.Annotations[k])
				}
			}
			for _, ev := range secretEvents(t, f, name) {
				if eventTime(ev).After(start) {
					t.Errorf("Secret %s got Event %s/%s (%s) while bad Secrets came and went", name, ev.Type, ev.Reason, ev.Note)
				}
			}
		}
		for leaf, rec := range map[string]*nodeRecorder{leafA: recA, leafB: recB} {
			obs := rec.observations(t)
			checkUntouched(t, leaf, obs)
			t.Logf("%s: %d versions watched while %d bad Secrets came and went: Ready=True in all, never cordoned", leaf, len(obs), len(cases))
		}
	})

	t.Run("deregistration removes leaf, Lease and finalizer", func(t *testing.T) {
		recB := recordNode(t, f.host, leafB)
		if _, err := f.lease(leafA); err != nil {
			t.Fatalf("leaf Lease of member-a before deregistration: %v", err)
		}
		start := time.Now()
		if err := hc.CoreV1().Secrets(leafsyncNamespace).Delete(ctx, "member-member-a", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		f.waitGone(t, "leaf node "+leafA, func() error {
			_, err := hc.CoreV1().Nodes().Get(ctx, leafA, metav1.GetOptions{})
			return err
		})
		f.waitGone(t, "Lease of "+leafA, func() error { _, err := f.lease(leafA); return err })
		f.waitGone(t, "Secret member-member-a", func() error {
			_, err := hc.CoreV1().Secrets(leafsyncNamespace).Get(ctx, "member-member-a", metav1.GetOptions{})
			return err
		})
		t.Logf("member-a deregistered: leaf, Lease and Secret gone %s after the delete", time.Since(start).Round(time.Millisecond))
		waitEvent(t, f, "member-member-a", "Deregistered", start, 30*time.Second)
		// Nothing recreates the leaf: the runtime is stopped, not just idle.
		harness.Eventually(t, 30*time.Second, "member-a gone from leafsync's metrics", func() error {
			if _, ok := scrape(t, ls).get("leafsync_breaker_state", "cluster", "member-a"); ok {
				return fmt.Errorf("leafsync_breaker_state{cluster=member-a} still exported")
			}
			return nil
		})
		if _, err := hc.CoreV1().Nodes().Get(ctx, leafA, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("leaf %s is back after deregistration: %v", leafA, err)
		}
		obs := recB.observations(t)
		checkUntouched(t, leafB, obs)
		t.Logf("%s: %d versions watched through member-a's deregistration: Ready=True in all", leafB, len(obs))
	})

	t.Run("cut member opens its breaker, healing closes it", func(t *testing.T) {
		m := scrape(t, ls)
		if st := metricValue(m, "leafsync_breaker_state", "cluster", "member-b"); st != 0 {
			t.Fatalf("member-b breaker state %v before the cut, want 0 (closed)", st)
		}
		opened0 := metricValue(m, "leafsync_breaker_transitions_total", "cluster", "member-b", "to", "open")
		closed0 := metricValue(m, "leafsync_breaker_transitions_total", "cluster", "member-b", "to", "closed")
		rejected0 := metricValue(m, "leafsync_breaker_rejected_total", "cluster", "member-b")

		b.proxy.Cut()
		cutAt := time.Now()
		var openAt time.Time
		harness.Eventually(t, 30*time.Second, "member-b breaker open", func() error {
			m := scrape(t, ls)
			if st := metricValue(m, "leafsync_breaker_state", "cluster", "member-b"); st != 2 {
				return fmt.Errorf("breaker state %v", st)
			}
			openAt = time.Now()
			return nil
		})
		var rejected float64
		harness.Eventually(t, 30*time.Second, "calls to member-b rejected by its breaker", func() error {
			rejected = metricValue(scrape(t, ls), "leafsync_breaker_rejected_total", "cluster", "member-b") - rejected0
			if rejected < 3 {
				return fmt.Errorf("%v calls rejected", rejected)
			}
			return nil
		})
		t.Logf("breaker of member-b open %s after the cut (seen by a 200ms metrics poll); %v calls rejected %s after the cut",
			openAt.Sub(cutAt).Round(time.Millisecond), rejected, time.Since(cutAt).Round(time.Millisecond))
		if err := b.proxy.Heal(); err != nil {
			t.Fatal(err)
		}
		healAt := time.Now()
		harness.Eventually(t, 30*time.Second, "member-b breaker closed after the heal", func() error {
			m := scrape(t, ls)
			if st := metricValue(m, "leafsync_breaker_state", "cluster", "member-b"); st != 0 {
				return fmt.Errorf("breaker state %v", st)
			}
			if c := metricValue(m, "leafsync_breaker_transitions_total", "cluster", "member-b", "to", "closed"); c <= closed0 {
				return fmt.Errorf("no transition to closed yet")
			}
			return nil
		})
		m = scrape(t, ls)
		t.Logf("breaker of member-b closed %s after the heal (open timeout 5s); transitions: open +%v, half-open total %v, closed +%v",
			time.Since(healAt).Round(time.Millisecond),
			metricValue(m, "leafsync_breaker_transitions_total", "cluster", "member-b", "to", "open")-opened0,
			metricValue(m, "leafsync_breaker_transitions_total", "cluster", "member-b", "to", "half-open"),
			metricValue(m, "leafsync_breaker_transitions_total", "cluster", "member-b", "to", "closed")-closed0)
		waitStatus(t, f, "member-member-b", "Connected", "MemberConnected", 30*time.Second)
		f.waitLeafReady(t, leafB, 30*time.Second)

		// A blackholed member answers nothing. Probes bypass the breaker:
		// none is refused without reaching the member, each waits out its
		// own 1s timeout, and that is what the engine sees (the breaker
		// never stands in for the member's health).
		beforeBlackhole := scrape(t, ls)
		if err := b.proxy.Blackhole(); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, 30*time.Second, "member-b probes failing (blackhole)", func() error {
			m := scrape(t, ls)
			if n := metricValue(m, "leafsync_probe_results_total", "cluster", "member-b", "result", "network") -
				metricValue(beforeBlackhole, "leafsync_probe_results_total", "cluster", "member-b", "result", "network"); n < 3 {
				return fmt.Errorf("%v failed probes", n)
			}
			return nil
		})
		later := scrape(t, ls)
		if err := b.proxy.Heal(); err != nil {
			t.Fatal(err)
		}
		healAt = time.Now()
		bucket := func(m metricSet, le string) float64 {
			return metricValue(m, "leafsync_probe_duration_seconds_bucket", "cluster", "member-b", "le", le)
		}
		n := metricValue(later, "leafsync_probe_duration_seconds_count", "cluster", "member-b") - metricValue(beforeBlackhole, "leafsync_probe_duration_seconds_count", "cluster", "member-b")
		sum := metricValue(later, "leafsync_probe_duration_seconds_sum", "cluster", "member-b") - metricValue(beforeBlackhole, "leafsync_probe_duration_seconds_sum", "cluster", "member-b")
		// The first probe may have been answered just before the blackhole;
		// the others all waited for it.
		fast := bucket(later, "0.1") - bucket(beforeBlackhole, "0.1")
		t.Logf("blackhole: %v probes, mean %s, %v of them in under 100ms (a probe refused by a breaker would take microseconds)",
			n, time.Duration(sum/n*float64(time.Second)).Round(time.Millisecond), fast)
		if fast > 1 {
			t.Errorf("%v probes of a blackholed member ended in under 100ms: something refused them instead of the member", fast)
		}
		if rejected := metricValue(later, "leafsync_breaker_rejected_total", "cluster", "member-b") - metricValue(beforeBlackhole, "leafsync_breaker_rejected_total", "cluster", "member-b"); rejected != 0 {
			t.Logf("%v other calls to member-b were failed fast by its breaker during the blackhole", rejected)
		}
		harness.Eventually(t, 30*time.Second, "member-b breaker closed and probes OK after the blackhole heals", func() error {
			m := scrape(t, ls)
			if st := metricValue(m, "leafsync_breaker_state", "cluster", "member-b"); st != 0 {
				return fmt.Errorf("breaker state %v", st)
			}
			return nil
		})
		waitStatus(t, f, "member-member-b", "Connected", "MemberConnected", 30*time.Second)
		t.Logf("member-b Connected again %s after the blackhole healed", time.Since(healAt).Round(time.Millisecond))
	})
}

// TestRegisterCommand runs `leafsync register` against a real host and
// member: --dry-run prints a Secret and changes nothing; a real run creates
// the member's ServiceAccount and RBAC and the host's Secret, and leafsync
// connects with that least-privilege token.
func TestRegisterCommand(t *testing.T) {
	f := newFleet(t, harness.HostOptions{}, harness.MemberOptions{Name: "member-x", Nodes: 1})
	ctx := context.Background()
	m := f.members["member-x"]
	hc := f.host.Client()
	dir := harness.LogDir(t)
	hostKC, err := f.host.WriteKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	memberKC := filepath.Join(dir, "member-x.kubeconfig")
	if err := os.WriteFile(memberKC, m.KubeconfigVia(m.proxy.Addr()), 0o600); err != nil {
		t.Fatal(err)
	}
	register := func(t *testing.T, extra ...string) (stdout, stderr string) {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		args := append([]string{"register", "--kubeconfig", hostKC, "--member-kubeconfig", memberKC,
			"--cluster", "member-x", "--create-service-account", "--namespace", leafsyncNamespace}, extra...)
		cmd := exec.CommandContext(cctx, harness.LeafsyncBinary(t), args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG=/nonexistent", "HOME="+dir)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			t.Fatalf("leafsync %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out.String(), errOut.String())
		}
		return out.String(), errOut.String()
	}

	t.Run("dry run prints a Secret and creates nothing", func(t *testing.T) {
		out, _ := register(t, "--dry-run")
		var secret *corev1.Secret
		kinds := []string{}
		for _, doc := range strings.Split(out, "---\n") {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			var meta metav1.TypeMeta
			if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
				t.Fatalf("dry-run output is not YAML: %v\n%s", err, doc)
			}
			kinds = append(kinds, meta.Kind)
			if meta.Kind == "Secret" {
				var s corev1.Secret
				if err := yaml.Unmarshal([]byte(doc), &s); err != nil {
					t.Fatal(err)
				}
				if s.Labels[labelCluster] == "member-x" {
					secret = &s
				}
			}
		}
		if secret == nil {
			t.Fatalf("dry-run printed no registration Secret for member-x (kinds %v):\n%s", kinds, out)
		}
		if secret.Name != "member-member-x" || secret.Namespace != leafsyncNamespace || len(secret.Data["kubeconfig"]) == 0 {
			t.Errorf("dry-run Secret %s/%s with %d bytes of kubeconfig, want %s/member-member-x with a kubeconfig", secret.Namespace, secret.Name, len(secret.Data["kubeconfig"]), leafsyncNamespace)
		}
		t.Logf("dry run printed %v", kinds)
		if _, err := hc.CoreV1().Secrets(leafsyncNamespace).Get(ctx, "member-member-x", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("dry run: Get of the host Secret gives %v, want NotFound", err)
		}
		mc := m.Client()
		for what, err := range map[string]error{
			"Namespace leafsync-system": func() error {
				_, err := mc.CoreV1().Namespaces().Get(ctx, leafsyncNamespace, metav1.GetOptions{})
				return err
			}(),
			"ServiceAccount leafsync": func() error {
				_, err := mc.CoreV1().ServiceAccounts(leafsyncNamespace).Get(ctx, "leafsync", metav1.GetOptions{})
				return err
			}(),
			"ClusterRole": func() error {
				_, err := mc.RbacV1().ClusterRoles().Get(ctx, "leafsync:member", metav1.GetOptions{})
				return err
			}(),
			"ClusterRoleBinding": func() error {
				_, err := mc.RbacV1().ClusterRoleBindings().Get(ctx, "leafsync:member", metav1.GetOptions{})
				return err
			}(),
		} {
			if !apierrors.IsNotFound(err) {
				t.Errorf("dry run: %s in the member: %v, want NotFound", what, err)
			}
		}
	})

	t.Run("register creates ServiceAccount, RBAC and Secret; leafsync connects", func(t *testing.T) {
		out, errOut := register(t)
		t.Logf("register: %s%s", errOut, out)
		mc := m.Client()
		if _, err := mc.CoreV1().ServiceAccounts(leafsyncNamespace).Get(ctx, "leafsync", metav1.GetOptions{}); err != nil {
			t.Fatalf("ServiceAccount in the member: %v", err)
		}
		crb, err := mc.RbacV1().ClusterRoleBindings().Get(ctx, "leafsync:member", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("ClusterRoleBinding in the member: %v", err)
		}
		if crb.RoleRef.Name != "leafsync:member" || len(crb.Subjects) != 1 || crb.Subjects[0].Name != "leafsync" || crb.Subjects[0].Namespace != leafsyncNamespace {
			t.Errorf("ClusterRoleBinding %s binds %v to %v", crb.Name, crb.RoleRef, crb.Subjects)
		}
		if _, err := mc.RbacV1().ClusterRoles().Get(ctx, "leafsync:member", metav1.GetOptions{}); err != nil {
			t.Fatalf("ClusterRole in the member: %v", err)
		}

		s, err := hc.CoreV1().Secrets(leafsyncNamespace).Get(ctx, "member-member-x", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("registration Secret in the host: %v", err)
		}
		if s.Labels[labelCluster] != "member-x" {
			t.Errorf("Secret labels %v", s.Labels)
		}
		// The registered credential is the ServiceAccount's token, not the
		// admin certificate register was given.
		kc, err := clientcmd.Load(s.Data["kubeconfig"])
		if err != nil {
			t.Fatal(err)
		}
		user := kc.AuthInfos[kc.Contexts[kc.CurrentContext].AuthInfo]
		if user == nil || user.Token == "" || len(user.ClientCertificateData) > 0 {
			t.Fatalf("registered user is not a bare token: %+v", user)
		}
		review, err := clientFor(t, s.Data["kubeconfig"]).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if want := "system:serviceaccount:" + leafsyncNamespace + ":leafsync"; review.Status.UserInfo.Username != want {
			t.Errorf("registered token authenticates as %q, want %q", review.Status.UserInfo.Username, want)
		}

		start := time.Now()
		f.startLeafsync(t, "leafsync")
		waitStatus(t, f, "member-member-x", "Connected", "MemberConnected", time.Minute)
		f.waitLeafReady(t, "leaf-member-x", time.Minute)
		// Capacity needs the member's Nodes and Pods: the least RBAC is enough.
		waitAllocatable(t, f, "leaf-member-x", map[corev1.ResourceName]string{"cpu": "4", "pods": "110"})
		t.Logf("leafsync connected with the registered ServiceAccount token: leaf Ready with the member's capacity %s after start", time.Since(start).Round(time.Millisecond))
	})
}

// checkUntouched fails unless every observed version of a leaf is Ready and
// not cordoned.
func checkUntouched(t *testing.T, leaf string, obs []nodeObservation) {
	t.Helper()
	if len(obs) == 0 {
		t.Fatalf("no version of %s observed", leaf)
	}
	for _, o := range obs {
		if o.ready != corev1.ConditionTrue {
			t.Fatalf("%s Ready=%q at %s", leaf, o.ready, o.at.Format(time.StampMilli))
		}
		if hasTaint(o.node, leafnode.TaintUnreachable, corev1.TaintEffectNoSchedule) {
			t.Fatalf("%s cordoned (%s) at %s", leaf, leafnode.TaintUnreachable, o.at.Format(time.StampMilli))
		}
	}
}

func hasFinalizer(s *corev1.Secret, f string) bool {
	for _, x := range s.Finalizers {
		if x == f {
			return true
		}
	}
	return false
}

func getSecret(t *testing.T, f *fleet, name string) *corev1.Secret {
	t.Helper()
	s, err := f.host.Client().CoreV1().Secrets(leafsyncNamespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// waitStatus waits until a registration Secret's status annotations show
// phase and reason, and returns the Secret.
func waitStatus(t *testing.T, f *fleet, name, phase, reason string, timeout time.Duration) *corev1.Secret {
	t.Helper()
	var s *corev1.Secret
	harness.Eventually(t, timeout, fmt.Sprintf("Secret %s status %s/%s", name, phase, reason), func() error {
		var err error
		s, err = f.host.Client().CoreV1().Secrets(leafsyncNamespace).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s.Annotations[annStatus] != phase || s.Annotations[annStatusReason] != reason {
			return fmt.Errorf("status %q/%q: %s", s.Annotations[annStatus], s.Annotations[annStatusReason], s.Annotations[annStatusMessage])
		}
		return nil
	})
	return s
}

// secretEvents lists the Events (events.k8s.io/v1) regarding a Secret.
func secretEvents(t *testing.T, f *fleet, name string) []eventsv1.Event {
	t.Helper()
	list, err := f.host.Client().EventsV1().Events(leafsyncNamespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []eventsv1.Event
	for _, ev := range list.Items {
		if ev.Regarding.Kind == "Secret" && ev.Regarding.Name == name {
			out = append(out, ev)
		}
	}
	return out
}

func eventTime(ev eventsv1.Event) time.Time {
	t := ev.EventTime.Time
	if ev.Series != nil && ev.Series.LastObservedTime.After(t) {
		t = ev.Series.LastObservedTime.Time
	}
	if ev.DeprecatedLastTimestamp.After(t) {
		t = ev.DeprecatedLastTimestamp.Time
	}
	return t
}

// waitEvent waits for an Event with reason regarding a Secret, last seen
// after a moment.
func waitEvent(t *testing.T, f *fleet, secret, reason string, after time.Time, timeout time.Duration) eventsv1.Event {
	t.Helper()
	var found eventsv1.Event
	harness.Eventually(t, timeout, fmt.Sprintf("Event %s on Secret %s", reason, secret), func() error {
		var seen []string
		for _, ev := range secretEvents(t, f, secret) {
			if ev.Reason == reason && !eventTime(ev).Before(after) {
				found = ev
				return nil
			}
			seen = append(seen, ev.Reason)
		}
		return fmt.Errorf("Events seen: %v", seen)
	})
	return found
}

// logCount counts the lines of leafsync's log that contain every one of want.
func logCount(t *testing.T, ls *harness.Leafsync, want ...string) int {
	t.Helper()
	data, err := os.ReadFile(ls.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		all := true
		for _, w := range want {
			all = all && strings.Contains(line, w)
		}
		if all {
			n++
		}
	}
	return n
}

// patchKubeconfig replaces the kubeconfig of a registration Secret.
func patchKubeconfig(t *testing.T, f *fleet, name string, kubeconfig []byte) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"data": map[string][]byte{"kubeconfig": kubeconfig}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.host.Client().CoreV1().Secrets(leafsyncNamespace).Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// kubeconfigData returns a Secret's data with a variant of kubeconfig: edit
// changes the current context's cluster and user entries.
func kubeconfigData(t *testing.T, kubeconfig []byte, edit func(*clientcmdapi.Cluster, *clientcmdapi.AuthInfo)) map[string][]byte {
	t.Helper()
	kc, err := clientcmd.Load(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kctx := kc.Contexts[kc.CurrentContext]
	edit(kc.Clusters[kctx.Cluster], kc.AuthInfos[kctx.AuthInfo])
	data, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{"kubeconfig": data}
}

func clientFor(t *testing.T, kubeconfig []byte) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Timeout = 10 * time.Second
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// metricSet is one scrape of leafsync's /metrics: value by series, the
// series written name{k="v",...} with labels sorted.
type metricSet map[string]float64

func scrape(t *testing.T, ls *harness.Leafsync) metricSet {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + ls.MetricsAddr + "/metrics")
	if err != nil {
		t.Fatalf("scraping leafsync: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body := make([]byte, 2048)
		n, _ := io.ReadFull(resp.Body, body)
		t.Fatalf("scraping leafsync: %s: %s", resp.Status, body[:n])
	}
	m, err := parseMetrics(resp.Body)
	if err != nil {
		t.Fatalf("scraping leafsync: %v", err)
	}
	return m
}

// parseMetrics reads the Prometheus text format into a metricSet, with a
// histogram's or summary's series named as in the text (_bucket, _count,
// _sum).
func parseMetrics(r io.Reader) (metricSet, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	m := metricSet{}
	for name, f := range families {
		for _, s := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				m[seriesKey(name, labels)] = s.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				m[seriesKey(name, labels)] = s.GetGauge().GetValue()
			case dto.MetricType_UNTYPED:
				m[seriesKey(name, labels)] = s.GetUntyped().GetValue()
			case dto.MetricType_HISTOGRAM:
				h := s.GetHistogram()
				m[seriesKey(name+"_count", labels)] = float64(h.GetSampleCount())
				m[seriesKey(name+"_sum", labels)] = h.GetSampleSum()
				for _, b := range h.GetBucket() {
					m[seriesKey(name+"_bucket", withLabel(labels, "le", formatBound(b.GetUpperBound())))] = float64(b.GetCumulativeCount())
				}
				m[seriesKey(name+"_bucket", withLabel(labels, "le", "+Inf"))] = float64(h.GetSampleCount())
			case dto.MetricType_SUMMARY:
				sm := s.GetSummary()
				m[seriesKey(name+"_count", labels)] = float64(sm.GetSampleCount())
				m[seriesKey(name+"_sum", labels)] = sm.GetSampleSum()
			}
		}
	}
	return m, nil
}

// withLabel returns a copy of labels with k=v added.
func withLabel(labels map[string]string, k, v string) map[string]string {
	out := maps.Clone(labels)
	out[k] = v
	return out
}

// formatBound writes a bucket bound as the text format does (le="0.5").
func formatBound(f float64) string {
	if math.IsInf(f, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func seriesKey(name string, labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%q", k, labels[k])
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}

// get returns a series' value; kv are label name and value pairs.
func (m metricSet) get(name string, kv ...string) (float64, bool) {
	labels := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		labels[kv[i]] = kv[i+1]
	}
	v, ok := m[seriesKey(name, labels)]
	return v, ok
}

// metricValue is get, with 0 for a series not (yet) exported.
func metricValue(m metricSet, name string, kv ...string) float64 {
	v, _ := m.get(name, kv...)
	return v
}

// probeFailures is the number of failed probes of a cluster, all classes.
func probeFailures(m metricSet, cluster string) float64 {
	var n float64
	for _, class := range []string{"network", "server", "auth", "config"} {
		n += metricValue(m, "leafsync_probe_results_total", "cluster", cluster, "result", class)
	}
	return n
}
