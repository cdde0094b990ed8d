package build

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/require"
)

// BenchmarkWriteLayer is the layer's compression, the build's largest CPU
// cost after the compiler (a Go binary of some MB; this test binary here).
func BenchmarkWriteLayer(b *testing.B) {
	bin, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	fi, err := os.Stat(bin)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(fi.Size())
	dst := filepath.Join(b.TempDir(), "layer.tar.gz")
	for b.Loop() {
		if _, err := writeLayer(dst, bin, "host", time.Unix(0, 0)); err != nil {
			b.Fatal(err)
		}
	}
}

// The digest, diff ID and size taken while the layer is written are the
// ones read back from its file: the registry and every puller check them.
func TestWrittenLayerHashesMatchTheFile(t *testing.T) {
	bin, err := os.Executable()
	require.NoError(t, err)
	lf, err := writeLayer(filepath.Join(t.TempDir(), "layer.tar.gz"), bin, "host", time.Unix(1700000000, 0))
	require.NoError(t, err)
	read, err := tarball.LayerFromOpener(lf.Compressed, tarball.WithMediaType(types.OCILayer))
	require.NoError(t, err)
	wantDigest, err := read.Digest()
	require.NoError(t, err)
	wantDiffID, err := read.DiffID()
	require.NoError(t, err)
	wantSize, err := read.Size()
	require.NoError(t, err)
	require.Equal(t, wantDigest, lf.digest)
	require.Equal(t, wantDiffID, lf.diffID)
	require.Equal(t, wantSize, lf.size)
}
