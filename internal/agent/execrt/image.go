package execrt

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/klauspost/compress/zstd"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/registry"
	"github.com/meshroll/meshroll/internal/statedir"
)

// Files of an image directory (see the package comment).
const (
	completeFile = "complete"
	configFile   = "config.json"
	manifestFile = "manifest.json"
	rootfsDir    = "rootfs"
	layerTmp     = "layer.tmp"
)

// image is an unpacked image, ready to run.
type image struct {
	dir    string
	rootfs string
	config v1.Config
}

// image returns c's image, unpacked: from the cache when a complete unpack
// of c.Digest is there, otherwise pulled, verified and unpacked now. Two
// containers of one digest share one pull.
func (r *Runtime) image(ctx context.Context, c mesh.Container) (*image, error) {
	if err := mesh.ValidDigest(c.Digest); err != nil {
		return nil, fmt.Errorf("container %s: %w: %w", c.Module, ErrBadImage, err)
	}
	unlock, err := r.lockImage(ctx, c.Digest)
	if err != nil {
		return nil, err
	}
	defer unlock()
	dir := filepath.Join(r.images, strings.TrimPrefix(c.Digest, "sha256:"))
	switch img, err := loadImage(dir); {
	case err == nil:
		return img, nil
	case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, errBadCache):
		// Not a missing or torn unpack: do not throw away an image that
		// may be running.
		return nil, fmt.Errorf("image %s: %w", c.Digest, err)
	}
	if err := r.pull(ctx, c, dir); err != nil {
		// What was unpacked is useless without the marker; do not keep a
		// refused image's files around.
		_ = removeTree(dir)
		return nil, err
	}
	img, err := loadImage(dir)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", c.Digest, err)
	}
	return img, nil
}

