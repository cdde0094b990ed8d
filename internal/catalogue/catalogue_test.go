package catalogue_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshroll/meshroll/internal/catalogue"
	"github.com/meshroll/meshroll/internal/catalogue/catalogtest"
	"github.com/meshroll/meshroll/internal/mesh"
)

var build = catalogtest.Build

// openFile opens the file catalogue at path, failing the test if it cannot.
func openFile(t *testing.T, path string) *catalogue.Memory {
	t.Helper()
	c, err := catalogue.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestMemoryConformance(t *testing.T) {
	catalogtest.Run(t, func(t *testing.T) catalogue.Catalogue { return catalogue.NewMemory() })
}

func TestFileConformance(t *testing.T) {
	catalogtest.Run(t, func(t *testing.T) catalogue.Catalogue {
		return openFile(t, filepath.Join(t.TempDir(), "state", "catalogue.json"))
	})
}

func TestFileCatalogueSurvivesReopen(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "catalogue.json")
	c := openFile(t, path)
	for _, b := range []mesh.Build{build("host", 1), build("host", 2), build("host", 3)} {
		if err := c.Record(ctx, b, "plan/test"); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.MarkConverged(ctx, build("host", 2).Digest, "edge-1"); err != nil {
		t.Fatal(err)
	}
	c2 := openFile(t, path)
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

// A file written before rejections existed (entries without "rejected") opens
// as it was, and a rejection made since is written with its build and read
// back after a restart.
func TestFileCatalogueRejectionsAcrossVersions(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "catalogue.json")
	b1, b2 := build("host", 1), build("host", 2)
	old := `[
  {"build": {"module": "host", "commit": "` + b1.Commit + `", "digest": "` + b1.Digest + `", "generation": 1, "image": "` + b1.Image + `"},
   "plan": "plan/old", "built_at": "2026-01-02T03:04:05.123456789Z", "converged": ["edge-1"]},
  {"build": {"module": "host", "commit": "` + b2.Commit + `", "digest": "` + b2.Digest + `", "generation": 2, "image": "` + b2.Image + `"},
   "plan": "plan/old", "built_at": "2026-01-02T03:04:06Z", "converged": ["edge-2"]}
]`
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := catalogue.OpenFile(path)
	if err != nil {
		t.Fatalf("open a file without rejections: %v", err)
	}
	if got, ok, err := c.NewestConverged(ctx, "host"); err != nil || !ok || got != b2 {
		t.Fatalf("NewestConverged = %+v, %v, %v; want %+v", got, ok, err, b2)
	}
	if _, ok, err := c.Rejected(ctx, b2.Digest); err != nil || ok {
		t.Fatalf("Rejected in an old file = %v, %v; want not rejected", ok, err)
	}
	r, err := c.Reject(ctx, "host", b2.Commit, "alice", "crashes on start")
	if err != nil {
		t.Fatal(err)
	}

	c2 := openFile(t, path)
	got, ok, err := c2.Rejected(ctx, b2.Digest)
	if err != nil || !ok || got.By != "alice" || got.Reason != r.Reason || !got.At.Equal(r.At) || got.Commit != b2.Commit {
		t.Fatalf("Rejected after reopen = %+v, %v, %v; want %+v", got, ok, err, r)
	}
	if nc, ok, _ := c2.NewestConverged(ctx, "host"); !ok || nc != b1 {
		t.Errorf("NewestConverged after reopen = %+v, %v; want %+v (2 is rejected)", nc, ok, b1)
	}
	es, err := c2.Builds(ctx, "host", 0)
	if err != nil || len(es) != 2 || es[0].Rejected == nil || es[1].Rejected != nil || es[1].Plan != "plan/old" {
		t.Fatalf("Builds after reopen = %+v, %v; want 2 rejected, 1 not, both kept", es, err)
	}
	// The file holds the rejection in its build's entry, and only there.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var raw []map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	if len(raw) != 2 || raw[0]["rejected"] != nil || !strings.Contains(string(raw[1]["rejected"]), "crashes on start") {
		t.Errorf("file = %s; want the rejection in the second entry only", data)
	}
}

