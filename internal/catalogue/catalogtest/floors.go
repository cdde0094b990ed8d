package catalogtest

import (
	"slices"
	"testing"

	"github.com/meshroll/meshroll/internal/catalogue"
	"github.com/meshroll/meshroll/internal/mesh"
)

func testNewestConverged(t *testing.T, c catalogue.Catalogue) {
	recordUpTo(t, c, "host", 3)
	expect(t, "NewestConverged", c.NewestConverged, "host", mesh.Build{})
	markConverged(t, c, Build("host", 2).Digest, "edge-1")
	expect(t, "NewestConverged", c.NewestConverged, "host", Build("host", 2))
	expect(t, "Newest", c.Newest, "host", Build("host", 3))
	markConverged(t, c, Build("host", 1).Digest, "edge-2")
	expect(t, "NewestConverged", c.NewestConverged, "host", Build("host", 2))
	markConverged(t, c, Build("host", 3).Digest, "edge-1")
	expect(t, "NewestConverged", c.NewestConverged, "host", Build("host", 3))
}

// The cases below are the floor as the catalogue keeps it: what a push may
// not go below on one machine, even when the host itself has forgotten.

func testNewestConvergedOnNone(t *testing.T, c catalogue.Catalogue) {
	recordUpTo(t, c, "host", 3)
	expectOn(t, c, "host", "edge-1", mesh.Build{})
}

func testNewestConvergedOnOtherMachine(t *testing.T, c catalogue.Catalogue) {
	recordUpTo(t, c, "host", 3)
	// A name that starts with edge-1 is another machine.
	for _, other := range []string{"edge-2", "edge-10"} {
		markConverged(t, c, Build("host", 2).Digest, other)
	}
	expect(t, "NewestConverged", c.NewestConverged, "host", Build("host", 2))
	expectOn(t, c, "host", "edge-1", mesh.Build{})
	expectOn(t, c, "host", "edge-10", Build("host", 2))
}

func testNewestConvergedOnHighest(t *testing.T, c catalogue.Catalogue) {
	// Recorded and marked out of order, so that neither the last recorded
	// nor the last marked is the highest generation.
	for _, gen := range []int64{2, 5, 1, 4, 3} {
		record(t, c, Build("host", gen), "plan/test")
	}
	for _, gen := range []int64{2, 4, 1} {
		markConverged(t, c, Build("host", gen).Digest, "edge-1")
	}
	expectOn(t, c, "host", "edge-1", Build("host", 4))
	markConverged(t, c, Build("host", 5).Digest, "edge-1")
	expectOn(t, c, "host", "edge-1", Build("host", 5))
}

func testNewestConvergedOnNotNewer(t *testing.T, c catalogue.Catalogue) {
	recordUpTo(t, c, "host", 4)
	markConverged(t, c, Build("host", 2).Digest, "edge-1")
	// 3 was recorded and never converged anywhere; 4 converged, but on
	// another machine. Neither is edge-1's.
	markConverged(t, c, Build("host", 4).Digest, "edge-2")
	expectOn(t, c, "host", "edge-1", Build("host", 2))
	expectOn(t, c, "host", "edge-2", Build("host", 4))
	expect(t, "NewestConverged", c.NewestConverged, "host", Build("host", 4))
}

func testNewestConvergedOnMarkAgain(t *testing.T, c catalogue.Catalogue) {
	recordUpTo(t, c, "host", 3)
	markConverged(t, c, Build("host", 2).Digest, "edge-1")
	markConverged(t, c, Build("host", 2).Digest, "edge-1")
	expectOn(t, c, "host", "edge-1", Build("host", 2))
	// A later report of an older build (a rollback ran there) does not lower
	// what the machine is known to have run.
	markConverged(t, c, Build("host", 1).Digest, "edge-1")
	markConverged(t, c, Build("host", 2).Digest, "edge-1")
	expectOn(t, c, "host", "edge-1", Build("host", 2))
}

