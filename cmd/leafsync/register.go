package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/leafsync/leafsync/internal/syncer/config"
	"github.com/leafsync/leafsync/internal/syncer/registration"
)

// Names of what `register --create-service-account` creates in the member.
const (
	memberNamespace   = "leafsync-system"
	memberSA          = "leafsync"
	memberTokenSecret = "leafsync-token"
	memberRBACName    = "leafsync:member"
	managedByLabel    = "app.kubernetes.io/managed-by"
	// fieldManager owns what register applies, in the member and the host.
	fieldManager = "leafsync"
)

// memberRules is the least leafsync needs in a member: read Nodes (leaf
// capacity), run pods (create/update/delete, their status, evictions,
// resizes, ephemeral containers),
// create namespaces for them, the ConfigMaps and Secrets they mount and
// the Services of their namespaces (copies of the host's),
// plus the health endpoints the prober reads. The same rules cover the
// member's identity (get of namespace kube-system, whose UID leafsync
// pins) and this host's claim (a ConfigMap in leafsync-system).
var memberRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
	{APIGroups: []string{""}, Resources: []string{"pods/status"}, Verbs: []string{"get", "update", "patch"}},
	{APIGroups: []string{""}, Resources: []string{"pods/eviction"}, Verbs: []string{"create"}},
	{APIGroups: []string{""}, Resources: []string{"pods/resize"}, Verbs: []string{"update"}},
	{APIGroups: []string{""}, Resources: []string{"pods/ephemeralcontainers"}, Verbs: []string{"update"}},
	// patch: the Pod Security level of a namespace leafsync created follows the registration's.
	{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch", "create", "patch"}},
	{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets", "services"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
	// The member claims of host claims provisioned into the member
	// (internal/syncer/volumes): made before their first pod, deleted
	// after the host claim; never listed.
	{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"get", "create", "delete"}},
	// The member's Events about pods, read to mirror those about
	// leafsync's member pods onto their host pods (podsync/eventmirror).
	{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"list", "watch"}},
	{NonResourceURLs: []string{"/readyz", "/livez", "/healthz"}, Verbs: []string{"get"}},
}

// kubeletAPIRules are what leafsync's kubelet API (kubeletAPI.enabled)
// asks of the member for `kubectl logs`, `exec`, `attach`, `port-forward`
// and `debug` on a leaf's pods: granted only with --kubelet-api, since exec
// into the member's pods is the member owner's to give. A WebSocket stream
// opens with a GET, which the API server authorises as get or create
// depending on its version: both are granted.
var kubeletAPIRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"pods/log"}, Verbs: []string{"get"}},
	{APIGroups: []string{""}, Resources: []string{"pods/exec", "pods/attach", "pods/portforward"}, Verbs: []string{"get", "create"}},
}

// memberRulesFor is memberRules, plus kubeletAPIRules when the host serves
// the leaves' kubelet API.
func memberRulesFor(kubeletAPI bool) []rbacv1.PolicyRule {
	if !kubeletAPI {
		return memberRules
	}
	return append(slices.Clone(memberRules), kubeletAPIRules...)
}

type registerOptions struct {
	memberKubeconfig string
	memberContext    string
	kubeconfig       string
	hostContext      string
	namespace        string
	cluster          string
	secretName       string
	leafName         string
	annotations      []string
	createSA         bool
	kubeletAPI       bool
	allowInsecureTLS bool
	dryRun           bool
	waitTimeout      time.Duration
}

