package registration

import (
	"errors"
	"reflect"
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

func TestRegisteredAnnotation(t *testing.T) {
	const key = "leafsync.io/test-policy"
	RegisterAnnotation(Annotation{Key: key, Validate: func(v string) error {
		if v != "Retain" && v != "Forward" {
			return errors.New("must be Retain or Forward")
		}
		return nil
	}})
	defer func() {
		extraMu.Lock()
		delete(extraAnnotations, key)
		extraMu.Unlock()
	}()
	if got := UnknownAnnotations(map[string]string{key: "Retain"}); len(got) != 0 {
		t.Errorf("registered annotation reported unknown: %v", got)
	}
	spec, err := Parse(secret("s", "east", kubeconfig(t, nil), map[string]string{key: "Retain"}), Policy{})
	if err != nil {
		t.Fatal(err)
	}
	if spec.Annotations[key] != "Retain" {
		t.Errorf("annotation not carried: %v", spec.Annotations)
	}
	_, err = Parse(secret("s", "east", kubeconfig(t, nil), map[string]string{key: "Nope"}), Policy{})
	if reasonOf(t, err) != ReasonInvalidAnnotation || !strings.Contains(err.Error(), "Retain or Forward") {
		t.Errorf("err = %v", err)
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
