package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestImage: the archive is an OCI layout with one image: /leafsync,
// executable, as its only file; user 65532; entrypoint /leafsync run. The
// same binary gives the same digest.
func TestImage(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "leafsync")
	if err := os.WriteFile(bin, []byte("#!/bin/true\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "image.tar")
	if err := build(testSpec(t, bin), out); err != nil {
		t.Fatal(err)
	}
	cf, ref, headers, bodies := readImage(t, out)
	if ref != "example.com/leafsync:test" {
		t.Fatalf("image named %q, want example.com/leafsync:test", ref)
	}
	c := cf.Config
	if c.User != "65532:65532" || !slices.Equal(c.Entrypoint, []string{"/leafsync"}) || !slices.Equal(c.Cmd, []string{"run"}) ||
		cf.OS != "linux" || cf.Architecture != "arm64" || c.Labels["org.opencontainers.image.revision"] != "abc123" {
		t.Errorf("config %+v (os %s, arch %s)", c, cf.OS, cf.Architecture)
	}
	if len(headers) != 1 || headers[0].Name != "leafsync" {
		t.Fatalf("layer holds %d files, want only leafsync", len(headers))
	}
	if h := headers[0]; h.Mode != 0o755 || !bytes.Equal(bodies["leafsync"], []byte("#!/bin/true\n")) {
		t.Errorf("/leafsync: mode %o, %d bytes", h.Mode, len(bodies["leafsync"]))
	}
	// Reproducible: the same input, the same archive.
	again := filepath.Join(dir, "again.tar")
	if err := build(testSpec(t, bin), again); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(out)
	b, _ := os.ReadFile(again)
	if !bytes.Equal(a, b) {
		t.Errorf("two builds of the same binary differ")
	}
}

func testSpec(t *testing.T, bin string) spec {
	s := spec{binary: bin, name: "leafsync", cmd: []string{"run"}, user: "65532:65532", ref: "example.com/leafsync:test", arch: "arm64", version: "v1.2.3", commit: "abc123"}
	if err := s.withBinary(); err != nil {
		t.Fatal(err)
	}
	return s
}