func newRegisterCommand() *cobra.Command {
	o := registerOptions{}
	cmd := &cobra.Command{
		Use:   "register --cluster NAME",
		Short: "Register a member cluster: write its kubeconfig Secret into the host",
		Long: `register writes the registration Secret of a member cluster into the host
cluster: label leafsync.io/cluster=NAME, the member's kubeconfig under key
"kubeconfig", and leafsync.io/ annotations (see docs/annotations.md).

By default the kubeconfig is the member context's own (flattened: files are
inlined). It must pass leafsync's security check: no exec or auth-provider
users, no file references, TLS verification on. With --create-service-account,
register instead creates in the member a ServiceAccount leafsync in namespace
leafsync-system, a ClusterRole with the least leafsync needs there, and a
long-lived token Secret, and registers a kubeconfig with that token and the
member's CA: the recommended way, and the one that works for clusters whose
users authenticate through exec plugins (EKS, GKE, AKS…).

--dry-run changes nothing anywhere: it prints the Secret (and, with
--create-service-account, the member objects it would create, with a
placeholder token) as YAML.`,
		Example: `  # Register the current context of ~/.kube/config as member "eu-1"
  leafsync register --cluster eu-1 --member-context eu-1 --create-service-account

  # Print the Secret instead of creating it
  leafsync register --cluster eu-1 --member-kubeconfig eu-1.yaml --dry-run > eu-1-secret.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.cluster, "cluster", "", "name of the member cluster (a DNS-1123 label); required")
	f.StringVar(&o.memberKubeconfig, "member-kubeconfig", "", "kubeconfig of the member cluster (default: $KUBECONFIG or ~/.kube/config)")
	f.StringVar(&o.memberContext, "member-context", "", "context of the member kubeconfig to use (default: its current-context)")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the host cluster (default: $KUBECONFIG or ~/.kube/config)")
	f.StringVar(&o.hostContext, "context", "", "context of the host kubeconfig to use (default: its current-context)")
	f.StringVar(&o.namespace, "namespace", config.Default().Namespace, "leafsync's namespace in the host, where registration Secrets live")
	f.StringVar(&o.secretName, "secret-name", "", "name of the registration Secret (default: member-<cluster>)")
	f.StringVar(&o.leafName, "leaf-name", "", "name of the member's leaf node in the host (default: leaf-<cluster>)")
	f.StringArrayVar(&o.annotations, "annotation", nil, "extra leafsync.io/ annotation KEY=VALUE for the Secret, e.g. not-ready-after=120s (repeatable; the leafsync.io/ prefix may be omitted)")
	f.BoolVar(&o.createSA, "create-service-account", false, "create a ServiceAccount with least-privilege RBAC in the member and register its token instead of your own credentials")
	f.BoolVar(&o.kubeletAPI, "kubelet-api", false, "with --create-service-account: also let leafsync read pod logs and open exec, attach and port-forward streams in the member (needed when the host runs leafsync with kubeletAPI.enabled)")
	f.BoolVar(&o.allowInsecureTLS, "allow-insecure-tls", false, "accept a member kubeconfig with insecure-skip-tls-verify (sets leafsync.io/allow-insecure-tls on the Secret)")
	f.BoolVar(&o.dryRun, "dry-run", false, "print the Secret as YAML instead of creating it; change nothing")
	f.DurationVar(&o.waitTimeout, "wait-timeout", time.Minute, "how long to wait for the member's token controller to fill the token Secret")
	_ = cmd.MarkFlagRequired("cluster")
	return cmd
}

func (o *registerOptions) run(ctx context.Context, out, errOut io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if msgs := validation.IsDNS1123Label(o.cluster); len(msgs) > 0 {
		return fmt.Errorf("--cluster %q is not a valid cluster name: %s", o.cluster, strings.Join(msgs, "; "))
	}
	if o.kubeletAPI && !o.createSA {
		return fmt.Errorf("--kubelet-api sets up the ServiceAccount --create-service-account creates; with your own credentials, give them pods/log, pods/exec, pods/attach and pods/portforward yourself")
	}
	annotations, err := o.secretAnnotations()
	if err != nil {
		return err
	}

	memberLoader := loader(o.memberKubeconfig, o.memberContext)
	raw, err := memberLoader.RawConfig()
	if err != nil {
		return fmt.Errorf("reading the member kubeconfig: %w", err)
	}
	contextName := o.memberContext
	if contextName == "" {
		contextName = raw.CurrentContext
	}
	if _, ok := raw.Contexts[contextName]; !ok {
		return fmt.Errorf("member kubeconfig has no context %q (pass --member-context)", contextName)
	}

	var kubeconfig []byte
	var memberObjects []applyObject
	switch {
	case o.createSA:
		memberCfg, err := memberLoader.ClientConfig()
		if err != nil {
			return fmt.Errorf("member cluster config: %w", err)
		}
		server, ca, serverName, err := memberEndpoint(memberCfg)
		if err != nil {
			return err
		}
		if o.dryRun {
			memberObjects = memberObjectsFor(memberNamespace, o.kubeletAPI)
			fmt.Fprintf(errOut, "dry run: the member objects below are not created, and the token in the Secret is a placeholder\n")
			kubeconfig, err = tokenKubeconfig(o.cluster, server, ca, serverName, "<token of ServiceAccount "+memberNamespace+"/"+memberSA+">")
			if err != nil {
				return err
			}
			break
		}
		member, err := newClient(withUserAgent(memberCfg))
		if err != nil {
			return err
		}
		token, saCA, err := setupServiceAccount(ctx, member, memberNamespace, o.kubeletAPI, o.waitTimeout, errOut)
		if err != nil {
			return err
		}
		if len(ca) == 0 {
			ca = saCA
		}
		kubeconfig, err = tokenKubeconfig(o.cluster, server, ca, serverName, string(token))
		if err != nil {
			return err
		}
	default:
		kubeconfig, err = flattenedKubeconfig(raw, contextName)
		if err != nil {
			return err
		}
	}

	secret := registrationSecret(o.namespace, o.secretNameOrDefault(), o.cluster, kubeconfig, annotations)
	// The Secret must pass exactly the check leafsync applies.
	if _, err := registration.Parse(secret, registration.Policy{}); err != nil {
		var re *registration.Error
		if errors.As(err, &re) && (re.Reason == registration.ReasonExecAuthRefused || re.Reason == registration.ReasonAuthProviderRefused) {
			return fmt.Errorf("leafsync would refuse this kubeconfig: %w\n(use --create-service-account to register a ServiceAccount token instead)", err)
		}
		return fmt.Errorf("leafsync would refuse this kubeconfig: %w", err)
	}

	if o.dryRun {
		for _, obj := range memberObjects {
			if err := printYAML(out, obj); err != nil {
				return err
			}
		}
		return printYAML(out, secret)
	}

	hostCfg, err := loader(o.kubeconfig, o.hostContext).ClientConfig()
	if err != nil {
		return fmt.Errorf("host cluster config: %w", err)
	}
	host, err := newClient(withUserAgent(hostCfg))
	if err != nil {
		return err
	}
	created, err := applySecret(ctx, host, secret)
	if err != nil {
		return err
	}
	verb := "updated"
	if created {
		verb = "created"
	}
	fmt.Fprintf(out, "Secret %s/%s %s: member cluster %q registered. Follow it with:\n  kubectl -n %s get secret %s -o jsonpath='{.metadata.annotations.leafsync\\.io/status}'\n",
		secret.Namespace, secret.Name, verb, o.cluster, secret.Namespace, secret.Name)
	return nil
}

func (o *registerOptions) secretNameOrDefault() string {
	if o.secretName != "" {
		return o.secretName
	}
	return "member-" + o.cluster
}

func (o *registerOptions) secretAnnotations() (map[string]string, error) {
	a := map[string]string{}
	if o.leafName != "" {
		a[registration.AnnotationLeafName] = o.leafName
	}
	if o.allowInsecureTLS {
		a[registration.AnnotationAllowInsecureTLS] = "true"
	}
	for _, kv := range o.annotations {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--annotation %q: want KEY=VALUE", kv)
		}
		if !strings.HasPrefix(k, registration.AnnotationPrefix) {
			k = registration.AnnotationPrefix + k
		}
		a[k] = v
	}
	if unknown := registration.UnknownAnnotations(a); len(unknown) > 0 {
		return nil, fmt.Errorf("unknown annotations %v (see docs/annotations.md)", unknown)
	}
	return a, nil
}

func loader(path, context string) clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if path != "" {
		rules.ExplicitPath = path
	}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context})
}

func withUserAgent(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "leafsync-register/" + version
	return cfg
}

// memberEndpoint returns the member's server URL, the CA that verifies it
// (inline, or read from the file the user's kubeconfig names; empty if the
// user's kubeconfig skips verification) and the TLS server name.
func memberEndpoint(cfg *rest.Config) (server string, ca []byte, serverName string, err error) {
	ca = cfg.CAData
	if len(ca) == 0 && cfg.CAFile != "" {
		if ca, err = os.ReadFile(cfg.CAFile); err != nil {
			return "", nil, "", fmt.Errorf("reading the member CA: %w", err)
		}
	}
	return cfg.Host, ca, cfg.ServerName, nil
}

// flattenedKubeconfig keeps only the given context and inlines every file
// it references.
func flattenedKubeconfig(raw clientcmdapi.Config, contextName string) ([]byte, error) {
	cfg := raw.DeepCopy()
	cfg.CurrentContext = contextName
	if err := clientcmdapi.MinifyConfig(cfg); err != nil {
		return nil, fmt.Errorf("member kubeconfig: %w", err)
	}
	if err := clientcmdapi.FlattenConfig(cfg); err != nil {
		return nil, fmt.Errorf("member kubeconfig: inlining files: %w", err)
	}
	for _, u := range cfg.AuthInfos {
		if u.TokenFile != "" && u.Token == "" {
			data, err := os.ReadFile(u.TokenFile)
			if err != nil {
				return nil, fmt.Errorf("member kubeconfig: reading tokenFile: %w", err)
			}
			u.Token = strings.TrimSpace(string(data))
		}
		u.TokenFile = ""
	}
	cfg.Preferences = clientcmdapi.Preferences{}
	return clientcmd.Write(*cfg)
}

// tokenKubeconfig is a kubeconfig with everything inline: it passes the
// registration security check as is.
func tokenKubeconfig(cluster, server string, ca []byte, serverName, token string) ([]byte, error) {
	if len(ca) == 0 {
		return nil, errors.New("no CA for the member API server: neither your kubeconfig nor the ServiceAccount token Secret has one")
	}
	cfg := clientcmdapi.NewConfig()
	c := clientcmdapi.NewCluster()
	c.Server = server
	c.CertificateAuthorityData = ca
	c.TLSServerName = serverName
	u := clientcmdapi.NewAuthInfo()
	u.Token = token
	kctx := clientcmdapi.NewContext()
	kctx.Cluster = cluster
	kctx.AuthInfo = memberSA
	cfg.Clusters[cluster] = c
	cfg.AuthInfos[memberSA] = u
	cfg.Contexts[cluster] = kctx
	cfg.CurrentContext = cluster
	return clientcmd.Write(*cfg)
}

// applyObject is an apply configuration: what register declares of an
// object, applied with server-side apply as fieldManager.
type applyObject interface {
	GetKind() *string
	GetName() *string
}

// memberObjectsFor is what --create-service-account applies in the member
// (and --dry-run prints).
func memberObjectsFor(ns string, kubeletAPI bool) []applyObject {
	labels := map[string]string{managedByLabel: "leafsync"}
	rules := make([]*rbacv1ac.PolicyRuleApplyConfiguration, 0, len(memberRules)+len(kubeletAPIRules))
	for _, r := range memberRulesFor(kubeletAPI) {
		rules = append(rules, rbacv1ac.PolicyRule().WithAPIGroups(r.APIGroups...).WithResources(r.Resources...).
			WithVerbs(r.Verbs...).WithNonResourceURLs(r.NonResourceURLs...))
	}
	return []applyObject{
		corev1ac.Namespace(ns).WithLabels(labels),
		corev1ac.ServiceAccount(memberSA, ns).WithLabels(labels),
		rbacv1ac.ClusterRole(memberRBACName).WithLabels(labels).WithRules(rules...),
		rbacv1ac.ClusterRoleBinding(memberRBACName).WithLabels(labels).
			WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("ClusterRole").WithName(memberRBACName)).
			WithSubjects(rbacv1ac.Subject().WithKind(rbacv1.ServiceAccountKind).WithName(memberSA).WithNamespace(ns)),
		corev1ac.Secret(memberTokenSecret, ns).WithLabels(labels).
			WithAnnotations(map[string]string{corev1.ServiceAccountNameKey: memberSA}).
			WithType(corev1.SecretTypeServiceAccountToken),
	}
}

// setupServiceAccount applies leafsync's ServiceAccount, RBAC and
// long-lived token Secret in the member, waits for the token controller
// to fill the token, and returns the token and the CA it published.
func setupServiceAccount(ctx context.Context, c kubernetes.Interface, ns string, kubeletAPI bool, timeout time.Duration, log io.Writer) (token, ca []byte, err error) {
	for _, obj := range memberObjectsFor(ns, kubeletAPI) {
		if err := applyInMember(ctx, c, obj); err != nil {
			return nil, nil, fmt.Errorf("in the member: %s %s: %w", *obj.GetKind(), *obj.GetName(), err)
		}
	}
	fmt.Fprintf(log, "created ServiceAccount %s/%s with ClusterRole %s in the member; waiting for its token\n", ns, memberSA, memberRBACName)
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		s, err := c.CoreV1().Secrets(ns).Get(ctx, memberTokenSecret, metav1.GetOptions{})
		if err != nil {
			return false, nil // transient; keep polling
		}
		if len(s.Data[corev1.ServiceAccountTokenKey]) == 0 {
			return false, nil
		}
		token, ca = s.Data[corev1.ServiceAccountTokenKey], s.Data[corev1.ServiceAccountRootCAKey]
		return true, nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("the member's token controller did not fill Secret %s/%s within %s (is kube-controller-manager running with its serviceaccount-token controller?): %w",
			ns, memberTokenSecret, timeout, err)
	}
	return token, ca, nil
}

// applyInMember applies one member object, forcing: register owns what it
// declares (a ClusterRole edited by hand gets leafsync's rules back).
func applyInMember(ctx context.Context, c kubernetes.Interface, obj applyObject) error {
	opts := metav1.ApplyOptions{FieldManager: fieldManager, Force: true}
	var err error
	switch o := obj.(type) {
	case *corev1ac.NamespaceApplyConfiguration:
		_, err = c.CoreV1().Namespaces().Apply(ctx, o, opts)
	case *corev1ac.ServiceAccountApplyConfiguration:
		_, err = c.CoreV1().ServiceAccounts(*o.Namespace).Apply(ctx, o, opts)
	case *corev1ac.SecretApplyConfiguration:
		_, err = c.CoreV1().Secrets(*o.Namespace).Apply(ctx, o, opts)
	case *rbacv1ac.ClusterRoleApplyConfiguration:
		_, err = c.RbacV1().ClusterRoles().Apply(ctx, o, opts)
	case *rbacv1ac.ClusterRoleBindingApplyConfiguration:
		_, err = c.RbacV1().ClusterRoleBindings().Apply(ctx, o, opts)
	default:
		err = fmt.Errorf("unexpected object %T", obj)
	}
	return err
}

func registrationSecret(ns, name, cluster string, kubeconfig []byte, annotations map[string]string) *corev1.Secret {
	s := &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns,
			Name:      name,
			Labels:    map[string]string{registration.LabelCluster: cluster},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{registration.KeyKubeconfig: kubeconfig},
	}
	if len(annotations) > 0 {
		s.Annotations = annotations
	}
	return s
}

// applySecret applies the registration Secret: its kubeconfig, cluster
// label and the given annotations (fields others own, such as leafsync's
// status annotations, are kept). A Secret that registers another cluster
// is refused; the resourceVersion it was read at makes that check and the
// apply one step. It reports whether the Secret is new.
func applySecret(ctx context.Context, c kubernetes.Interface, s *corev1.Secret) (bool, error) {
	if _, err := c.CoreV1().Namespaces().Get(ctx, s.Namespace, metav1.GetOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return false, fmt.Errorf("namespace %q does not exist in the host: install leafsync first, or pass --namespace", s.Namespace)
		}
		if !apierrors.IsForbidden(err) { // may read Secrets without reading namespaces
			return false, fmt.Errorf("host: %w", err)
		}
	}
	ac := corev1ac.Secret(s.Name, s.Namespace).WithLabels(s.Labels).WithAnnotations(s.Annotations).
		WithType(s.Type).WithData(s.Data)
	cur, err := c.CoreV1().Secrets(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
	created := apierrors.IsNotFound(err)
	switch {
	case created:
	case err != nil:
		return false, fmt.Errorf("reading Secret %s/%s in the host: %w", s.Namespace, s.Name, err)
	default:
		if other := cur.Labels[registration.LabelCluster]; other != "" && other != s.Labels[registration.LabelCluster] {
			return false, fmt.Errorf("the Secret %s/%s already registers cluster %q; pass --secret-name to use another Secret", s.Namespace, s.Name, other)
		}
		ac.WithResourceVersion(cur.ResourceVersion)
	}
	if _, err := c.CoreV1().Secrets(s.Namespace).Apply(ctx, ac, metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
		return false, fmt.Errorf("applying Secret %s/%s in the host: %w", s.Namespace, s.Name, err)
	}
	return created, nil
}

func printYAML(out io.Writer, obj any) error {
	data, err := yaml.Marshal(obj)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(out, "---\n%s", data); err != nil {
		return err
	}
	return nil
}
