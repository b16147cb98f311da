package registration

import (
	"maps"
	"testing"
)

func TestParseStorageClasses(t *testing.T) {
	got, err := ParseStorageClasses(" fast = member-ssd ,standard=local-path,")
	if want := map[string]string{"fast": "member-ssd", "standard": "local-path"}; err != nil || !maps.Equal(got, want) {
		t.Errorf("got %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{"fast", "fast=", "=ssd", "Fast=ssd", "fast=ssd,fast=hdd", "a=b=c"} {
		if m, err := ParseStorageClasses(bad); err == nil {
			t.Errorf("%q: accepted as %v", bad, m)
		}
	}
	if m := StorageClasses(map[string]string{}); len(m) != 0 {
		t.Errorf("unset: %v", m)
	}
	// A bad value refuses the Secret.
	s := secret("s", "east", kubeconfig(t, nil), map[string]string{AnnotationStorageClasses: "fast"})
	if _, err := Parse(s, Policy{}); err == nil {
		t.Error("a bad storage-classes annotation was accepted")
	}
}
