package registration

import (
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/leafsync/leafsync/hysteresis"
)

func TestAnnotations(t *testing.T) {
	s := secret("s", "east", kubeconfig(t, nil), map[string]string{
		AnnotationLeafName:             "edge-east",
		"leafsync.io/not-ready-after":  "120s",
		"leafsync.io/cordon-after":     "5s",
		AnnotationStatus:               "Connected",
		"example.com/unrelated":        "x",
		"leafsync.io/not-ready-afterr": "typo",
	})
	spec, err := Parse(s, Policy{})
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if spec.LeafName != "edge-east" {
		t.Errorf("leaf name = %q", spec.LeafName)
	}
	wantRaw := map[string]string{"notReadyAfter": "120s", "cordonAfter": "5s"}
	if !reflect.DeepEqual(spec.RawOverrides, wantRaw) {
		t.Errorf("raw overrides = %v, want %v", spec.RawOverrides, wantRaw)
	}
	want, err := hysteresis.ParseOverrides(wantRaw)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(spec.Overrides, want) {
		t.Errorf("overrides = %+v, want %+v", spec.Overrides, want)
	}
	if _, ok := spec.Annotations[AnnotationStatus]; ok {
		t.Error("status annotation treated as an option")
	}
	if got := UnknownAnnotations(s.Annotations); !reflect.DeepEqual(got, []string{"leafsync.io/not-ready-afterr"}) {
		t.Errorf("unknown = %v", got)
	}
}

// An option annotation read by another package (here internal/syncer/podsync) is
// known without that package being linked, and Parse checks its value.
func TestOtherPackagesAnnotation(t *testing.T) {
	key := AnnotationStaleEvictionPolicy
	if got := UnknownAnnotations(map[string]string{key: "Retain"}); len(got) != 0 {
		t.Errorf("option annotation reported unknown: %v", got)
	}
	spec, err := Parse(secret("s", "east", kubeconfig(t, nil), map[string]string{key: "Retain"}), Policy{})
	if err != nil {
		t.Fatal(err)
	}
	if spec.Annotations[key] != "Retain" {
		t.Errorf("annotation not carried: %v", spec.Annotations)
	}
	_, err = Parse(secret("s", "east", kubeconfig(t, nil), map[string]string{key: "Nope"}), Policy{})
	if reasonOf(t, err) != ReasonInvalidAnnotation || !strings.Contains(err.Error(), "DeferUntilReplaced, Retain, Forward") {
		t.Errorf("err = %v", err)
	}
}

// docs/annotations.md documents every annotation that is not unknown.
func TestEveryAnnotationIsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/annotations.md")
	if err != nil {
		t.Fatal(err)
	}
	keys := slices.Collect(maps.Keys(options))
	for _, th := range hysteresis.Thresholds {
		keys = append(keys, AnnotationPrefix+th.Flag)
	}
	for _, k := range keys {
		if got := UnknownAnnotations(map[string]string{k: ""}); len(got) != 0 {
			t.Errorf("%s reported unknown", k)
		}
		if !strings.Contains(string(doc), "| `"+k+"` |") {
			t.Errorf("docs/annotations.md has no row for %s", k)
		}
	}
}

func TestThresholdsMustStayConsistent(t *testing.T) {
	fleet := hysteresis.DefaultFleetConfig()
	policy := Policy{Thresholds: &fleet}
	// cordonAfter above the default notReadyAfter (90s) is inconsistent.
	_, err := Parse(secret("s", "east", kubeconfig(t, nil), map[string]string{"leafsync.io/cordon-after": "5m"}), policy)
	if reasonOf(t, err) != ReasonInvalidAnnotation || !strings.Contains(err.Error(), "notReadyAfter") {
		t.Errorf("err = %v", err)
	}
	// Together with a larger notReadyAfter (and window) it is fine.
	if _, err := Parse(secret("s", "east", kubeconfig(t, nil), map[string]string{
		"leafsync.io/cordon-after": "5m", "leafsync.io/not-ready-after": "10m", "leafsync.io/window": "20m",
	}), policy); err != nil {
		t.Errorf("err = %v", err)
	}
}
