package catalogue_test

import (
	"path/filepath"
	"testing"

	"github.com/meshroll/meshroll/internal/catalogue"
	"github.com/meshroll/meshroll/internal/catalogue/catalogtest"
	"github.com/meshroll/meshroll/internal/mesh"
)

var build = catalogtest.Build

func TestMemoryConformance(t *testing.T) {
	catalogtest.Run(t, func(t *testing.T) catalogue.Catalogue { return catalogue.NewMemory() })
}

func TestFileConformance(t *testing.T) {
	catalogtest.Run(t, func(t *testing.T) catalogue.Catalogue {
		c, err := catalogue.OpenFile(filepath.Join(t.TempDir(), "state", "catalogue.json"))
		if err != nil {
			t.Fatal(err)
		}
		return c
	})
}

func TestFileCatalogueSurvivesReopen(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "catalogue.json")
	c, err := catalogue.OpenFile(path)
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
	c2, err := catalogue.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got, ok, _ := c2.Lookup(ctx, build("host", 3).Digest)
	if !ok || got != build("host", 3) {
		t.Errorf("Lookup after reopen = %+v, %v; want %+v", got, ok, build("host", 3))
	}
	nc, ok, _ := c2.NewestConverged(ctx, "host")
	if !ok || nc.Generation != 2 {
		t.Errorf("NewestConverged = %+v, %v; want generation 2 (3 never converged)", nc, ok)
	}
	es, err := c2.Builds(ctx, "host", 0)
	if err != nil || len(es) != 3 || es[2].Plan != "plan/test" || es[2].BuiltAt.IsZero() {
		t.Errorf("Builds after reopen = %+v, %v; want three with plan and time", es, err)
	}
}
