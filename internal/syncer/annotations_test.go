package syncer

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
	"github.com/leafsync/leafsync/internal/syncer/registration"
)

// registration checks the values of podsync's annotations (it cannot
// import podsync): it refuses exactly the values podsync cannot read, with
// podsync's words.
func TestRegistrationChecksPodsyncAnnotations(t *testing.T) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["m"] = &clientcmdapi.Cluster{Server: "https://member.example:6443"}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "t"}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "m", AuthInfo: "u"}
	kc.CurrentContext = "c"
	kubeconfig, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	admission := func(key string) func(string) error {
		return func(v string) error {
			_, err := podmeta.ParseAdmission(map[string]string{key: v})
			return err
		}
	}
	policy := func(v string) error {
		_, err := podmeta.ParsePolicy(v)
		return err
	}
	cases := []struct {
		key    string
		read   func(string) error
		values []string
	}{
		{podmeta.AnnotationMemberServiceAccounts, admission(podmeta.AnnotationMemberServiceAccounts),
			[]string{"", "*", " apps/deployer, ops/backup ,*", "a/b/c", "deployer", "apps/Not_A_Name", "/x", "kube-system/"}},
		{podmeta.AnnotationAllowPrivilegedPods, admission(podmeta.AnnotationAllowPrivilegedPods),
			[]string{"true", "false", "1", "", "yes please"}},
		{podmeta.AnnotationStaleEvictionPolicy, policy, []string{"", "Nope", "retain"}},
		{podmeta.AnnotationPodSecurity, admission(podmeta.AnnotationPodSecurity),
			[]string{"privileged", "baseline", "restricted", "", "Baseline", "none"}},
		{podmeta.AnnotationMemberNamespaces, admission(podmeta.AnnotationMemberNamespaces),
			[]string{"", "apps", " apps, team-x ,", "kube-system", "apps,kube-public", "Team_X", "a/b"}},
	}
	for _, p := range podmeta.Policies {
		cases[2].values = append(cases[2].values, string(p))
	}
	for _, c := range cases {
		for _, v := range c.values {
			s := &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: "s", Labels: map[string]string{registration.LabelCluster: "east"},
					Annotations: map[string]string{c.key: v}},
				Data: map[string][]byte{registration.KeyKubeconfig: kubeconfig},
			}
			_, got := registration.Parse(s, registration.Policy{})
			want := c.read(v)
			if (got == nil) != (want == nil) || (want != nil && !strings.Contains(got.Error(), want.Error())) {
				t.Errorf("%s=%q: registration says %v, podsync %v", c.key, v, got, want)
			}
		}
	}
}
