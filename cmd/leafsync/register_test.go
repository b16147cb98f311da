package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/leafsync/leafsync/internal/syncer/registration"
)

var testCA = func() []byte {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}()

// writeKubeconfig writes a one-context kubeconfig; mutate adjusts the user.
func writeKubeconfig(t *testing.T, dir, name string, mutate func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo)) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	c := clientcmdapi.NewCluster()
	c.Server = "https://member.example:6443"
	c.CertificateAuthorityData = testCA
	u := clientcmdapi.NewAuthInfo()
	u.Token = "user-token"
	if mutate != nil {
		mutate(c, u)
	}
	kctx := clientcmdapi.NewContext()
	kctx.Cluster, kctx.AuthInfo = "m", "u"
	cfg.Clusters["m"], cfg.AuthInfos["u"], cfg.Contexts["member"] = c, u, kctx
	other := clientcmdapi.NewContext()
	other.Cluster, other.AuthInfo = "m", "u"
	cfg.Contexts["other"] = other
	cfg.CurrentContext = "member"
	path := filepath.Join(dir, name)
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func runRegister(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	cmd := newRegisterCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

func decodeSecret(t *testing.T, out string) *corev1.Secret {
	t.Helper()
	docs := strings.Split(out, "---\n")
	var s corev1.Secret
	if err := yaml.Unmarshal([]byte(docs[len(docs)-1]), &s); err != nil {
		t.Fatalf("output is not a Secret: %v\n%s", err, out)
	}
	return &s
}

func TestRegisterDryRun(t *testing.T) {
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, testCA, 0o600); err != nil {
		t.Fatal(err)
	}
	// A file reference is inlined, so the result passes the check.
	path := writeKubeconfig(t, dir, "member.yaml", func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) {
		c.CertificateAuthorityData = nil
		c.CertificateAuthority = caFile
	})
	out, _, err := runRegister(t, "--cluster", "eu-1", "--member-kubeconfig", path, "--dry-run",
		"--leaf-name", "leaf-eu", "--annotation", "not-ready-after=2m", "--kubeconfig", "/nonexistent")
	if err != nil {
		t.Fatal(err)
	}
	s := decodeSecret(t, out)
	if s.Namespace != "leafsync-system" || s.Name != "member-eu-1" || s.Labels[registration.LabelCluster] != "eu-1" {
		t.Errorf("secret meta = %+v", s.ObjectMeta)
	}
	if s.Annotations[registration.AnnotationLeafName] != "leaf-eu" || s.Annotations["leafsync.io/not-ready-after"] != "2m" {
		t.Errorf("annotations = %v", s.Annotations)
	}
	spec, err := registration.Parse(s, registration.Policy{})
	if err != nil {
		t.Fatalf("the printed Secret does not pass the registration check: %v", err)
	}
	if spec.RESTConfig.BearerToken != "user-token" || string(spec.RESTConfig.CAData) != string(testCA) {
		t.Errorf("rest config = %+v", spec.RESTConfig)
	}
	kc, _ := clientcmd.Load(s.Data[registration.KeyKubeconfig])
	if len(kc.Contexts) != 1 {
		t.Errorf("kubeconfig not minified: contexts %v", kc.Contexts)
	}
}

