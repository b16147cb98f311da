package registration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func testCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "test-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// kubeconfig builds a one-context kubeconfig; mutate adjusts it.
func kubeconfig(t *testing.T, mutate func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo, cfg *clientcmdapi.Config)) []byte {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	c := clientcmdapi.NewCluster()
	c.Server = "https://member.example:6443"
	c.CertificateAuthorityData = testCA(t)
	u := clientcmdapi.NewAuthInfo()
	u.Token = "secret-token"
	cfg.Clusters["member"] = c
	cfg.AuthInfos["leafsync"] = u
	kctx := clientcmdapi.NewContext()
	kctx.Cluster = "member"
	kctx.AuthInfo = "leafsync"
	cfg.Contexts["member"] = kctx
	cfg.CurrentContext = "member"
	if mutate != nil {
		mutate(c, u, cfg)
	}
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func secret(name, cluster string, kubeconfig []byte, annotations map[string]string) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   "leafsync-system",
			Name:        name,
			UID:         types.UID("uid-" + name),
			Labels:      map[string]string{LabelCluster: cluster},
			Annotations: annotations,
		},
		Data: map[string][]byte{},
	}
	if kubeconfig != nil {
		s.Data[KeyKubeconfig] = kubeconfig
	}
	return s
}

func reasonOf(t *testing.T, err error) string {
	t.Helper()
	if err == nil {
		return ""
	}
	var re *Error
	if !errors.As(err, &re) {
		t.Fatalf("error %v is not a *registration.Error", err)
	}
	return re.Reason
}

func TestParseValid(t *testing.T) {
	s := secret("east", "east", kubeconfig(t, nil), map[string]string{"other.io/x": "y"})
	spec, err := Parse(s, Policy{})
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if spec.Cluster != "east" || spec.LeafName != "leaf-east" || spec.Context != "member" || spec.Server != "https://member.example:6443" {
		t.Errorf("unexpected spec: %+v", spec)
	}
	if spec.RESTConfig == nil || spec.RESTConfig.BearerToken != "secret-token" || spec.RESTConfig.Host != "https://member.example:6443" {
		t.Errorf("unexpected rest config: %+v", spec.RESTConfig)
	}
	if spec.ConnectionHash == "" {
		t.Error("empty connection hash")
	}
	if len(spec.Annotations) != 0 {
		t.Errorf("foreign annotations leaked into spec: %v", spec.Annotations)
	}
}

