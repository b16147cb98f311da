package podmeta

import "testing"

const (
	testCluster = "member-a"
	testHost    = "host-a"
)

func TestOwnedBy(t *testing.T) {
	for _, c := range []struct {
		name   string
		labels map[string]string
		host   string
		want   bool
	}{
		{"this host's", map[string]string{LabelManaged: "true", LabelCluster: testCluster, LabelHost: testHost}, testHost, true},
		{"another host's, same cluster name", map[string]string{LabelManaged: "true", LabelCluster: testCluster, LabelHost: "host-b"}, testHost, false},
		{"an older leafsync's (no host label): the claim holder's", map[string]string{LabelManaged: "true", LabelCluster: testCluster}, testHost, true},
		{"host identity not known yet", map[string]string{LabelManaged: "true", LabelCluster: testCluster, LabelHost: testHost}, "", false},
		{"an empty host label", map[string]string{LabelManaged: "true", LabelCluster: testCluster, LabelHost: ""}, testHost, false},
		{"another cluster's", map[string]string{LabelManaged: "true", LabelCluster: "member-b", LabelHost: testHost}, testHost, false},
		{"not leafsync's", map[string]string{LabelCluster: testCluster, LabelHost: testHost}, testHost, false},
	} {
		if got := OwnedBy(c.labels, testCluster, c.host); got != c.want {
			t.Errorf("%s: ownedBy = %v, want %v", c.name, got, c.want)
		}
	}
}