func TestRegisterRefusesExecWithoutServiceAccount(t *testing.T) {
	dir := t.TempDir()
	path := writeKubeconfig(t, dir, "member.yaml", func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
		u.Token = ""
		u.Exec = &clientcmdapi.ExecConfig{Command: "aws", APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
	})
	_, _, err := runRegister(t, "--cluster", "eu-1", "--member-kubeconfig", path, "--dry-run")
	if err == nil || !strings.Contains(err.Error(), registration.ReasonExecAuthRefused) || !strings.Contains(err.Error(), "--create-service-account") {
		t.Fatalf("err = %v", err)
	}
	// With --create-service-account the exec user is only used to set up
	// the member; the dry run shows what would be created.
	out, errOut, err := runRegister(t, "--cluster", "eu-1", "--member-kubeconfig", path, "--dry-run", "--create-service-account")
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"kind: Namespace", "kind: ServiceAccount", "kind: ClusterRole", "kind: ClusterRoleBinding", "type: kubernetes.io/service-account-token"} {
		if !strings.Contains(out, kind) {
			t.Errorf("dry run lacks %q", kind)
		}
	}
	if strings.Contains(out, "pods/exec") {
		t.Errorf("without --kubelet-api the member role grants pods/exec")
	}
	out, _, err = runRegister(t, "--cluster", "eu-1", "--member-kubeconfig", path, "--dry-run", "--create-service-account", "--kubelet-api")
	if err != nil || !strings.Contains(out, "pods/exec") || !strings.Contains(out, "pods/log") {
		t.Errorf("--kubelet-api: the member role lacks pods/exec or pods/log (err %v)", err)
	}
	if !strings.Contains(errOut, "placeholder") {
		t.Errorf("stderr %q does not warn about the placeholder", errOut)
	}
	if _, err := registration.Parse(decodeSecret(t, out), registration.Policy{}); err != nil {
		t.Errorf("dry-run Secret: %v", err)
	}
}

func TestRegisterBadInput(t *testing.T) {
	dir := t.TempDir()
	path := writeKubeconfig(t, dir, "member.yaml", nil)
	for _, args := range [][]string{
		{"--cluster", "EU_1", "--member-kubeconfig", path, "--dry-run"},
		{"--cluster", "eu-1", "--member-kubeconfig", path, "--member-context", "nope", "--dry-run"},
		{"--cluster", "eu-1", "--member-kubeconfig", path, "--annotation", "typo-here=1", "--dry-run"},
		{"--cluster", "eu-1", "--member-kubeconfig", path, "--annotation", "novalue", "--dry-run"},
		{"--member-kubeconfig", path, "--dry-run"},
		{"--cluster", "eu-1", "--member-kubeconfig", path, "--kubelet-api", "--dry-run"}, // without --create-service-account
	} {
		if _, _, err := runRegister(t, args...); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

func TestSetupServiceAccount(t *testing.T) {
	c := fake.NewClientset()
	// The fake has no token controller: a token Secret reads back filled.
	c.PrependReactor("get", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		get := a.(k8stesting.GetAction)
		obj, err := c.Tracker().Get(get.GetResource(), get.GetNamespace(), get.GetName())
		if err != nil {
			return true, nil, err
		}
		s := obj.(*corev1.Secret).DeepCopy()
		if s.Type == corev1.SecretTypeServiceAccountToken {
			s.Data = map[string][]byte{corev1.ServiceAccountTokenKey: []byte("sa-token"), corev1.ServiceAccountRootCAKey: testCA}
		}
		return true, s, nil
	})
	ctx := context.Background()
	var log bytes.Buffer
	token, ca, err := setupServiceAccount(ctx, c, memberNamespace, false, 5*time.Second, &log)
	if err != nil {
		t.Fatal(err)
	}
	if string(token) != "sa-token" || string(ca) != string(testCA) {
		t.Errorf("token %q ca %q", token, ca)
	}
	if _, err := c.CoreV1().ServiceAccounts(memberNamespace).Get(ctx, memberSA, metav1.GetOptions{}); err != nil {
		t.Error(err)
	}
	crb, err := c.RbacV1().ClusterRoleBindings().Get(ctx, memberRBACName, metav1.GetOptions{})
	if err != nil || crb.Subjects[0].Name != memberSA || crb.Subjects[0].Namespace != memberNamespace || crb.RoleRef.Name != memberRBACName {
		t.Errorf("binding = %+v, %v", crb, err)
	}
	role, err := c.RbacV1().ClusterRoles().Get(ctx, memberRBACName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	allows := func(resource, verb string) bool {
		for _, r := range role.Rules {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					if res == resource && v == verb {
						return true
					}
				}
			}
		}
		return false
	}
	for _, rv := range [][2]string{{"nodes", "watch"}, {"pods", "create"}, {"pods", "delete"}, {"pods/status", "patch"}, {"pods/eviction", "create"}, {"pods/resize", "update"}, {"pods/ephemeralcontainers", "update"}, {"namespaces", "create"}, {"configmaps", "update"}, {"secrets", "create"}, {"services", "patch"}, {"services", "delete"}} {
		if !allows(rv[0], rv[1]) {
			t.Errorf("ClusterRole does not allow %s %s", rv[1], rv[0])
		}
	}
	for _, rv := range [][2]string{{"nodes", "delete"}, {"namespaces", "delete"}, {"*", "*"}} {
		if allows(rv[0], rv[1]) {
			t.Errorf("ClusterRole allows %s %s: more than leafsync needs", rv[1], rv[0])
		}
	}

	// Running it again (re-registration) works and updates the role.
	role.Rules = []rbacv1.PolicyRule{}
	if _, err := c.RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := setupServiceAccount(ctx, c, memberNamespace, false, 5*time.Second, &log); err != nil {
		t.Fatal(err)
	}
	role, _ = c.RbacV1().ClusterRoles().Get(ctx, memberRBACName, metav1.GetOptions{})
	if len(role.Rules) != len(memberRules) {
		t.Errorf("role not restored: %+v", role.Rules)
	}

	kc, err := tokenKubeconfig("eu-1", "https://member.example:6443", ca, "", string(token))
	if err != nil {
		t.Fatal(err)
	}
	s := registrationSecret("leafsync-system", "member-eu-1", "eu-1", kc, nil)
	spec, err := registration.Parse(s, registration.Policy{})
	if err != nil {
		t.Fatalf("the ServiceAccount kubeconfig does not pass the check: %v", err)
	}
	if spec.RESTConfig.BearerToken != "sa-token" {
		t.Errorf("token = %q", spec.RESTConfig.BearerToken)
	}
}