func TestParseRefusals(t *testing.T) {
	cases := []struct {
		name        string
		cluster     string
		kubeconfig  func(t *testing.T) []byte
		annotations map[string]string
		policy      Policy
		reason      string // "" = accepted
		mention     string // a substring the message must contain
	}{
		{name: "bad cluster name", cluster: "East_1", reason: ReasonInvalidClusterName, mention: "DNS-1123"},
		{name: "empty cluster name", cluster: "", reason: ReasonInvalidClusterName},
		{name: "missing key", kubeconfig: func(*testing.T) []byte { return nil }, reason: ReasonMissingKubeconfig, mention: "leafsync register"},
		{name: "unparsable yaml", kubeconfig: func(*testing.T) []byte { return []byte("clusters: [ {") }, reason: ReasonInvalidKubeconfig},
		{name: "no contexts", kubeconfig: func(*testing.T) []byte { return []byte("apiVersion: v1\nkind: Config\n") }, reason: reasonContextNotFound},
		{name: "unknown current context", kubeconfig: func(t *testing.T) []byte {
			return kubeconfig(t, func(_ *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo, c *clientcmdapi.Config) {
				c.CurrentContext = "nope"
			})
		}, reason: reasonContextNotFound, mention: `"nope"`},
		{name: "context annotation selects missing context", annotations: map[string]string{annotationContext: "other"}, reason: reasonContextNotFound},
		{name: "missing cluster entry", kubeconfig: func(t *testing.T) []byte {
			return kubeconfig(t, func(_ *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo, c *clientcmdapi.Config) {
				delete(c.Clusters, "member")
			})
		}, reason: reasonClusterEntryNotFound},
		{name: "missing user entry", kubeconfig: func(t *testing.T) []byte {
			return kubeconfig(t, func(_ *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo, c *clientcmdapi.Config) {
				delete(c.AuthInfos, "leafsync")
			})
		}, reason: reasonUserEntryNotFound},
		{name: "no server", kubeconfig: func(t *testing.T) []byte {
			return kubeconfig(t, func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo, _ *clientcmdapi.Config) { c.Server = "" })
		}, reason: reasonInvalidServerURL},
		{name: "server not a URL", kubeconfig: func(t *testing.T) []byte {
			return kubeconfig(t, func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo, _ *clientcmdapi.Config) { c.Server = "ftp://x" })
		}, reason: reasonInvalidServerURL},
		{name: "exec", kubeconfig: func(t *testing.T) []byte {
			return kubeconfig(t, func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo, _ *clientcmdapi.Config) {
				u.Token = ""
				u.Exec = &clientcmdapi.ExecConfig{Command: "aws", APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
			})
		}, reason: ReasonExecAuthRefused, mention: "--allow-exec-auth"},
		{name: "exec allowed by policy", policy: Policy{AllowExecAuth: true}, kubeconfig: func(t *testing.T) []byte {
			return kubeconfig(t, func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo, _ *clientcmdapi.Config) {
				u.Token = ""
				u.Exec = &clientcmdapi.ExecConfig{Command: "aws", APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
			})
		}},
		{name: "auth-provider", kubeconfig: func(t *testing.T) []byte {
			return kubeconfig(t, func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo, _ *clientcmdapi.Config) {
				u.AuthProvider = &clientcmdapi.AuthProviderConfig{Name: "oidc"}
			})
		}, reason: ReasonAuthProviderRefused},
		{name: "certificate-authority file", kubeconfig: func(t *testing.T) []byte {
			return kubeconfig(t, func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo, _ *clientcmdapi.Config) {
				c.CertificateAuthorityData = nil
				c.CertificateAuthority = "/etc/ssl/ca.crt"
			})
		}, reason: reasonFileReferenceRefused, mention: "/etc/ssl/ca.crt"},
		{name: "client-certificate file", kubeconfig: func(t *testing.T) []byte {
			return kubeconfig(t, func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo, _ *clientcmdapi.Config) {
				u.ClientCertificate = "/var/run/secrets/cert"
			})
		}, reason: reasonFileReferenceRefused, mention: "client-certificate"},
		{name: "client-key file", kubeconfig: func(t *testing.T) []byte {
			return kubeconfig(t, func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo, _ *clientcmdapi.Config) {
				u.ClientKey = "/var/run/secrets/key"
			})
		}, reason: reasonFileReferenceRefused, mention: "client-key"},
		{name: "tokenFile", kubeconfig: func(t *testing.T) []byte {
			return kubeconfig(t, func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo, _ *clientcmdapi.Config) {
				u.Token = ""
				u.TokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"
			})
		}, reason: reasonFileReferenceRefused, mention: "tokenFile"},
		{name: "insecure-skip-tls-verify", kubeconfig: func(t *testing.T) []byte {
			return kubeconfig(t, func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo, _ *clientcmdapi.Config) {
				c.CertificateAuthorityData = nil
				c.InsecureSkipTLSVerify = true
			})
		}, reason: reasonInsecureTLSRefused, mention: AnnotationAllowInsecureTLS},
		{name: "insecure-skip-tls-verify allowed by annotation", annotations: map[string]string{AnnotationAllowInsecureTLS: "true"}, kubeconfig: func(t *testing.T) []byte {
			return kubeconfig(t, func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo, _ *clientcmdapi.Config) {
				c.CertificateAuthorityData = nil
				c.InsecureSkipTLSVerify = true
			})
		}},
		{name: "insecure-skip-tls-verify not allowed by policy flags", policy: Policy{AllowExecAuth: true, AllowFileReferences: true}, kubeconfig: func(t *testing.T) []byte {
			return kubeconfig(t, func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo, _ *clientcmdapi.Config) {
				c.CertificateAuthorityData = nil
				c.InsecureSkipTLSVerify = true
			})
		}, reason: reasonInsecureTLSRefused},
		{name: "plain http", kubeconfig: func(t *testing.T) []byte {
			return kubeconfig(t, func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo, _ *clientcmdapi.Config) {
				c.CertificateAuthorityData = nil
				c.Server = "http://member.example:8080"
			})
		}, reason: reasonPlaintextServerRefused},
		{name: "bad CA data", kubeconfig: func(t *testing.T) []byte {
			return kubeconfig(t, func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo, _ *clientcmdapi.Config) {
				c.CertificateAuthorityData = []byte("not a pem")
			})
		}, reason: reasonInvalidTLSData},
		{name: "refused fields in another context do not matter", kubeconfig: func(t *testing.T) []byte {
			return kubeconfig(t, func(_ *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo, c *clientcmdapi.Config) {
				evil := clientcmdapi.NewAuthInfo()
				evil.Exec = &clientcmdapi.ExecConfig{Command: "sh", APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
				c.AuthInfos["evil"] = evil
				other := clientcmdapi.NewContext()
				other.Cluster = "member"
				other.AuthInfo = "evil"
				c.Contexts["other"] = other
			})
		}},
		{name: "refused fields in the selected context", annotations: map[string]string{annotationContext: "other"}, kubeconfig: func(t *testing.T) []byte {
			return kubeconfig(t, func(_ *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo, c *clientcmdapi.Config) {
				evil := clientcmdapi.NewAuthInfo()
				evil.Exec = &clientcmdapi.ExecConfig{Command: "sh", APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
				c.AuthInfos["evil"] = evil
				other := clientcmdapi.NewContext()
				other.Cluster = "member"
				other.AuthInfo = "evil"
				c.Contexts["other"] = other
			})
		}, reason: ReasonExecAuthRefused},
		{name: "several problems are all reported", kubeconfig: func(t *testing.T) []byte {
			return kubeconfig(t, func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo, _ *clientcmdapi.Config) {
				c.CertificateAuthorityData = nil
				c.InsecureSkipTLSVerify = true
				u.TokenFile = "/tmp/token"
			})
		}, reason: reasonInsecureTLSRefused, mention: "tokenFile"},
		{name: "bad leaf name", annotations: map[string]string{AnnotationLeafName: "Leaf_East"}, reason: ReasonInvalidAnnotation, mention: AnnotationLeafName},
		{name: "bad allow-insecure-tls", annotations: map[string]string{AnnotationAllowInsecureTLS: "yes please"}, reason: ReasonInvalidAnnotation, mention: AnnotationAllowInsecureTLS},
		{name: "bad threshold", annotations: map[string]string{"leafsync.io/not-ready-after": "soon"}, reason: ReasonInvalidAnnotation, mention: "leafsync.io/not-ready-after"},
		{name: "empty context annotation", annotations: map[string]string{annotationContext: ""}, reason: ReasonInvalidAnnotation},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cluster := tc.cluster
			if cluster == "" && tc.reason != ReasonInvalidClusterName {
				cluster = "east"
			}
			var kc []byte
			if tc.kubeconfig != nil {
				kc = tc.kubeconfig(t)
			} else {
				kc = kubeconfig(t, nil)
			}
			spec, err := Parse(secret("s", cluster, kc, tc.annotations), tc.policy)
			if got := reasonOf(t, err); got != tc.reason {
				t.Fatalf("reason = %q, want %q (err: %v)", got, tc.reason, err)
			}
			if err == nil {
				if spec == nil || spec.RESTConfig == nil {
					t.Fatal("accepted without a spec")
				}
				return
			}
			msg := err.(*Error).Message
			if tc.mention != "" && !strings.Contains(msg, tc.mention) {
				t.Errorf("message %q does not mention %q", msg, tc.mention)
			}
			if len(msg) < 40 {
				t.Errorf("message %q is too short to tell a person what to do", msg)
			}
		})
	}
}

