package catalogue

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/meshroll/meshroll/internal/mesh"
)

func build(module string, gen int64) mesh.Build {
	return mesh.Build{Module: module, Commit: fmt.Sprintf("%040x", gen), Digest: fmt.Sprintf("sha256:%064x", gen), Generation: gen}
}

func TestFileCatalogueSurvivesReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "catalogue.json")
	c, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []mesh.Build{build("host", 1), build("host", 2), build("host", 3)} {
		if err := c.Record(ctx, b, "plan/test"); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.MarkConverged(ctx, build("host", 2).Digest, "edge-1"); err != nil {
		t.Fatal(err)
	}
	c2, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got, ok, _ := c2.Lookup(ctx, build("host", 3).Digest)
	if !ok || got.Generation != 3 {
		t.Errorf("Lookup after reopen = %+v, %v; want generation 3", got, ok)
	}
	nc, ok, _ := c2.NewestConverged(ctx, "host")
	if !ok || nc.Generation != 2 {
		t.Errorf("NewestConverged = %+v, %v; want generation 2 (3 never converged)", nc, ok)
	}
}

func TestRecordRejectsNonReproducible(t *testing.T) {
	c := NewMemory()
	ctx := context.Background()
	b := build("host", 1)
	if err := c.Record(ctx, b, "plan/test"); err != nil {
		t.Fatal(err)
	}
	if err := c.Record(ctx, b, "plan/test"); err != nil {
		t.Fatalf("recording the same build twice: %v", err)
	}
	b.Digest = build("host", 9).Digest
	if err := c.Record(ctx, b, "plan/test"); err == nil {
		t.Fatal("recording one commit with a second digest succeeded")
	}
}

func TestLookupTakesHighestGenerationForSharedDigest(t *testing.T) {
	c := NewMemory()
	ctx := context.Background()
	a := build("host", 5)
	b := build("host", 7)
	b.Digest = a.Digest // same content at two commits
	_ = c.Record(ctx, a, "p")
	_ = c.Record(ctx, b, "plan/test")
	got, _, _ := c.Lookup(ctx, a.Digest)
	if got.Generation != 7 {
		t.Errorf("Lookup generation = %d, want 7", got.Generation)
	}
	if _, ok, _ := c.Lookup(ctx, build("host", 99).Digest); ok {
		t.Error("unknown digest reported known")
	}
}