func TestSetupServiceAccountTimesOut(t *testing.T) {
	c := fake.NewClientset() // no token ever
	_, _, err := setupServiceAccount(context.Background(), c, memberNamespace, false, 300*time.Millisecond, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "token controller") {
		t.Fatalf("err = %v", err)
	}
}

func TestApplySecret(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "leafsync-system"}})
	s := registrationSecret("leafsync-system", "member-eu-1", "eu-1", []byte("v1"), map[string]string{registration.AnnotationLeafName: "a"})
	created, err := applySecret(ctx, c, s)
	if err != nil || !created {
		t.Fatalf("created=%v err=%v", created, err)
	}
	// leafsync's status annotation survives an update.
	cur, _ := c.CoreV1().Secrets("leafsync-system").Get(ctx, "member-eu-1", metav1.GetOptions{})
	cur.Annotations[registration.AnnotationStatus] = "Connected"
	if _, err := c.CoreV1().Secrets("leafsync-system").Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s2 := registrationSecret("leafsync-system", "member-eu-1", "eu-1", []byte("v2"), map[string]string{registration.AnnotationLeafName: "b"})
	created, err = applySecret(ctx, c, s2)
	if err != nil || created {
		t.Fatalf("created=%v err=%v", created, err)
	}
	cur, _ = c.CoreV1().Secrets("leafsync-system").Get(ctx, "member-eu-1", metav1.GetOptions{})
	if string(cur.Data[registration.KeyKubeconfig]) != "v2" || cur.Annotations[registration.AnnotationLeafName] != "b" || cur.Annotations[registration.AnnotationStatus] != "Connected" {
		t.Errorf("after update: %+v", cur)
	}
	// Another cluster's Secret is not taken over.
	s3 := registrationSecret("leafsync-system", "member-eu-1", "eu-2", []byte("v3"), nil)
	if _, err := applySecret(ctx, c, s3); err == nil || !strings.Contains(err.Error(), "--secret-name") {
		t.Errorf("err = %v", err)
	}
	// A missing namespace is explained.
	if _, err := applySecret(ctx, fake.NewClientset(), s); err == nil || !strings.Contains(err.Error(), "install leafsync") {
		t.Errorf("err = %v", err)
	}
}