func testNewestConvergedOnSharedDigest(t *testing.T, c catalogue.Catalogue) {
	// Reproducible builds: one digest at three commits, recorded out of
	// order; what ran is the digest, so the answer is Lookup's.
	shared := Build("host", 5).Digest
	for _, gen := range []int64{5, 7, 6} {
		b := Build("host", gen)
		b.Digest = shared
		record(t, c, b, "plan/test")
	}
	record(t, c, Build("host", 9), "plan/test")
	markConverged(t, c, Build("host", 9).Digest, "edge-2")
	markConverged(t, c, shared, "edge-1")
	want, ok, err := c.Lookup(t.Context(), shared)
	if err != nil || !ok || want.Generation != 7 {
		t.Fatalf("Lookup(shared) = %+v, %v, %v; want generation 7", want, ok, err)
	}
	expectOn(t, c, "host", "edge-1", want)
}

func testNewestConvergedOnPerModule(t *testing.T, c catalogue.Catalogue) {
	for gen := int64(1); gen <= 3; gen++ {
		record(t, c, Build("host", gen), "plan/host")
		record(t, c, Build("agent", gen), "plan/agent")
		record(t, c, Build("hostname", gen), "plan/hostname")
	}
	// One commit of the repository builds every module.
	sameCommit := Build("agent", 9)
	sameCommit.Commit = Build("host", 3).Commit
	record(t, c, sameCommit, "plan/agent")

	markConverged(t, c, Build("host", 3).Digest, "edge-1")
	expectOn(t, c, "host", "edge-1", Build("host", 3))
	expectOn(t, c, "agent", "edge-1", mesh.Build{})
	expectOn(t, c, "hostname", "edge-1", mesh.Build{})
	expectOn(t, c, "other", "edge-1", mesh.Build{})

	markConverged(t, c, Build("agent", 1).Digest, "edge-1")
	markConverged(t, c, sameCommit.Digest, "edge-2")
	expectOn(t, c, "agent", "edge-1", Build("agent", 1))
	expectOn(t, c, "agent", "edge-2", sameCommit)
	expectOn(t, c, "host", "edge-1", Build("host", 3))
	expectOn(t, c, "host", "edge-2", mesh.Build{})
}

func testMarkConvergedUnknown(t *testing.T, c catalogue.Catalogue) {
	if err := c.MarkConverged(t.Context(), Build("host", 1).Digest, "edge-1"); err == nil {
		t.Fatal("MarkConverged of a digest in an empty catalogue succeeded")
	}
	record(t, c, Build("host", 1), "plan/test")
	if err := c.MarkConverged(t.Context(), Build("host", 2).Digest, "edge-1"); err == nil {
		t.Fatal("MarkConverged of an unknown digest succeeded")
	}
	expect(t, "NewestConverged", c.NewestConverged, "host", mesh.Build{})
	if es := builds(t, c, "host", 0); len(es) != 1 || len(es[0].Converged) != 0 {
		t.Fatalf("Builds = %+v; want one entry converged nowhere", es)
	}
}

func testMarkConvergedTwice(t *testing.T, c catalogue.Catalogue) {
	b := Build("host", 1)
	record(t, c, b, "plan/test")
	markConverged(t, c, b.Digest, "edge-1")
	markConverged(t, c, b.Digest, "edge-1")
	es := builds(t, c, "host", 0)
	if len(es) != 1 || !slices.Equal(es[0].Converged, []string{"edge-1"}) {
		t.Fatalf("after marking twice on edge-1, Builds = %+v; want edge-1 listed once", es)
	}
	markConverged(t, c, b.Digest, "edge-2")
	markConverged(t, c, b.Digest, "edge-1")
	es = builds(t, c, "host", 0)
	if got := sorted(es[0].Converged); len(es) != 1 || !slices.Equal(got, []string{"edge-1", "edge-2"}) {
		t.Fatalf("Builds = %+v; want converged on edge-1 and edge-2, once each", es)
	}
}

func testMarkConvergedSharedDigest(t *testing.T, c catalogue.Catalogue) {
	a, b := Build("host", 5), Build("host", 7)
	b.Digest = a.Digest
	record(t, c, a, "plan/test")
	record(t, c, b, "plan/test")
	record(t, c, Build("host", 9), "plan/test")
	markConverged(t, c, a.Digest, "edge-1")
	// What runs is the digest; the newest build with it is what converged.
	expect(t, "NewestConverged", c.NewestConverged, "host", b)
	for _, e := range builds(t, c, "host", 0) {
		want := []string{"edge-1"}
		if e.Build.Generation == 9 {
			want = nil
		}
		if !slices.Equal(e.Converged, want) {
			t.Errorf("generation %d converged on %v, want %v", e.Build.Generation, e.Converged, want)
		}
	}
}
