package main

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
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
	if err := build(testSpec(bin), out); err != nil {
		t.Fatal(err)
	}
	// Unpack with tar(1), an independent reader of the archive.
	unpacked := filepath.Join(dir, "oci")
	if err := os.Mkdir(unpacked, 0o755); err != nil {
		t.Fatal(err)
	}
	if o, err := exec.Command("tar", "-xf", out, "-C", unpacked).CombinedOutput(); err != nil {
		t.Fatalf("tar -xf: %v\n%s", err, o)
	}
	p, err := layout.FromPath(unpacked)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 || m.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "example.com/leafsync:test" {
		t.Fatalf("index %+v, want one image named example.com/leafsync:test", m.Manifests)
	}
	img, err := p.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if c.User != "65532:65532" || !slices.Equal(c.Entrypoint, []string{"/leafsync"}) || !slices.Equal(c.Cmd, []string{"run"}) ||
		cf.OS != "linux" || cf.Architecture != "arm64" || c.Labels["org.opencontainers.image.revision"] != "abc123" {
		t.Errorf("config %+v (os %s, arch %s)", c, cf.OS, cf.Architecture)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers (%v), want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	var files []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, h.Name)
		body, _ := io.ReadAll(tr)
		if h.Name == "leafsync" && (h.Mode != 0o755 || !bytes.Equal(body, []byte("#!/bin/true\n"))) {
			t.Errorf("/leafsync: mode %o, %d bytes", h.Mode, len(body))
		}
	}
	if !slices.Equal(files, []string{"leafsync"}) {
		t.Errorf("layer holds %v, want only leafsync", files)
	}
	// Reproducible: the same input, the same archive.
	again := filepath.Join(dir, "again.tar")
	if err := build(testSpec(bin), again); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(out)
	b, _ := os.ReadFile(again)
	if !bytes.Equal(a, b) {
		t.Errorf("two builds of the same binary differ")
	}
}

func testSpec(bin string) spec {
	return spec{binary: bin, name: "leafsync", cmd: []string{"run"}, ref: "example.com/leafsync:test", arch: "arm64", version: "v1.2.3", commit: "abc123"}
}
