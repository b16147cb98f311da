// Package registration turns a registration Secret into a validated member
// cluster spec: the cluster name from the leafsync.io/cluster label, the
// kubeconfig under key "kubeconfig" (checked for anything that would run a
// command or read a file inside leafsync's pod BEFORE a rest.Config is built),
// and the per-cluster options carried by leafsync.io/ annotations.
//
// Parse does no network I/O; it is safe to call from a reconciler.
package registration

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/leafsync/leafsync/hysteresis"
)

// Well-known names of the registration contract.
const (
	// LabelCluster marks a Secret as a registration; its value is the
	// member cluster's name (a DNS-1123 label).
	LabelCluster = "leafsync.io/cluster"
	// KeyKubeconfig is the Secret data key holding the member's kubeconfig.
	KeyKubeconfig = "kubeconfig"
	// Finalizer keeps a registration Secret until leafsync has removed
	// everything it created for the member.
	Finalizer = "leafsync.io/cleanup"
	// AnnotationPrefix is the prefix of every leafsync annotation.
	AnnotationPrefix = "leafsync.io/"
	// LeafNamePrefix is prepended to the cluster name for the default leaf
	// node name.
	LeafNamePrefix = "leaf-"
)

// Reasons are the CamelCase reasons of registration problems. They appear
// as Event reasons and in the leafsync.io/status-reason annotation;
// exported are those other packages compare Error.Reason with.
const (
	ReasonInvalidClusterName     = "InvalidClusterName"
	ReasonMissingKubeconfig      = "MissingKubeconfig"
	ReasonInvalidKubeconfig      = "InvalidKubeconfig"
	reasonContextNotFound        = "ContextNotFound"
	reasonClusterEntryNotFound   = "ClusterEntryNotFound"
	reasonUserEntryNotFound      = "UserEntryNotFound"
	reasonInvalidServerURL       = "InvalidServerURL"
	ReasonExecAuthRefused        = "ExecAuthRefused"
	ReasonAuthProviderRefused    = "AuthProviderRefused"
	reasonFileReferenceRefused   = "FileReferenceRefused"
	reasonInsecureTLSRefused     = "InsecureTLSRefused"
	reasonPlaintextServerRefused = "PlaintextServerRefused"
	reasonInvalidTLSData         = "InvalidTLSData"
	ReasonInvalidAnnotation      = "InvalidAnnotation"
)

// Error is a registration problem: a CamelCase Reason for machines and a
// Message for people that says what is wrong and what to do about it.
type Error struct {
	Reason  string
	Message string
}

func (e *Error) Error() string { return e.Reason + ": " + e.Message }

