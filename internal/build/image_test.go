package build

import (
	"os"
	"path/filepath"
	"testing"
	"time"
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
		if err := writeLayer(dst, bin, "host", time.Unix(0, 0)); err != nil {
			b.Fatal(err)
		}
	}
}