// lockImage serialises the pulls of one digest.
func (r *Runtime) lockImage(ctx context.Context, digest string) (func(), error) {
	r.mu.Lock()
	l, ok := r.imageLocks[digest]
	if !ok {
		l = make(chan struct{}, 1)
		r.imageLocks[digest] = l
	}
	r.mu.Unlock()
	select {
	case l <- struct{}{}:
		return func() { <-l }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// errBadCache marks a cached image directory that is complete but cannot
// be read; it is unpacked again.
var errBadCache = errors.New("cached image is unreadable")

// loadImage reads a completely unpacked image directory.
func loadImage(dir string) (*image, error) {
	if _, err := os.Stat(filepath.Join(dir, completeFile)); err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(filepath.Join(dir, configFile))
	if err != nil {
		return nil, err
	}
	cfg, err := v1.ParseConfigFile(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%w: config: %w", errBadCache, err)
	}
	return &image{dir: dir, rootfs: filepath.Join(dir, rootfsDir), config: cfg.Config}, nil
}

// reference is c's image pinned by digest, and the remote options to pull
// it with: the configured registry's (with its credentials) when the image
// lives there, anonymous ones otherwise, so that credentials never go to a
// registry they were not given for.
func (r *Runtime) reference(c mesh.Container) (name.Digest, []remote.Option, error) {
	if c.Image == "" {
		return name.Digest{}, nil, fmt.Errorf("container %s declares no image repository to pull %s from: %w", c.Module, c.Digest, ErrBadImage)
	}
	repo, err := name.NewRepository(c.Image)
	if err != nil {
		return name.Digest{}, nil, fmt.Errorf("container %s: image %q: %w: %w", c.Module, c.Image, ErrBadImage, err)
	}
	if r.regHost != "" && repo.RegistryStr() == r.regHost {
		if repo, err = r.o.Registry.Repository(repo.RepositoryStr()); err != nil {
			return name.Digest{}, nil, fmt.Errorf("container %s: %w: %w", c.Module, ErrBadImage, err)
		}
		return repo.Digest(c.Digest), r.regOpts, nil
	}
	return repo.Digest(c.Digest), r.anonOpts, nil
}

// pull fetches c's image by digest, verifies it and unpacks it into dir,
// writing the complete marker last.
func (r *Runtime) pull(ctx context.Context, c mesh.Container, dir string) error {
	ref, opts, err := r.reference(c)
	if err != nil {
		return err
	}
	opts = append(slices.Clip(opts), remote.WithContext(ctx))
	repo := ref.Context().String()
	if err := removeTree(dir); err != nil {
		return fmt.Errorf("clear unfinished unpack of %s: %w", c.Digest, err)
	}
	if err := os.MkdirAll(filepath.Join(dir, rootfsDir), 0o700); err != nil {
		return fmt.Errorf("image %s: %w", c.Digest, err)
	}

	desc, err := remote.Get(ref, opts...)
	if err != nil {
		// go-containerregistry checks a manifest pulled by digest against
		// the digest; its error is the only sign of a registry serving
		// something else.
		if got, ok := ggcrMismatch(err); ok {
			return mismatch(repo, "manifest", got, c.Digest)
		}
		return registry.PullError(ref.String(), err)
	}
	if got := desc.Digest.String(); got != c.Digest {
		return mismatch(repo, "manifest", got, c.Digest)
	}
	var img v1.Image
	if desc.MediaType.IsIndex() {
		if img, err = imageFromIndex(desc, repo); err != nil {
			return err
		}
	} else {
		if img, err = desc.Image(); err != nil {
			return fmt.Errorf("pull %s: %w", ref, err)
		}
		got, err := img.Digest()
		if err != nil {
			return fmt.Errorf("pull %s: %w", ref, err)
		}
		if got.String() != c.Digest {
			return mismatch(repo, "manifest", got.String(), c.Digest)
		}
	}

	rawManifest, err := img.RawManifest()
	if err != nil {
		return fmt.Errorf("pull %s: %w", ref, err)
	}
	mf, err := img.Manifest()
	if err != nil {
		return fmt.Errorf("pull %s: manifest: %w", ref, err)
	}
	rawConfig, err := img.RawConfigFile()
	if err != nil {
		if got, ok := ggcrMismatch(err); ok {
			return mismatch(repo, "config", got, mf.Config.Digest.String())
		}
		return fmt.Errorf("pull %s: config: %w", ref, err)
	}
	if got := sha256Digest(rawConfig); got != mf.Config.Digest.String() {
		return mismatch(repo, "config", got, mf.Config.Digest.String())
	}
	cfg, err := v1.ParseConfigFile(bytes.NewReader(rawConfig))
	if err != nil {
		return fmt.Errorf("pull %s: config: %w: %w", ref, ErrBadImage, err)
	}
	if n, m := len(cfg.RootFS.DiffIDs), len(mf.Layers); n != m {
		return fmt.Errorf("image %s@%s: config lists %d layers, manifest %d: %w", repo, c.Digest, n, m, ErrDigestMismatch)
	}

	root, err := os.OpenRoot(filepath.Join(dir, rootfsDir))
	if err != nil {
		return fmt.Errorf("image %s: %w", c.Digest, err)
	}
	defer root.Close()
	u := newUnpacker(root)
	tmp := filepath.Join(dir, layerTmp)
	for i, ld := range mf.Layers {
		l, err := img.LayerByDigest(ld.Digest)
		if err != nil {
			return fmt.Errorf("pull %s: layer %s: %w", ref, ld.Digest, err)
		}
		if err := fetchLayer(l, ld, repo, tmp); err != nil {
			return err
		}
		if err := u.apply(tmp, cfg.RootFS.DiffIDs[i], repo); err != nil {
			return fmt.Errorf("image %s@%s: layer %s: %w", repo, c.Digest, ld.Digest, badUnlessTransient(err))
		}
		if err := os.Remove(tmp); err != nil {
			return fmt.Errorf("image %s: %w", c.Digest, err)
		}
	}
	if err := u.finish(); err != nil {
		return fmt.Errorf("image %s@%s: %w", repo, c.Digest, badUnlessTransient(err))
	}
	if err := writeSynced(filepath.Join(dir, manifestFile), rawManifest); err != nil {
		return err
	}
	if err := writeSynced(filepath.Join(dir, configFile), rawConfig); err != nil {
		return err
	}
	if err := statedir.Sync(dir); err != nil {
		return err
	}
	// The marker comes last: without it the directory is redone.
	if err := writeSynced(filepath.Join(dir, completeFile), []byte(c.Digest+"\n")); err != nil {
		return err
	}
	return statedir.Sync(dir)
}

// imageFromIndex picks the index's image for this machine's platform.
func imageFromIndex(desc *remote.Descriptor, repo string) (v1.Image, error) {
	idx, err := desc.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("pull %s: %w", repo, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("pull %s: index: %w", repo, err)
	}
	for _, m := range im.Manifests {
		if !m.MediaType.IsImage() || m.Platform == nil || m.Platform.OS != runtime.GOOS || m.Platform.Architecture != runtime.GOARCH {
			continue
		}
		img, err := idx.Image(m.Digest)
		if err != nil {
			if got, ok := ggcrMismatch(err); ok {
				return nil, mismatch(repo, "manifest", got, m.Digest.String())
			}
			return nil, fmt.Errorf("pull %s@%s: %w", repo, m.Digest, err)
		}
		got, err := img.Digest()
		if err != nil {
			return nil, fmt.Errorf("pull %s@%s: %w", repo, m.Digest, err)
		}
		if got != m.Digest {
			return nil, mismatch(repo, "manifest", got.String(), m.Digest.String())
		}
		return img, nil
	}
	return nil, fmt.Errorf("image %s@%s is an index with no image for %s/%s: %w", repo, desc.Digest, runtime.GOOS, runtime.GOARCH, ErrBadImage)
}

// fetchLayer downloads a layer's blob to tmp, checking it against the
// manifest's digest and size before anything of it is unpacked.
func fetchLayer(l v1.Layer, ld v1.Descriptor, repo, tmp string) error {
	if ld.Digest.Algorithm != "sha256" {
		return fmt.Errorf("image %s: layer %s: digest algorithm not supported: %w", repo, ld.Digest, ErrBadImage)
	}
	want := ld.Digest.String()
	rc, err := l.Compressed()
	if err != nil {
		if _, ok := ggcrMismatch(err); ok {
			return fmt.Errorf("image %s: the registry served layer %s with a size other than the manifest's %d: %w", repo, want, ld.Size, ErrDigestMismatch)
		}
		return fmt.Errorf("fetch layer %s of %s: %w", want, repo, err)
	}
	defer rc.Close()
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("fetch layer %s: %w", want, err)
	}
	defer f.Close()
	h := sha256.New()
	n, cerr := io.Copy(io.MultiWriter(f, h), rc)
	got := "sha256:" + hex.EncodeToString(h.Sum(nil))
	if n == ld.Size && got != want {
		// Whole, but not what was pinned: tampered or corrupt. (The
		// reader's own check fails too; this names both digests.)
		return mismatch(repo, "layer", got, want)
	}
	if cerr != nil {
		return fmt.Errorf("fetch layer %s of %s: %w", want, repo, cerr)
	}
	if n != ld.Size {
		return fmt.Errorf("image %s: layer %s is %d bytes, the manifest says %d: %w", repo, want, n, ld.Size, ErrDigestMismatch)
	}
	if got != want {
		return mismatch(repo, "layer", got, want)
	}
	return f.Close()
}

// apply unpacks the downloaded layer at tmp (gzip, zstd or plain tar) and
// checks its uncompressed digest against the config's diff ID.
func (u *unpacker) apply(tmp string, diffID v1.Hash, repo string) error {
	f, err := os.Open(tmp)
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	magic, _ := br.Peek(4)
	var rd io.Reader = br
	switch {
	case len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		zr, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("gzip: %w", err)
		}
		defer zr.Close()
		rd = zr
	case bytes.Equal(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return fmt.Errorf("zstd: %w", err)
		}
		defer zr.Close()
		rd = zr
	}
	h := sha256.New()
	tee := io.TeeReader(rd, h)
	if err := u.layer(tee); err != nil {
		return err
	}
	// Hash what follows the tar's end too: the diff ID covers all of it.
	if _, err := io.Copy(io.Discard, tee); err != nil {
		return fmt.Errorf("read layer: %w", err)
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != diffID.String() {
		return mismatch(repo, "uncompressed layer", got, diffID.String())
	}
	return nil
}

// badUnlessTransient marks an unpack failure ErrBadImage, since unpacking
// verified bytes fails the same way every time, unless the machine is short
// of something (space, descriptors, memory) or its disk fails, which may
// pass.
func badUnlessTransient(err error) error {
	if permanent(err) {
		return err
	}
	for _, t := range []error{syscall.ENOSPC, syscall.EDQUOT, syscall.EIO, syscall.EMFILE, syscall.ENFILE, syscall.ENOMEM, context.Canceled} {
		if errors.Is(err, t) {
			return err
		}
	}
	return fmt.Errorf("%w: %w", ErrBadImage, err)
}

// mismatch is the error for content whose digest is not the one pinned; it
// names both, since that is what an operator chasing a tampered registry
// needs.
func mismatch(repo, what, got, want string) error {
	return fmt.Errorf("image %s: the registry served %s %s for %s: %w", repo, what, got, want, ErrDigestMismatch)
}

var ggcrManifestMismatch = regexp.MustCompile(`manifest digest: "(sha256:[0-9a-f]{64})" does not match requested digest`)

// ggcrMismatch recognises go-containerregistry's own verification failures,
// which it reports as plain errors, and returns the digest it got when it
// says.
func ggcrMismatch(err error) (string, bool) {
	msg := err.Error()
	if m := ggcrManifestMismatch.FindStringSubmatch(msg); m != nil {
		return m[1], true
	}
	if strings.Contains(msg, "does not match expected size") || strings.Contains(msg, "error verifying sha256 checksum") {
		return "", true
	}
	return "", false
}

func sha256Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// writeSynced writes a file and syncs it, so that a marker never survives
// a crash that the data before it did not.
func writeSynced(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