func errorf(reason, format string, args ...any) *Error {
	return &Error{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// Policy holds the fleet-wide switches that loosen the kubeconfig checks.
// Both default to false: a registration Secret can then neither run a
// command nor read a file inside leafsync's pod.
type Policy struct {
	// AllowExecAuth permits `exec` and `auth-provider` users.
	AllowExecAuth bool
	// AllowFileReferences permits certificate-authority, client-certificate,
	// client-key and tokenFile paths.
	AllowFileReferences bool
	// Thresholds, when set, are the fleet's hysteresis settings: the
	// cluster's effective thresholds (fleet defaults, the config file's
	// entry for the cluster, then the Secret's annotations) must validate.
	Thresholds *hysteresis.FleetConfig
}

// Spec is a validated registration.
type Spec struct {
	// Cluster is the member cluster's name (the leafsync.io/cluster label).
	Cluster string
	// Secret identifies the registration Secret.
	Secret types.NamespacedName
	// SecretUID is the UID of the registration Secret.
	SecretUID types.UID
	// LeafName is the name of the member's leaf node in the host.
	LeafName string
	// Context is the kubeconfig context in use.
	Context string
	// Server is the member API server URL.
	Server string
	// AllowInsecureTLS is true when the Secret allowed insecure-skip-tls-verify
	// or a plain http:// server.
	AllowInsecureTLS bool
	// Overrides are the per-cluster hysteresis thresholds from annotations.
	Overrides hysteresis.Overrides
	// RawOverrides are the override annotations, keyed by lowerCamel
	// threshold name, as given.
	RawOverrides map[string]string
	// Annotations holds every leafsync.io/ annotation of the Secret (full
	// keys), for options that other components own.
	Annotations map[string]string
	// RESTConfig connects to the member. It has no timeouts, rate limits or
	// transport wrappers yet: the member runtime adds those. Never nil.
	RESTConfig *rest.Config
	// ConnectionHash changes whenever anything that requires a reconnect
	// changes (kubeconfig, context, TLS policy).
	ConnectionHash string
}

// Parse validates a registration Secret and returns its Spec, or an *Error.
// It does no network I/O and reads no files unless policy allows file
// references.
func Parse(secret *corev1.Secret, policy Policy) (*Spec, error) {
	cluster := secret.Labels[LabelCluster]
	if msgs := validation.IsDNS1123Label(cluster); len(msgs) > 0 {
		return nil, errorf(ReasonInvalidClusterName,
			"label %s=%q is not a valid cluster name (%s); set it to a DNS-1123 label: lower-case letters, digits and '-', at most 63 characters",
			LabelCluster, cluster, strings.Join(msgs, "; "))
	}
	spec := &Spec{
		Cluster:   cluster,
		Secret:    types.NamespacedName{Namespace: secret.Namespace, Name: secret.Name},
		SecretUID: secret.UID,
	}
	if err := parseAnnotations(secret.Annotations, spec); err != nil {
		return nil, err
	}
	if policy.Thresholds != nil {
		eff := policy.Thresholds.Clusters[cluster].Merge(spec.Overrides).Apply(policy.Thresholds.Config)
		if err := eff.Validate(); err != nil && len(spec.RawOverrides) > 0 {
			return nil, errorf(ReasonInvalidAnnotation,
				"with the threshold annotations %v the cluster's thresholds are inconsistent: %v; fix the annotations (see docs/annotations.md)", spec.RawOverrides, err)
		}
	}

	data, ok := secret.Data[KeyKubeconfig]
	if !ok || len(data) == 0 {
		return nil, errorf(ReasonMissingKubeconfig,
			"Secret %s/%s has no (or an empty) data key %q; put the member cluster's kubeconfig there (`leafsync register` does this)",
			secret.Namespace, secret.Name, KeyKubeconfig)
	}
	kc, err := clientcmd.Load(data)
	if err != nil {
		return nil, errorf(ReasonInvalidKubeconfig,
			"data key %q is not a parsable kubeconfig: %v; check the YAML (e.g. `kubectl config view --kubeconfig FILE`)", KeyKubeconfig, err)
	}
	contextName := spec.Annotations[annotationContext]
	if contextName == "" {
		contextName = kc.CurrentContext
	}
	if contextName == "" {
		if len(kc.Contexts) != 1 {
			return nil, errorf(reasonContextNotFound,
				"the kubeconfig has no current-context and %d contexts; set current-context in the kubeconfig or the annotation %s", len(kc.Contexts), annotationContext)
		}
		for name := range kc.Contexts {
			contextName = name
		}
	}
	kctx, ok := kc.Contexts[contextName]
	if !ok || kctx == nil {
		return nil, errorf(reasonContextNotFound,
			"context %q is not defined in the kubeconfig (contexts: %s); fix current-context or the annotation %s", contextName, keys(kc.Contexts), annotationContext)
	}
	kcluster, ok := kc.Clusters[kctx.Cluster]
	if !ok || kcluster == nil {
		return nil, errorf(reasonClusterEntryNotFound,
			"context %q names cluster %q, which is not defined in the kubeconfig; add it under clusters", contextName, kctx.Cluster)
	}
	var kuser *clientcmdapi.AuthInfo
	if kctx.AuthInfo != "" {
		kuser, ok = kc.AuthInfos[kctx.AuthInfo]
		if !ok || kuser == nil {
			return nil, errorf(reasonUserEntryNotFound,
				"context %q names user %q, which is not defined in the kubeconfig; add it under users", contextName, kctx.AuthInfo)
		}
	}
	spec.Context = contextName
	spec.Server = kcluster.Server

	if err := checkSecurity(kcluster, kuser, policy, spec.AllowInsecureTLS); err != nil {
		return nil, err
	}

	// Only the checked context goes into the client config, so nothing else
	// in the kubeconfig can influence the connection.
	minimal := clientcmdapi.NewConfig()
	minimal.Clusters[kctx.Cluster] = kcluster
	if kuser != nil {
		minimal.AuthInfos[kctx.AuthInfo] = kuser
	}
	minimal.Contexts[contextName] = kctx
	minimal.CurrentContext = contextName
	restCfg, err := clientcmd.NewDefaultClientConfig(*minimal, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, errorf(ReasonInvalidKubeconfig, "cannot build a client from context %q: %v; fix the kubeconfig", contextName, err)
	}
	if _, err := rest.TLSConfigFor(restCfg); err != nil {
		return nil, errorf(reasonInvalidTLSData,
			"the certificate data of context %q is unusable: %v; re-export the kubeconfig with valid base64 PEM in certificate-authority-data, client-certificate-data and client-key-data", contextName, err)
	}
	spec.RESTConfig = restCfg

	h := sha256.New()
	h.Write(data)
	fmt.Fprintf(h, "\x00%s\x00%t", contextName, spec.AllowInsecureTLS)
	spec.ConnectionHash = hex.EncodeToString(h.Sum(nil))[:16]
	return spec, nil
}

// checkSecurity refuses what would run a command or read a file inside
// leafsync's pod, and TLS verification being off, unless allowed. It reports
// every violation at once, under the reason of the first.
func checkSecurity(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo, policy Policy, allowInsecure bool) error {
	var problems []*Error
	add := func(reason, format string, args ...any) { problems = append(problems, errorf(reason, format, args...)) }

	if c.Server == "" {
		add(reasonInvalidServerURL, "the cluster entry has no server URL; set clusters[].cluster.server to the member API server, e.g. https://member.example:6443")
	} else if su, err := url.Parse(c.Server); err != nil || su.Host == "" || (su.Scheme != "https" && su.Scheme != "http") {
		add(reasonInvalidServerURL, "server %q is not an https:// URL with a host; set clusters[].cluster.server to the member API server, e.g. https://member.example:6443", c.Server)
	} else if su.Scheme == "http" && !allowInsecure {
		add(reasonPlaintextServerRefused, "server %q is plain http, which sends credentials unencrypted; use the https endpoint, or annotate the Secret %s=\"true\" if this is deliberate", c.Server, AnnotationAllowInsecureTLS)
	}
	if c.InsecureSkipTLSVerify && !allowInsecure {
		add(reasonInsecureTLSRefused, "the cluster entry sets insecure-skip-tls-verify, so the member's identity would not be checked; put the member's CA in certificate-authority-data instead, or annotate the Secret %s=\"true\" to accept the risk for this cluster", AnnotationAllowInsecureTLS)
	}
	if !policy.AllowFileReferences {
		const fix = "inline the content instead (the *-data fields, or token), e.g. `kubectl config view --minify --flatten`; leafsync --allow-file-references permits paths fleet-wide"
		if c.CertificateAuthority != "" {
			add(reasonFileReferenceRefused, "certificate-authority refers to file %q inside leafsync's pod; %s", c.CertificateAuthority, fix)
		}
		if u != nil {
			if u.ClientCertificate != "" {
				add(reasonFileReferenceRefused, "client-certificate refers to file %q inside leafsync's pod; %s", u.ClientCertificate, fix)
			}
			if u.ClientKey != "" {
				add(reasonFileReferenceRefused, "client-key refers to file %q inside leafsync's pod; %s", u.ClientKey, fix)
			}
			if u.TokenFile != "" {
				add(reasonFileReferenceRefused, "tokenFile refers to file %q inside leafsync's pod; %s", u.TokenFile, fix)
			}
		}
	}
	if u != nil && !policy.AllowExecAuth {
		if u.Exec != nil {
			add(ReasonExecAuthRefused, "the user entry uses an exec credential plugin (%q), which would run a command inside leafsync's pod; use a ServiceAccount token or client certificate (`leafsync register --create-service-account` sets one up), or start leafsync with --allow-exec-auth", u.Exec.Command)
		}
		if u.AuthProvider != nil {
			add(ReasonAuthProviderRefused, "the user entry uses auth-provider %q, which runs provider code inside leafsync's pod; use a ServiceAccount token or client certificate (`leafsync register --create-service-account` sets one up), or start leafsync with --allow-exec-auth", u.AuthProvider.Name)
		}
	}
	switch len(problems) {
	case 0:
		return nil
	case 1:
		return problems[0]
	}
	msgs := make([]string, len(problems))
	for i, p := range problems {
		msgs[i] = p.Message
	}
	return &Error{Reason: problems[0].Reason, Message: fmt.Sprintf("%d problems: %s", len(problems), strings.Join(msgs, " | "))}
}

func keys[V any](m map[string]V) string {
	if len(m) == 0 {
		return "none"
	}
	return strings.Join(sortedKeys(m), ", ")
}