// TestRegisterFollowsNoRedirect: a member URL that answers 307 to another
// server must not have register send that server anything, least of all
// the bearer token of the user's kubeconfig (as the syncer's member
// clients, TestNoRedirectCarriesCredentials in internal/syncer/member).
func TestRegisterFollowsNoRedirect(t *testing.T) {
	var mu sync.Mutex
	var asked, leaked []string
	elsewhere := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		leaked = append(leaked, r.Method+" "+r.URL.Path+" Authorization="+r.Header.Get("Authorization"))
		mu.Unlock()
		_, _ = w.Write([]byte("{}"))
	}))
	defer elsewhere.Close()
	member := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.Method+" "+r.URL.Path)
		mu.Unlock()
		http.Redirect(w, r, elsewhere.URL+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	}))
	defer member.Close()
	// httptest's TLS servers share one certificate: the member's CA trusts
	// the other server too, so only the redirect policy keeps the token.
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: member.Certificate().Raw})
	path := writeKubeconfig(t, t.TempDir(), "member.yaml", func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) {
		c.Server = member.URL
		c.CertificateAuthorityData = ca
	})
	_, _, err := runRegister(t, "--cluster", "eu-1", "--member-kubeconfig", path, "--create-service-account",
		"--kubeconfig", "/nonexistent", "--wait-timeout", "1s")
	mu.Lock()
	defer mu.Unlock()
	if len(asked) == 0 {
		t.Fatalf("register never asked the member (err %v)", err)
	}
	if err == nil {
		t.Errorf("register succeeded against a member that only redirects")
	}
	if len(leaked) > 0 {
		t.Errorf("register followed the member's redirect: the other server received %q", leaked)
	}
	t.Logf("member asked %q; register: %v", asked, err)
}

// TestApplySecretOwnsWhatItSets: under server-side apply a repeated
// register drops a leafsync.io/ annotation it set before and not now,
// and keeps what others set.
func TestApplySecretOwnsWhatItSets(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "leafsync-system"}})
	first := registrationSecret("leafsync-system", "member-eu-1", "eu-1", []byte("v1"),
		map[string]string{registration.AnnotationLeafName: "a", "leafsync.io/not-ready-after": "2m"})
	if _, err := applySecret(ctx, c, first); err != nil {
		t.Fatal(err)
	}
	cur, _ := c.CoreV1().Secrets("leafsync-system").Get(ctx, "member-eu-1", metav1.GetOptions{})
	cur.Annotations["team"] = "payments"
	if _, err := c.CoreV1().Secrets("leafsync-system").Update(ctx, cur, metav1.UpdateOptions{FieldManager: "kubectl-annotate"}); err != nil {
		t.Fatal(err)
	}
	second := registrationSecret("leafsync-system", "member-eu-1", "eu-1", []byte("v2"), map[string]string{registration.AnnotationLeafName: "a"})
	if _, err := applySecret(ctx, c, second); err != nil {
		t.Fatal(err)
	}
	cur, _ = c.CoreV1().Secrets("leafsync-system").Get(ctx, "member-eu-1", metav1.GetOptions{})
	if _, ok := cur.Annotations["leafsync.io/not-ready-after"]; ok || cur.Annotations["team"] != "payments" || cur.Annotations[registration.AnnotationLeafName] != "a" {
		t.Errorf("annotations after the second register: %v; want not-ready-after dropped, team and leaf-name kept", cur.Annotations)
	}
}

// The kubelet API's streams reach the member only with --kubelet-api: the
// default role grants no exec into the member's pods.
func TestMemberRulesKubeletAPI(t *testing.T) {
	grants := func(rules []rbacv1.PolicyRule, resource, verb string) bool {
		for _, r := range rules {
			if slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
				return true
			}
		}
		return false
	}
	for _, rv := range [][2]string{{"pods/log", "get"}, {"pods/exec", "create"}, {"pods/attach", "create"}, {"pods/portforward", "create"}} {
		if grants(memberRulesFor(false), rv[0], rv[1]) {
			t.Errorf("without --kubelet-api the member role grants %s %s", rv[1], rv[0])
		}
		if !grants(memberRulesFor(true), rv[0], rv[1]) {
			t.Errorf("with --kubelet-api the member role does not grant %s %s", rv[1], rv[0])
		}
	}
	if len(memberRules) != len(memberRulesFor(false)) {
		t.Errorf("memberRulesFor(true) changed memberRules")
	}
}
