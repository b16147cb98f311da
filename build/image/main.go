// Command image writes leafsync's OCI image without a Docker engine and
// without pulling a base: the static binary on an empty base, run as the
// numeric non-root user 65532, as an OCI image layout packed in a tar
// archive (what `ctr images import`, `skopeo copy oci-archive:` and
// `docker load` read). `make image` runs it; the Dockerfile builds the same
// layout for people who build with Docker.
package main

import (
	"archive/tar"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

func main() {
	binary := flag.String("binary", "bin/leafsync-linux", "the static leafsync binary to put at /leafsync")
	out := flag.String("out", "bin/leafsync-image.tar", "the OCI archive to write")
	ref := flag.String("ref", "ghcr.io/leafsync/leafsync:dev", "the image name recorded in the archive")
	arch := flag.String("arch", "amd64", "the binary's architecture (GOARCH)")
	version := flag.String("version", "dev", "org.opencontainers.image.version")
	commit := flag.String("commit", "unknown", "org.opencontainers.image.revision")
	flag.Parse()
	if err := build(*binary, *out, *ref, *arch, *version, *commit); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// epoch is every timestamp in the image, so that the same binary gives
// the same image digest.
var epoch = time.Unix(0, 0).UTC()

func build(binary, out, ref, arch, version, commit string) error {
	bin, err := os.ReadFile(binary)
	if err != nil {
		return fmt.Errorf("reading the binary (make build-linux writes it): %w", err)
	}
	layer, err := tarball.LayerFromOpener(binaryLayer(bin), tarball.WithMediaType(types.OCILayer))
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
	cf.OS, cf.Architecture, cf.Created = "linux", arch, v1.Time{Time: epoch}
	cf.Config = v1.Config{
		Entrypoint: []string{"/leafsync"},
		Cmd:        []string{"run"},
		User:       "65532:65532",
		WorkingDir: "/",
		Labels: map[string]string{
			"org.opencontainers.image.title":    "leafsync",
			"org.opencontainers.image.source":   "https://github.com/leafsync/leafsync",
			"org.opencontainers.image.version":  version,
			"org.opencontainers.image.revision": commit,
		},
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	return writeArchive(img, ref, out)
}

// binaryLayer is a layer holding /leafsync, executable, owned by root.
func binaryLayer(bin []byte) tarball.Opener {
	return func() (io.ReadCloser, error) {
		pr, pw := io.Pipe()
		go func() {
			tw := tar.NewWriter(pw)
			err := tw.WriteHeader(&tar.Header{Name: "leafsync", Mode: 0o755, Size: int64(len(bin)), ModTime: epoch, Typeflag: tar.TypeReg, Format: tar.FormatPAX})
			if err == nil {
				_, err = tw.Write(bin)
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
