package values

import (
	"bytes"
	"flag"
	"os"
	"testing"

	"github.com/invopop/jsonschema"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite charts/leafsync/values.schema.json")

const (
	schemaPath = "../leafsync/values.schema.json"
	valuesPath = "../leafsync/values.yaml"
)

// comments are the Go doc comments of the types the schema describes: its
// descriptions.
func comments(t *testing.T) map[string]string {
	t.Helper()
	// AddGoComments keys comments by module path joined with the
	// directory, so it must walk from the module's root.
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chdir("../.."); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	var r jsonschema.Reflector
	for _, dir := range []string{"charts/values", "internal/syncer/config", "hysteresis"} {
		if err := r.AddGoComments("github.com/leafsync/leafsync", dir); err != nil {
			t.Fatal(err)
		}
	}
	return r.CommentMap
}

// TestSchemaIsCurrent fails when values.schema.json is not what the types
// generate; `go test ./charts/values -update` rewrites it.
func TestSchemaIsCurrent(t *testing.T) {
	want, err := SchemaJSON(comments(t))
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(schemaPath, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(schemaPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale: run go test ./charts/values -update", schemaPath)
	}
}

// TestValuesYAMLMatchesTheTypes: every key of values.yaml is a field of
// Values, so the schema generated from the types accepts the defaults.
func TestValuesYAMLMatchesTheTypes(t *testing.T) {
	data, err := os.ReadFile(valuesPath)
	if err != nil {
		t.Fatal(err)
	}
	var v Values
	if err := yaml.UnmarshalStrict(data, &v); err != nil {
		t.Fatalf("%s does not match the Values type: %v", valuesPath, err)
	}
	if v.ReplicaCount < 1 || v.Config.Hysteresis.NotReadyAfter.Duration == 0 {
		t.Errorf("values.yaml decoded to %+v", v)
	}
}