func TestParseFileReferencesAllowedByPolicy(t *testing.T) {
	// With the policy flag, paths are accepted (and then read, as kubectl does).
	kc := kubeconfig(t, func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo, _ *clientcmdapi.Config) {
		u.Token = ""
		u.TokenFile = "/dev/null"
	})
	if _, err := Parse(secret("s", "east", kc, nil), Policy{AllowFileReferences: true}); err != nil {
		t.Fatalf("Parse: %v", err)
	}
}

func TestParseSingleContextWithoutCurrentContext(t *testing.T) {
	kc := kubeconfig(t, func(_ *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo, c *clientcmdapi.Config) { c.CurrentContext = "" })
	spec, err := Parse(secret("s", "east", kc, nil), Policy{})
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if spec.Context != "member" {
		t.Errorf("context = %q", spec.Context)
	}
}

func TestConnectionHash(t *testing.T) {
	kc := kubeconfig(t, nil)
	a, err := Parse(secret("s", "east", kc, nil), Policy{})
	if err != nil {
		t.Fatal(err)
	}
	// Annotation-only changes (thresholds, leaf name) need no reconnect.
	b, err := Parse(secret("s", "east", kc, map[string]string{"leafsync.io/leaf-name": "x", "leafsync.io/not-ready-after": "2m"}), Policy{})
	if err != nil {
		t.Fatal(err)
	}
	if a.ConnectionHash != b.ConnectionHash {
		t.Error("annotation-only change altered the connection hash")
	}
	// A rotated credential does.
	kc2 := kubeconfig(t, func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo, _ *clientcmdapi.Config) { u.Token = "rotated" })
	c, err := Parse(secret("s", "east", kc2, nil), Policy{})
	if err != nil {
		t.Fatal(err)
	}
	if a.ConnectionHash == c.ConnectionHash {
		t.Error("credential rotation kept the connection hash")
	}
}
