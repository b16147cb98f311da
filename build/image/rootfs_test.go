package main

import (
	"archive/tar"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// TestRootfs: a rootfs spec becomes one layer with every entry as listed
// (modes with setuid and sticky bits, owners, symlinks), and the config
// carries the entrypoint, cmd, user and env given.
func TestRootfs(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "nnp")
	if err := os.WriteFile(src, []byte("ELF"), 0o644); err != nil {
		t.Fatal(err)
	}
	specFile := filepath.Join(dir, "rootfs")
	if err := os.WriteFile(specFile, []byte(`# a test tree
dir /tmp 1777 0:0
dir /usr/local/bin 0755 0:0
file /usr/local/bin/nnp 4755 0:0 `+src+`
file /etc/passwd 0644 1000:50000 `+src+`
symlink /bin/sh busybox
`), 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := readRootfs(specFile)
	if err != nil {
		t.Fatal(err)
	}
	s := spec{files: files, name: "nonewprivs", cmd: []string{"nnp"}, user: "0", env: []string{"PATH=/bin"},
		ref: "example.com/nonewprivs:1.4", arch: "amd64"}
	out := filepath.Join(dir, "image.tar")
	if err := build(s, out); err != nil {
		t.Fatal(err)
	}
	cf, ref, headers, _ := readImage(t, out)
	c := cf.Config
	if ref != "example.com/nonewprivs:1.4" {
		t.Errorf("image named %q", ref)
	}
	if len(c.Entrypoint) != 0 || !slices.Equal(c.Cmd, []string{"nnp"}) || c.User != "0" || !slices.Equal(c.Env, []string{"PATH=/bin"}) {
		t.Errorf("config %+v", c)
	}
	var got []string
	for _, h := range headers {
		got = append(got, strings.Join([]string{string(h.Typeflag), h.Name, h.Linkname, octal(h.Mode), itoa(h.Uid) + ":" + itoa(h.Gid)}, " "))
	}
	want := []string{
		"5 tmp/  1777 0:0",
		"5 usr/local/bin/  755 0:0",
		"0 usr/local/bin/nnp  4755 0:0",
		"0 etc/passwd  644 1000:50000",
		"2 bin/sh busybox 777 0:0",
	}
	if !slices.Equal(got, want) {
		t.Errorf("layer:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestRootfsRejects: a malformed line names its line number.
func TestRootfsRejects(t *testing.T) {
	for _, line := range []string{"file /x 0755 0:0", "dir x 0755 0:0", "dir /x 9 0:0", "dir /x 0755 root", "fifo /x"} {
		f := filepath.Join(t.TempDir(), "rootfs")
		if err := os.WriteFile(f, []byte("\n"+line+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := readRootfs(f); err == nil || !strings.Contains(err.Error(), ":2: ") {
			t.Errorf("%q: err %v, want one naming line 2", line, err)
		}
	}
}

// readImage unpacks the archive with tar(1), an independent reader, and
// returns its one image's config and name, and its one layer's headers and
// file bodies.
func readImage(t *testing.T, archive string) (*v1.ConfigFile, string, []*tar.Header, map[string][]byte) {
	t.Helper()
	unpacked := t.TempDir()
	if o, err := exec.Command("tar", "-xf", archive, "-C", unpacked).CombinedOutput(); err != nil {
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
	if err != nil || len(m.Manifests) != 1 {
		t.Fatalf("index %+v (%v), want one image", m, err)
	}
	ref := m.Manifests[0].Annotations["org.opencontainers.image.ref.name"]
	img, err := p.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
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
	var headers []*tar.Header
	bodies := map[string][]byte{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return cf, ref, headers, bodies
		}
		if err != nil {
			t.Fatal(err)
		}
		headers = append(headers, h)
		if bodies[h.Name], err = io.ReadAll(tr); err != nil {
			t.Fatal(err)
		}
	}
}

func octal(m int64) string { return strconv.FormatInt(m, 8) }
func itoa(i int) string    { return strconv.Itoa(i) }
