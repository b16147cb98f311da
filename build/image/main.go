// Command image writes OCI images without a Docker engine and without
// pulling a base, as an OCI image layout packed in a tar archive (what
// `ctr images import`, `skopeo copy oci-archive:` and `docker load` read).
//
// By default it writes leafsync's image: the static binary on an empty base,
// run as the numeric non-root user 65532. `make image` runs it; the
// Dockerfile builds the same layout for people who build with Docker.
//
// With -rootfs it writes a whole file tree instead, listed in a spec file
// (see readRootfs): files with their modes and owners, directories and
// symlinks, plus -entrypoint, -cmd, -user and -env. The conformance run's
// test images (busybox, agnhost, nonewprivs) are built this way.
package main

import (
	"archive/tar"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

func main() {
	var s spec
	flag.StringVar(&s.binary, "binary", "bin/leafsync-linux", "the static binary to put at /<name>")
	flag.StringVar(&s.name, "name", "leafsync", "the binary's name in the image, its entrypoint and the image title")
	cmd := flag.String("cmd", "run", "the image's arguments after the entrypoint, comma-separated (empty: none)")
	out := flag.String("out", "bin/leafsync-image.tar", "the OCI archive to write")
	flag.StringVar(&s.ref, "ref", "ghcr.io/leafsync/leafsync:dev", "the image name recorded in the archive")
	flag.StringVar(&s.arch, "arch", "amd64", "the binary's architecture (GOARCH)")
	flag.StringVar(&s.version, "version", "dev", "org.opencontainers.image.version")
	flag.StringVar(&s.commit, "commit", "unknown", "org.opencontainers.image.revision")
	rootfs := flag.String("rootfs", "", "a spec file listing the image's file tree (instead of -binary)")
	entrypoint := flag.String("entrypoint", "", "with -rootfs: the entrypoint, comma-separated (empty: none)")
	flag.StringVar(&s.user, "user", "65532:65532", "the user the image runs as")
	flag.Func("env", "NAME=value in the image's environment (repeatable)", func(v string) error {
		s.env = append(s.env, v)
		return nil
	})
	flag.Parse()
	s.cmd = splitList(*cmd)
	err := s.withBinary()
	if *rootfs != "" {
		s.entrypoint = splitList(*entrypoint)
		s.files, err = readRootfs(*rootfs)
	}
	if err == nil {
		err = build(s, *out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// epoch is every timestamp in the image, so that the same binary gives
// the same image digest.
var epoch = time.Unix(0, 0).UTC()

// spec is what goes into an image. leafsync's image, the pause image the
// test node runs and the conformance run's images are built alike.
type spec struct {
	binary, name    string
	files           []entry
	entrypoint, cmd []string
	user            string
	env             []string
	ref, arch       string
	version, commit string
}

// withBinary makes the file tree the binary alone, /name, executable and
// owned by root, and /name the entrypoint.
func (s *spec) withBinary() error {
	bin, err := os.ReadFile(s.binary)
	if err != nil {
		return fmt.Errorf("reading the binary (make image writes it): %w", err)
	}
	s.files = []entry{{kind: tar.TypeReg, path: s.name, mode: 0o755, body: bin}}
	s.entrypoint = []string{"/" + s.name}
	return nil
}

func splitList(v string) []string {
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

func build(s spec, out string) error {
	layer, err := tarball.LayerFromOpener(treeLayer(s.files), tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
	if err != nil {
		return err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = "linux", s.arch, v1.Time{Time: epoch}
	cf.Config = v1.Config{
		Entrypoint: s.entrypoint,
		Cmd:        s.cmd,
		User:       s.user,
		Env:        s.env,
		WorkingDir: "/",
		Labels: map[string]string{
			"org.opencontainers.image.title":    s.name,
			"org.opencontainers.image.source":   "https://github.com/leafsync/leafsync",
			"org.opencontainers.image.version":  s.version,
			"org.opencontainers.image.revision": s.commit,
		},
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	return writeArchive(img, s.ref, out)
}

// treeLayer is a layer holding files, in the order given.
func treeLayer(files []entry) tarball.Opener {
	return func() (io.ReadCloser, error) {
		pr, pw := io.Pipe()
		go func() {
			tw := tar.NewWriter(pw)
			var err error
			for _, f := range files {
				h := &tar.Header{Typeflag: f.kind, Name: f.path, Linkname: f.target, Mode: f.mode, Uid: f.uid, Gid: f.gid,
					Size: int64(len(f.body)), ModTime: epoch, Format: tar.FormatPAX}
				if f.kind == tar.TypeDir {
					h.Name += "/"
				}
				if err = tw.WriteHeader(h); err == nil {
					_, err = tw.Write(f.body)
				}
				if err != nil {
					break
				}
			}
			if err == nil {
				err = tw.Close()
			}
			pw.CloseWithError(err)
		}()
		return pr, nil
	}
}

// writeArchive writes img as an OCI image layout, named ref, and packs the
// layout into the tar archive out.
func writeArchive(img v1.Image, ref, out string) error {
	dir, err := os.MkdirTemp("", "leafsync-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref})); err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		h.Name, h.ModTime, h.Uid, h.Gid, h.Uname, h.Gname = filepath.ToSlash(rel), epoch, 0, 0, "", ""
		if d.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		src, err := os.Open(path)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
