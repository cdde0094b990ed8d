package build

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// AppDir is the directory of the image holding the module's binary; the
// entrypoint is AppDir/<module>.
const AppDir = "/app"

// Standard OCI annotation keys the images carry, as labels of the config and
// annotations of the manifest.
const (
	AnnotationRevision = "org.opencontainers.image.revision"
	AnnotationSource   = "org.opencontainers.image.source"
	AnnotationCreated  = "org.opencontainers.image.created"
	AnnotationTitle    = "org.opencontainers.image.title"
)

type imageMeta struct {
	Module, Commit, Source string
	Created                time.Time
	Arch                   string
	Recipe                 string
}

func (m imageMeta) annotations() map[string]string {
	a := map[string]string{
		AnnotationRevision: m.Commit,
		AnnotationCreated:  m.Created.UTC().Format(time.RFC3339),
		AnnotationTitle:    m.Module,
	}
	if m.Source != "" {
		a[AnnotationSource] = m.Source
	}
	return a
}

// goImage wraps the binary at bin into a one-layer OCI image. The layer is
// written to a file in scratch (the caller removes it after the push) so a
// large binary is never held in memory.
func goImage(bin, scratch string, m imageMeta) (v1.Image, error) {
	layerFile := filepath.Join(scratch, "layer.tar.gz")
	if err := writeLayer(layerFile, bin, m.Module, m.Created); err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return os.Open(layerFile) },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	created := v1.Time{Time: m.Created.UTC()}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: created, CreatedBy: "meshroll: " + m.Recipe},
	})
	if err != nil {
		return nil, fmt.Errorf("append layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.Created = created
	cf.OS = "linux"
	cf.Architecture = m.Arch
	cf.Config.Entrypoint = []string{AppDir + "/" + m.Module}
	cf.Config.Labels = m.annotations()
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	withAnn, ok := mutate.Annotations(img, m.annotations()).(v1.Image)
	if !ok {
		return nil, fmt.Errorf("annotations: not an image")
	}
	return withAnn, nil
}

// writeLayer writes the gzipped tar of the layer: AppDir and the binary in
// it, in that (sorted) order, owned by root, with the commit's time as
// modification time and fixed modes. Nothing of the build machine (owner
// names, umask, clock) gets in, so the layer is the same bytes wherever the
// same binary is wrapped.
func writeLayer(dst, bin, module string, mtime time.Time) error {
	src, err := os.Open(bin)
	if err != nil {
		return err
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return err
	}
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer f.Close()
	// The gzip header's name, comment and time stay empty. BestSpeed, as
	// go-containerregistry and ko compress layers: a quarter of the
	// default level's CPU for a layer about 5% larger. The level is part of
	// the digest: changing it changes the digest every commit builds to.
	zw, err := gzip.NewWriterLevel(f, gzip.BestSpeed)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	mtime = mtime.UTC().Truncate(time.Second)
	dir := AppDir[1:]
	entries := []*tar.Header{
		{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755, ModTime: mtime, Format: tar.FormatUSTAR},
		{Typeflag: tar.TypeReg, Name: dir + "/" + module, Mode: 0o755, Size: fi.Size(), ModTime: mtime, Format: tar.FormatUSTAR},
	}
	for _, h := range entries {
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("layer: %w", err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := io.Copy(tw, src); err != nil {
				return fmt.Errorf("layer: %w", err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("layer: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("layer: %w", err)
	}
	return f.Close()
}
