package build

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
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
	lf, err := writeLayer(filepath.Join(scratch, "layer.tar.gz"), bin, m.Module, m.Created)
	if err != nil {
		return nil, err
	}
	layer, err := partial.CompressedToLayer(lf)
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

// writtenLayer is a gzipped layer in a file, with its digest, diff ID and
// size taken as it was written: nothing reads it back to hash it, nor
// decompresses it for its diff ID, as a layer opened from the file would.
type writtenLayer struct {
	path           string
	digest, diffID v1.Hash
	size           int64
}

func (l *writtenLayer) Digest() (v1.Hash, error)            { return l.digest, nil }
func (l *writtenLayer) DiffID() (v1.Hash, error)            { return l.diffID, nil }
func (l *writtenLayer) Size() (int64, error)                { return l.size, nil }
func (l *writtenLayer) MediaType() (types.MediaType, error) { return types.OCILayer, nil }
func (l *writtenLayer) Compressed() (io.ReadCloser, error)  { return os.Open(l.path) }

// writeLayer writes the gzipped tar of the layer to dst: AppDir and the
// binary in it, in that (sorted) order, owned by root, with the commit's
// time as modification time and fixed modes. Nothing of the build machine
// (owner names, umask, clock) gets in, so the layer is the same bytes
// wherever the same binary is wrapped.
func writeLayer(dst, bin, module string, mtime time.Time) (*writtenLayer, error) {
	src, err := os.Open(bin)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return nil, err
	}
	f, err := os.Create(dst)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	compressed, uncompressed := sha256.New(), sha256.New()
	// The gzip header's name, comment and time stay empty. BestSpeed, as
	// go-containerregistry and ko compress layers: a quarter of the
	// default level's CPU for a layer about 5% larger. The level is part of
	// the digest: changing it changes the digest every commit builds to.
	zw, err := gzip.NewWriterLevel(io.MultiWriter(f, compressed), gzip.BestSpeed)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(io.MultiWriter(zw, uncompressed))
	mtime = mtime.UTC().Truncate(time.Second)
	dir := AppDir[1:]
	entries := []*tar.Header{
		{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755, ModTime: mtime, Format: tar.FormatUSTAR},
		{Typeflag: tar.TypeReg, Name: dir + "/" + module, Mode: 0o755, Size: fi.Size(), ModTime: mtime, Format: tar.FormatUSTAR},
	}
	for _, h := range entries {
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("layer: %w", err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := io.Copy(tw, src); err != nil {
				return nil, fmt.Errorf("layer: %w", err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	size, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	return &writtenLayer{
		path:   dst,
		digest: v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(compressed.Sum(nil))},
		diffID: v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(uncompressed.Sum(nil))},
		size:   size,
	}, nil
}