// A rejection that could not be written is not kept: a retry must write it,
// not find it in memory and call it done.
func TestFileRejectNotKeptWhenUnsaved(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "catalogue.json")
	c := openFile(t, path)
	b := build("host", 1)
	if err := c.Record(ctx, b, "plan/test"); err != nil {
		t.Fatal(err)
	}
	// A non-empty directory where the file goes: the save's rename fails,
	// for root too.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(path, "in-the-way"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Reject(ctx, "host", b.Commit, "alice", "bad"); err == nil {
		t.Fatal("Reject succeeded although the file could not be written")
	}
	if _, ok, _ := c.Rejected(ctx, b.Digest); ok {
		t.Fatal("a rejection that was not written is answered as rejected")
	}
	if err := os.RemoveAll(path); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Reject(ctx, "host", b.Commit, "alice", "bad"); err != nil {
		t.Fatalf("Reject once the file can be written: %v", err)
	}
	c2 := openFile(t, path)
	if _, ok, _ := c2.Rejected(ctx, b.Digest); !ok {
		t.Fatal("not rejected after a successful Reject and a reopen")
	}
}

// A freeze survives a restart, lifted or not, and a file without freezes
// keeps the list form that older meshrolls wrote and read.
func TestFileCatalogueFreezesSurviveReopen(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "catalogue.json")
	c := openFile(t, path)
	if err := c.Record(ctx, build("host", 1), "plan/test"); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(path); err != nil || !strings.HasPrefix(string(data), "[") {
		t.Fatalf("file without freezes = %.40q, %v; want the list form", data, err)
	}
	kept, err := c.Freeze(ctx, "", "", "alice", "release week")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Freeze(ctx, "host", "", "bob", "incident 42"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Unfreeze(ctx, "host", "", "carol"); err != nil {
		t.Fatal(err)
	}
	c2 := openFile(t, path)
	fs, err := c2.Freezes(ctx)
	if err != nil || len(fs) != 1 || fs[0].ID != kept.ID || fs[0].Reason != "release week" {
		t.Fatalf("Freezes after reopen = %+v, %v; want only %+v", fs, err, kept)
	}
	if b, ok, err := c2.Lookup(ctx, build("host", 1).Digest); err != nil || !ok || b != build("host", 1) {
		t.Fatalf("Lookup after reopen = %+v, %v, %v", b, ok, err)
	}
	var raw struct {
		Freezes []catalogue.Freeze `json:"freezes"`
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &raw); err != nil || len(raw.Freezes) != 2 || raw.Freezes[1].LiftedBy != "carol" {
		t.Fatalf("file freezes = %+v, %v; want both, the lifted one kept for audit", raw.Freezes, err)
	}
	// A new freeze after reopening gets a new ID.
	f, err := c2.Freeze(ctx, "", "edge-1", "dave", "disk swap")
	if err != nil || f.ID == kept.ID || f.ID == raw.Freezes[1].ID {
		t.Fatalf("Freeze after reopen = %+v, %v; want a new ID", f, err)
	}
}

// BenchmarkMemoryMarksAFleetConverged is one plan of 10,000 machines on the
// memory catalogue (the bench's and the tests'): each push asks whether
// the machine already runs a converged build and marks it converged.
func BenchmarkMemoryMarksAFleetConverged(b *testing.B) {
	const machines = 10000
	names := make([]string, machines)
	for i := range names {
		names[i] = fmt.Sprintf("edge-%05d", i)
	}
	for b.Loop() {
		ctx := b.Context()
		c := catalogue.NewMemory()
		built := build("host", 1)
		if err := c.Record(ctx, built, "plan/host/1"); err != nil {
			b.Fatal(err)
		}
		for _, name := range names {
			if _, _, err := c.NewestConvergedOn(ctx, "host", name); err != nil {
				b.Fatal(err)
			}
			if err := c.MarkConverged(ctx, built.Digest, name); err != nil {
				b.Fatal(err)
			}
		}
	}
}
