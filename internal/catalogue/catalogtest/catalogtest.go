// Package catalogtest is the conformance suite for catalogue.Catalogue. Every
// implementation runs the same suite from its own tests, so that the push
// path can rely on the contract rather than on whichever store a worker was
// configured with: a catalogue that, say, lost a concurrent Record or judged
// a shared digest by its older commit would let a push downgrade a machine.
//
// It is an ordinary (non-test) package so that implementations' _test files
// in other packages can import it; nothing outside tests should.
package catalogtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshroll/meshroll/internal/catalogue"
	"github.com/meshroll/meshroll/internal/mesh"
)

// Concurrency sizes: enough goroutines and builds to make lost or duplicated
// records likely if an implementation has a check-then-insert race, small
// enough for -race on two cores.
const (
	workers          = 8
	buildsPerWorker  = 6
	sharedBuildCount = 10
)

// Run runs every clause of the catalogue contract against catalogues made by
// open, each subtest with a fresh one, including concurrent use of one
// handle. open returns a new, empty catalogue and registers its own cleanup
// (t.Cleanup) for whatever it opened.
func Run(t *testing.T, open func(t *testing.T) catalogue.Catalogue) {
	t.Helper()
	single := []struct {
		name string
		fn   func(t *testing.T, c catalogue.Catalogue)
	}{
		{"Empty", testEmpty},
		{"RecordIdempotent", testRecordIdempotent},
		{"RecordNotReproducible", testRecordNotReproducible},
		{"RecordRejectsInvalidDigest", testRecordRejectsInvalidDigest},
		{"LookupUnknown", testLookupUnknown},
		{"LookupSharedDigestHighestGeneration", testLookupSharedDigest},
		{"Newest", testNewest},
		{"NewestConverged", testNewestConverged},
		{"NewestConvergedOnNoneConverged", testNewestConvergedOnNone},
		{"NewestConvergedOnOtherMachineOnly", testNewestConvergedOnOtherMachine},
		{"NewestConvergedOnHighestGeneration", testNewestConvergedOnHighest},
		{"NewestConvergedOnNotANewerBuildConvergedElsewhere", testNewestConvergedOnNotNewer},
		{"NewestConvergedOnMarkAgain", testNewestConvergedOnMarkAgain},
		{"NewestConvergedOnSharedDigest", testNewestConvergedOnSharedDigest},
		{"NewestConvergedOnPerModule", testNewestConvergedOnPerModule},
		{"MarkConvergedUnknownDigest", testMarkConvergedUnknown},
		{"MarkConvergedTwice", testMarkConvergedTwice},
		{"MarkConvergedSharedDigest", testMarkConvergedSharedDigest},
		{"BuildsNewestFirstWithLimit", testBuildsOrderAndLimit},
		{"PlanAndBuiltAtKept", testPlanAndBuiltAt},
		{"PerModule", testPerModule},
		{"BuildByCommit", testBuildByCommit},
		{"BuildByCommitAmbiguous", testBuildByCommitAmbiguous},
		{"RejectUnknownBuild", testRejectUnknown},
		{"RejectNeedsReason", testRejectNeedsReason},
		{"RejectIdempotent", testRejectIdempotent},
		{"RejectedByDigest", testRejectedByDigest},
		{"RejectedSharedDigestEarliest", testRejectedSharedDigest},
		{"NewestConvergedSkipsRejected", testNewestConvergedSkipsRejected},
		{"FloorsSkipRejected", testFloorsSkipRejected},
		{"NewestHealthyBelow", testNewestHealthyBelow},
		{"NewestHealthyBelowSharedDigest", testNewestHealthyBelowSharedDigest},
		{"BuildsShowRejected", testBuildsShowRejected},
		{"FreezeNeedsReason", testFreezeNeedsReason},
		{"FreezeListed", testFreezeListed},
		{"UnfreezeExactScope", testUnfreezeExactScope},
		{"UnfreezeLiftsEveryFreezeOfTheScope", testUnfreezeEvery},
	}
	for _, tc := range single {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
	for _, tc := range concurrent {
		t.Run(tc.name, func(t *testing.T) {
			c := open(t)
			tc.fn(t, []catalogue.Catalogue{c})
		})
	}
}

// RunShared runs the clauses that concern several workers on one store:
// what one handle records, marks or rejects the other sees, a conflicting
// digest is refused across handles, goroutines spread over both handles
// recording the same and different builds at once leave exactly one entry
// per module and commit, none lost, and rejecting one build from both at
// once leaves one rejection that every caller is answered with. Implementations whose store can be shared (SQL)
// run it in addition to Run. open returns two handles on one new, empty
// store, as two workers would hold them (for a SQL catalogue: two
// connection pools on one database).
func RunShared(t *testing.T, open func(t *testing.T) (catalogue.Catalogue, catalogue.Catalogue)) {
	t.Helper()
	t.Run("SharedVisibility", func(t *testing.T) {
		a, b := open(t)
		testSharedVisibility(t, a, b)
	})
	for _, tc := range concurrent {
		t.Run(tc.name, func(t *testing.T) {
			a, b := open(t)
			tc.fn(t, []catalogue.Catalogue{a, b})
		})
	}
}

var concurrent = []struct {
	name string
	fn   func(t *testing.T, cs []catalogue.Catalogue)
}{
	{"ConcurrentSameBuilds", testConcurrentSame},
	{"ConcurrentDifferentBuilds", testConcurrentDifferent},
	{"ConcurrentMixed", testConcurrentMixed},
	{"ConcurrentReject", testConcurrentReject},
	{"ConcurrentUnfreeze", testConcurrentUnfreeze},
}

// Build returns a valid build of module at generation gen whose commit and
// digest are derived from both, so builds of different modules or
// generations never collide. Implementations' own tests use it too.
func Build(module string, gen int64) mesh.Build {
	return mesh.Build{
		Module:     module,
		Commit:     hash("commit", module, gen)[:40],
		Digest:     "sha256:" + hash("digest", module, gen),
		Generation: gen,
		Image:      "127.0.0.1:5000/meshroll/" + module,
	}
}

func hash(kind, module string, gen int64) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s/%s/%d", kind, module, gen))
	return hex.EncodeToString(sum[:])
}

func record(t *testing.T, c catalogue.Catalogue, b mesh.Build, plan string) {
	t.Helper()
	if err := c.Record(t.Context(), b, plan); err != nil {
		t.Fatalf("Record(%s gen %d): %v", b.Module, b.Generation, err)
	}
}

// recordUpTo records the module's builds of generations 1 to n.
func recordUpTo(t *testing.T, c catalogue.Catalogue, module string, n int64) {
	t.Helper()
	for gen := int64(1); gen <= n; gen++ {
		record(t, c, Build(module, gen), "plan/test")
	}
}

func markConverged(t *testing.T, c catalogue.Catalogue, digest, machine string) {
	t.Helper()
	if err := c.MarkConverged(t.Context(), digest, machine); err != nil {
		t.Fatalf("MarkConverged(%s, %s): %v", digest, machine, err)
	}
}

func builds(t *testing.T, c catalogue.Catalogue, module string, limit int) []catalogue.Entry {
	t.Helper()
	es, err := c.Builds(t.Context(), module, limit)
	if err != nil {
		t.Fatalf("Builds(%s, %d): %v", module, limit, err)
	}
	return es
}

func generations(es []catalogue.Entry) []int64 {
	out := make([]int64, 0, len(es))
	for _, e := range es {
		out = append(out, e.Build.Generation)
	}
	return out
}

type getter func(ctx context.Context, key string) (mesh.Build, bool, error)

// expect checks that get(key) finds want (all fields), or nothing when want
// is the zero Build.
func expect(t *testing.T, what string, get getter, key string, want mesh.Build) {
	t.Helper()
	got, ok, err := get(t.Context(), key)
	if err != nil {
		t.Fatalf("%s(%s): %v", what, key, err)
	}
	if want == (mesh.Build{}) {
		if ok {
			t.Fatalf("%s(%s) = %+v, want none", what, key, got)
		}
		return
	}
	if !ok {
		t.Fatalf("%s(%s) found nothing, want generation %d", what, key, want.Generation)
	}
	if got != want {
		t.Fatalf("%s(%s) = %+v, want %+v", what, key, got, want)
	}
}

// expectOn checks that NewestConvergedOn(module, machine) finds want, or
// nothing when want is the zero Build.
func expectOn(t *testing.T, c catalogue.Catalogue, module, machine string, want mesh.Build) {
	t.Helper()
	on := func(ctx context.Context, module string) (mesh.Build, bool, error) {
		return c.NewestConvergedOn(ctx, module, machine)
	}
	expect(t, "NewestConvergedOn "+machine, on, module, want)
}

func testEmpty(t *testing.T, c catalogue.Catalogue) {
	expect(t, "Lookup", c.Lookup, Build("host", 1).Digest, mesh.Build{})
	expect(t, "Newest", c.Newest, "host", mesh.Build{})
	expect(t, "NewestConverged", c.NewestConverged, "host", mesh.Build{})
	expectOn(t, c, "host", "edge-1", mesh.Build{})
	if es := builds(t, c, "host", 0); len(es) != 0 {
		t.Fatalf("Builds of an empty catalogue = %+v", es)
	}
}

func testRecordIdempotent(t *testing.T, c catalogue.Catalogue) {
	b := Build("host", 1)
	record(t, c, b, "plan/first")
	record(t, c, b, "plan/first")
	// A retried build activity of another plan is still the same build.
	record(t, c, b, "plan/retry")
	es := builds(t, c, "host", 0)
	if len(es) != 1 {
		t.Fatalf("after recording one build three times, Builds = %+v; want one entry", es)
	}
	if es[0].Build != b || es[0].Plan != "plan/first" {
		t.Fatalf("entry = %+v; want %+v built by plan/first", es[0], b)
	}
}

func testRecordNotReproducible(t *testing.T, c catalogue.Catalogue) {
	b := Build("host", 1)
	record(t, c, b, "plan/test")
	other := b
	other.Digest = Build("host", 9).Digest
	err := c.Record(t.Context(), other, "plan/test")
	if err == nil {
		t.Fatal("recording one module and commit with a second digest succeeded")
	}
	if !errors.Is(err, catalogue.ErrNotReproducible) {
		t.Fatalf("error %q does not say the build is not reproducible", err)
	}
	expect(t, "Lookup", c.Lookup, b.Digest, b)
	expect(t, "Lookup", c.Lookup, other.Digest, mesh.Build{})
	if es := builds(t, c, "host", 0); len(es) != 1 || es[0].Build != b {
		t.Fatalf("Builds = %+v; want only the first recording", es)
	}
}

func testRecordRejectsInvalidDigest(t *testing.T, c catalogue.Catalogue) {
	b := Build("host", 1)
	b.Digest = "latest"
	if err := c.Record(t.Context(), b, "plan/test"); err == nil {
		t.Fatal("Record accepted digest \"latest\"")
	}
	if es := builds(t, c, "host", 0); len(es) != 0 {
		t.Fatalf("Builds after a rejected Record = %+v", es)
	}
}

func testLookupUnknown(t *testing.T, c catalogue.Catalogue) {
	record(t, c, Build("host", 1), "plan/test")
	expect(t, "Lookup", c.Lookup, Build("host", 2).Digest, mesh.Build{})
	expect(t, "Lookup", c.Lookup, Build("agent", 1).Digest, mesh.Build{})
}

func testLookupSharedDigest(t *testing.T, c catalogue.Catalogue) {
	// Reproducible builds: the same content at three commits. Recorded out of
	// order, so that "last recorded" and "highest generation" differ.
	shared := Build("host", 5).Digest
	var bs []mesh.Build
	for _, gen := range []int64{5, 7, 6} {
		b := Build("host", gen)
		b.Digest = shared
		bs = append(bs, b)
		record(t, c, b, "plan/test")
	}
	expect(t, "Lookup", c.Lookup, shared, bs[1])
}

func testNewest(t *testing.T, c catalogue.Catalogue) {
	for _, gen := range []int64{3, 1, 4, 2} {
		record(t, c, Build("host", gen), "plan/test")
	}
	expect(t, "Newest", c.Newest, "host", Build("host", 4))
	noImage := Build("host", 10)
	noImage.Image = ""
	record(t, c, noImage, "plan/test")
	expect(t, "Newest", c.Newest, "host", noImage)
}

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

func testBuildsOrderAndLimit(t *testing.T, c catalogue.Catalogue) {
	for _, gen := range []int64{2, 5, 1, 4, 3} {
		record(t, c, Build("host", gen), "plan/test")
	}
	for _, tc := range []struct {
		limit int
		want  []int64
	}{
		{0, []int64{5, 4, 3, 2, 1}},
		{2, []int64{5, 4}},
		{1, []int64{5}},
		{5, []int64{5, 4, 3, 2, 1}},
		{10, []int64{5, 4, 3, 2, 1}},
	} {
		es := builds(t, c, "host", tc.limit)
		if got := generations(es); !slices.Equal(got, tc.want) {
			t.Errorf("Builds(limit %d) generations = %v, want %v", tc.limit, got, tc.want)
		}
		for _, e := range es {
			if e.Build != Build("host", e.Build.Generation) {
				t.Errorf("Builds(limit %d) entry %+v, want %+v", tc.limit, e.Build, Build("host", e.Build.Generation))
			}
		}
	}
	if es := builds(t, c, "agent", 0); len(es) != 0 {
		t.Errorf("Builds of a module with none = %+v", es)
	}
}

func testPlanAndBuiltAt(t *testing.T, c catalogue.Catalogue) {
	before := time.Now()
	record(t, c, Build("host", 1), "plan/one")
	after := time.Now()
	record(t, c, Build("host", 2), "")
	es := builds(t, c, "host", 0)
	if len(es) != 2 {
		t.Fatalf("Builds = %+v; want two", es)
	}
	one := es[1]
	if one.Plan != "plan/one" || es[0].Plan != "" {
		t.Errorf("plans = %q, %q; want \"plan/one\", \"\"", one.Plan, es[0].Plan)
	}
	// Stores may keep less than nanoseconds (PostgreSQL: microseconds).
	if one.BuiltAt.Before(before.Add(-time.Second)) || one.BuiltAt.After(after.Add(time.Second)) {
		t.Errorf("BuiltAt = %v, want between %v and %v", one.BuiltAt, before, after)
	}
	if len(one.Converged) != 0 {
		t.Errorf("a new build is converged on %v", one.Converged)
	}
	// Recording again, later and from another plan, keeps what was first known.
	time.Sleep(5 * time.Millisecond)
	record(t, c, Build("host", 1), "plan/two")
	again := builds(t, c, "host", 0)[1]
	if again.Plan != "plan/one" || !again.BuiltAt.Equal(one.BuiltAt) {
		t.Errorf("after recording again: plan %q built at %v; want plan/one at %v", again.Plan, again.BuiltAt, one.BuiltAt)
	}
	// And reading again gives the same time (no re-rounding on the way out).
	if got := builds(t, c, "host", 1)[0]; !got.BuiltAt.Equal(es[0].BuiltAt) {
		t.Errorf("BuiltAt read twice: %v, then %v", es[0].BuiltAt, got.BuiltAt)
	}
}

func testPerModule(t *testing.T, c catalogue.Catalogue) {
	for gen := int64(1); gen <= 3; gen++ {
		record(t, c, Build("host", gen), "plan/host")
	}
	record(t, c, Build("agent", 1), "plan/agent")
	record(t, c, Build("agent", 2), "plan/agent")
	// One commit of the repository builds every module: the same commit in
	// another module with another digest is no conflict.
	sameCommit := Build("agent", 3)
	sameCommit.Commit = Build("host", 3).Commit
	record(t, c, sameCommit, "plan/agent")

	markConverged(t, c, Build("host", 3).Digest, "edge-1")
	expect(t, "Newest", c.Newest, "host", Build("host", 3))
	expect(t, "Newest", c.Newest, "agent", sameCommit)
	expect(t, "NewestConverged", c.NewestConverged, "host", Build("host", 3))
	expect(t, "NewestConverged", c.NewestConverged, "agent", mesh.Build{})
	expect(t, "Newest", c.Newest, "other", mesh.Build{})
	for module, want := range map[string][]int64{"host": {3, 2, 1}, "agent": {3, 2, 1}} {
		es := builds(t, c, module, 0)
		if got := generations(es); !slices.Equal(got, want) {
			t.Errorf("Builds(%s) generations = %v, want %v", module, got, want)
		}
		for _, e := range es {
			if e.Build.Module != module {
				t.Errorf("Builds(%s) lists %+v", module, e.Build)
			}
		}
	}
}

// commitBuild is a build of module at gen with the given commit.
func commitBuild(module string, gen int64, commit string) mesh.Build {
	b := Build(module, gen)
	b.Commit = commit
	return b
}

func testBuildByCommit(t *testing.T, c catalogue.Catalogue) {
	recordUpTo(t, c, "host", 3)
	record(t, c, Build("agent", 1), "plan/test")
	// Commits need not be hex: an exact match is found whatever it is.
	record(t, c, commitBuild("odd", 1, "v1"), "plan/test")
	record(t, c, commitBuild("odd", 2, "abc"), "plan/test")
	full := Build("host", 2).Commit
	for _, tc := range []struct {
		name, module, commit string
		want                 mesh.Build // zero: none
		wantErr              bool
	}{
		{"full commit", "host", full, Build("host", 2), false},
		{"shortest prefix", "host", full[:catalogue.MinCommitPrefix], Build("host", 2), false},
		{"longer prefix", "host", full[:12], Build("host", 2), false},
		{"upper-case prefix", "host", strings.ToUpper(full[:10]), Build("host", 2), false},
		{"prefix too short", "host", full[:catalogue.MinCommitPrefix-1], mesh.Build{}, true},
		{"unknown commit", "host", Build("host", 9).Commit, mesh.Build{}, false},
		{"unknown prefix", "host", Build("host", 9).Commit[:8], mesh.Build{}, false},
		{"another module's commit", "host", Build("agent", 1).Commit, mesh.Build{}, false},
		{"another module's prefix", "host", Build("agent", 1).Commit[:8], mesh.Build{}, false},
		{"module with none", "other", full, mesh.Build{}, false},
		{"not hex", "host", "main", mesh.Build{}, false},
		{"empty", "host", "", mesh.Build{}, false},
		{"exact non-hex commit", "odd", "v1", commitBuild("odd", 1, "v1"), false},
		{"exact short hex commit", "odd", "abc", commitBuild("odd", 2, "abc"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := c.Build(t.Context(), tc.module, tc.commit)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("Build(%s, %q) = %+v, %v; want an error", tc.module, tc.commit, got, ok)
				}
				if errors.Is(err, catalogue.ErrAmbiguousCommit) {
					t.Fatalf("Build(%s, %q): %v; a short prefix is not ambiguous", tc.module, tc.commit, err)
				}
				if !strings.Contains(err.Error(), tc.commit) || !strings.Contains(err.Error(), fmt.Sprint(catalogue.MinCommitPrefix)) {
					t.Fatalf("Build(%s, %q): error %q should name the commit and how many digits to give", tc.module, tc.commit, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Build(%s, %q): %v", tc.module, tc.commit, err)
			}
			if want := tc.want != (mesh.Build{}); ok != want || got != tc.want {
				t.Fatalf("Build(%s, %q) = %+v, %v; want %+v, %v", tc.module, tc.commit, got, ok, tc.want, want)
			}
		})
	}
}

func testBuildByCommitAmbiguous(t *testing.T, c catalogue.Catalogue) {
	a := commitBuild("host", 10, "abcdef1"+strings.Repeat("0", 33))
	b := commitBuild("host", 11, "abcdef1"+strings.Repeat("1", 33))
	record(t, c, a, "plan/test")
	record(t, c, b, "plan/test")
	// The same prefix in another module is no ambiguity.
	record(t, c, commitBuild("agent", 1, "abcdef1"+strings.Repeat("2", 33)), "plan/test")
	got, ok, err := c.Build(t.Context(), "host", "abcdef1")
	if !errors.Is(err, catalogue.ErrAmbiguousCommit) {
		t.Fatalf("Build(host, abcdef1) = %+v, %v, %v; want ErrAmbiguousCommit", got, ok, err)
	}
	if ok {
		t.Fatalf("Build(host, abcdef1) found %+v along with its error", got)
	}
	for _, want := range []string{a.Commit, b.Commit} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name candidate %s", err, want)
		}
	}
	if strings.Contains(err.Error(), strings.Repeat("2", 33)) {
		t.Errorf("error %q names another module's commit", err)
	}
	expectBuild := func(commit string, want mesh.Build) {
		t.Helper()
		got, ok, err := c.Build(t.Context(), "host", commit)
		if err != nil || !ok || got != want {
			t.Fatalf("Build(host, %s) = %+v, %v, %v; want %+v", commit, got, ok, err, want)
		}
	}
	expectBuild("abcdef10", a)
	expectBuild("ABCDEF11", b)
	expectBuild(a.Commit, a)
}

// reject rejects b and checks the answer describes it.
func reject(t *testing.T, c catalogue.Catalogue, b mesh.Build, by, reason string) catalogue.Rejection {
	t.Helper()
	r, err := c.Reject(t.Context(), b.Module, b.Commit, by, reason)
	if err != nil {
		t.Fatalf("Reject(%s gen %d): %v", b.Module, b.Generation, err)
	}
	if r.Module != b.Module || r.Commit != b.Commit || r.Digest != b.Digest || r.Reason == "" || r.At.IsZero() {
		t.Fatalf("Reject(%s gen %d) = %+v; want the build's module, commit and digest, a reason and a time", b.Module, b.Generation, r)
	}
	return r
}

// sameRejection compares every field, times by instant (stores may hand
// them back in another location).
func sameRejection(a, b catalogue.Rejection) bool {
	ta, tb := a.At, b.At
	a.At, b.At = time.Time{}, time.Time{}
	return a == b && ta.Equal(tb)
}

// expectRejected checks Rejected(digest) answers want, or not rejected when
// want is nil.
func expectRejected(t *testing.T, c catalogue.Catalogue, digest string, want *catalogue.Rejection) {
	t.Helper()
	got, ok, err := c.Rejected(t.Context(), digest)
	if err != nil {
		t.Fatalf("Rejected(%s): %v", digest, err)
	}
	switch {
	case want == nil && ok:
		t.Fatalf("Rejected(%s) = %+v; want not rejected", digest, got)
	case want != nil && !ok:
		t.Fatalf("Rejected(%s) = not rejected; want %+v", digest, *want)
	case want != nil && !sameRejection(got, *want):
		t.Fatalf("Rejected(%s) = %+v; want %+v", digest, got, *want)
	}
}

// tick lets the clock move on, so that two rejections are not stamped alike
// (stores keep microseconds).
func tick() { time.Sleep(2 * time.Millisecond) }

func testRejectUnknown(t *testing.T, c catalogue.Catalogue) {
	if _, err := c.Reject(t.Context(), "host", Build("host", 1).Commit, "alice", "bad"); !errors.Is(err, catalogue.ErrUnknownBuild) {
		t.Fatalf("Reject in an empty catalogue: err = %v, want ErrUnknownBuild", err)
	}
	recordUpTo(t, c, "host", 2)
	record(t, c, Build("agent", 1), "plan/test")
	for _, tc := range []struct{ name, module, commit string }{
		{"unknown commit", "host", Build("host", 3).Commit},
		{"another module's commit", "host", Build("agent", 1).Commit},
		{"unknown module", "other", Build("host", 1).Commit},
		// Reject takes the full commit: the CLI completes a prefix with Build.
		{"a prefix", "host", Build("host", 1).Commit[:12]},
		{"empty commit", "host", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := c.Reject(t.Context(), tc.module, tc.commit, "alice", "bad")
			if !errors.Is(err, catalogue.ErrUnknownBuild) {
				t.Fatalf("Reject(%s, %q) = %+v, %v; want ErrUnknownBuild", tc.module, tc.commit, r, err)
			}
			if !strings.Contains(err.Error(), tc.module) || !strings.Contains(err.Error(), tc.commit) {
				t.Errorf("error %q does not name module %s and commit %q", err, tc.module, tc.commit)
			}
		})
	}
	for gen := int64(1); gen <= 2; gen++ {
		expectRejected(t, c, Build("host", gen).Digest, nil)
	}
	expectRejected(t, c, Build("agent", 1).Digest, nil)
}

func testRejectNeedsReason(t *testing.T, c catalogue.Catalogue) {
	b := Build("host", 1)
	record(t, c, b, "plan/test")
	markConverged(t, c, b.Digest, "edge-1")
	for _, reason := range []string{"", " ", "\t\n"} {
		r, err := c.Reject(t.Context(), b.Module, b.Commit, "alice", reason)
		if err == nil {
			t.Fatalf("Reject with reason %q = %+v; want an error", reason, r)
		}
		if errors.Is(err, catalogue.ErrUnknownBuild) {
			t.Fatalf("Reject with reason %q: %v; the build is known, the reason is missing", reason, err)
		}
	}
	expectRejected(t, c, b.Digest, nil)
	expect(t, "NewestConverged", c.NewestConverged, "host", b)
	// Who rejected may be unsaid; why may not.
	r := reject(t, c, b, "", "crashes on start")
	if r.By != "" || r.Reason != "crashes on start" {
		t.Fatalf("Reject without by = %+v", r)
	}
}

func testRejectIdempotent(t *testing.T, c catalogue.Catalogue) {
	recordUpTo(t, c, "host", 2)
	b := Build("host", 2)
	before := time.Now()
	first := reject(t, c, b, "alice", "crashes on start")
	after := time.Now()
	if first.By != "alice" || first.Reason != "crashes on start" {
		t.Fatalf("Reject = %+v; want by alice for crashes on start", first)
	}
	if first.At.Before(before.Add(-time.Second)) || first.At.After(after.Add(time.Second)) {
		t.Errorf("At = %v, want between %v and %v", first.At, before, after)
	}
	// A retried activity, then a second operator: each answered with the first.
	tick()
	for _, again := range []struct{ by, reason string }{{"alice", "crashes on start"}, {"bob", "leaks memory"}} {
		got := reject(t, c, b, again.by, again.reason)
		if !sameRejection(got, first) {
			t.Fatalf("Reject again by %s = %+v; want the first %+v", again.by, got, first)
		}
	}
	expectRejected(t, c, b.Digest, &first)
	es := builds(t, c, "host", 0)
	if len(es) != 2 || es[0].Rejected == nil || !sameRejection(*es[0].Rejected, first) {
		t.Fatalf("Builds = %+v; want generation 2 rejected as first", es)
	}
}

func testRejectedByDigest(t *testing.T, c catalogue.Catalogue) {
	recordUpTo(t, c, "host", 3)
	record(t, c, Build("agent", 1), "plan/test")
	expectRejected(t, c, Build("host", 2).Digest, nil)
	r := reject(t, c, Build("host", 2), "alice", "crashes on start")
	for _, tc := range []struct {
		digest string
		want   *catalogue.Rejection
	}{
		{Build("host", 2).Digest, &r},
		{Build("host", 1).Digest, nil},
		{Build("host", 3).Digest, nil},
		{Build("agent", 1).Digest, nil},
		{Build("host", 9).Digest, nil}, // not in the catalogue at all
	} {
		expectRejected(t, c, tc.digest, tc.want)
	}
}

// testRejectedSharedDigest is reproducible builds: one digest built at
// several commits. Rejecting any of them rejects the bits, and the answer is
// the earliest rejection whichever commit it was made at.
func testRejectedSharedDigest(t *testing.T, c catalogue.Catalogue) {
	for _, tc := range []struct {
		name   string
		module string
		order  []int64 // generations rejected, in this order; all share one digest
	}{
		{"older commit first", "host", []int64{5, 7}},
		{"newer commit first", "agent", []int64{7, 5}},
		{"one of three", "proxy", []int64{6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			shared := Build(tc.module, 5).Digest
			for _, gen := range []int64{5, 6, 7} {
				b := Build(tc.module, gen)
				b.Digest = shared
				record(t, c, b, "plan/test")
			}
			record(t, c, Build(tc.module, 8), "plan/test")
			var first catalogue.Rejection
			for i, gen := range tc.order {
				b := Build(tc.module, gen)
				b.Digest = shared
				r := reject(t, c, b, fmt.Sprintf("op-%d", i), fmt.Sprintf("reason %d", i))
				if i == 0 {
					first = r
				}
				tick()
			}
			expectRejected(t, c, shared, &first)
			expectRejected(t, c, Build(tc.module, 8).Digest, nil)
			for _, e := range builds(t, c, tc.module, 0) {
				if e.Build.Generation == 8 {
					if e.Rejected != nil {
						t.Errorf("generation 8 (its own digest) shows %+v", *e.Rejected)
					}
					continue
				}
				if e.Rejected == nil || !sameRejection(*e.Rejected, first) {
					t.Errorf("generation %d shows %+v; want the digest's first rejection %+v", e.Build.Generation, e.Rejected, first)
				}
			}
		})
	}
}

func testNewestConvergedSkipsRejected(t *testing.T, c catalogue.Catalogue) {
	for _, tc := range []struct {
		name      string
		converged []int64 // of generations 1 to 4, each on a machine of its own
		rejected  []int64
		shared    []int64 // generations that share generation 1's digest
		want      int64   // 0: none
	}{
		{"none rejected", []int64{1, 2, 3}, nil, nil, 3},
		{"the newest rejected", []int64{1, 2, 3}, []int64{3}, nil, 2},
		{"an older one rejected", []int64{1, 2, 3}, []int64{2}, nil, 3},
		{"the two newest rejected", []int64{1, 2, 3}, []int64{3, 2}, nil, 1},
		{"all converged rejected", []int64{1, 2, 3}, []int64{1, 2, 3}, nil, 0},
		{"a rejected build never converged", []int64{1, 2}, []int64{4}, nil, 2},
		{"another commit of the same bits rejected", []int64{1, 2}, []int64{1}, []int64{3}, 2},
		{"a newer commit of the same bits rejected", []int64{1, 2}, []int64{3}, []int64{3}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			module := strings.ReplaceAll(tc.name, " ", "-")
			bs := map[int64]mesh.Build{}
			for gen := int64(1); gen <= 4; gen++ {
				b := Build(module, gen)
				if slices.Contains(tc.shared, gen) {
					b.Digest = Build(module, 1).Digest
				}
				bs[gen] = b
				record(t, c, b, "plan/test")
			}
			for _, gen := range tc.converged {
				markConverged(t, c, bs[gen].Digest, fmt.Sprintf("edge-%d", gen))
			}
			for _, gen := range tc.rejected {
				reject(t, c, bs[gen], "alice", "bad")
			}
			expect(t, "NewestConverged", c.NewestConverged, module, bs[tc.want])
		})
	}
}

// testFloorsSkipRejected: a machine's floor is the newest build that ran
// there and is not rejected; what exists is still found, rejected or not.
func testFloorsSkipRejected(t *testing.T, c catalogue.Catalogue) {
	recordUpTo(t, c, "host", 3)
	markConverged(t, c, Build("host", 2).Digest, "edge-1")
	markConverged(t, c, Build("host", 3).Digest, "edge-2")
	markConverged(t, c, Build("host", 1).Digest, "edge-2")
	reject(t, c, Build("host", 3), "alice", "crashes on start")
	reject(t, c, Build("host", 2), "alice", "crashes on start")
	expectOn(t, c, "host", "edge-1", mesh.Build{})
	expectOn(t, c, "host", "edge-2", Build("host", 1))
	expect(t, "Newest", c.Newest, "host", Build("host", 3))
	expect(t, "Lookup", c.Lookup, Build("host", 3).Digest, Build("host", 3))
	build := func(ctx context.Context, commit string) (mesh.Build, bool, error) {
		return c.Build(ctx, "host", commit)
	}
	expect(t, "Build", build, Build("host", 3).Commit, Build("host", 3))
	expect(t, "NewestConverged", c.NewestConverged, "host", Build("host", 1))
}

func testNewestHealthyBelow(t *testing.T, c catalogue.Catalogue) {
	// 1, 2, 4, 5 and 6 ran somewhere; 3 never did; 4 was rejected.
	recordUpTo(t, c, "host", 6)
	record(t, c, Build("agent", 1), "plan/test")
	markConverged(t, c, Build("agent", 1).Digest, "edge-1")
	for gen, machine := range map[int64]string{1: "edge-1", 2: "edge-2", 4: "edge-1", 5: "edge-3", 6: "edge-1"} {
		markConverged(t, c, Build("host", gen).Digest, machine)
	}
	reject(t, c, Build("host", 4), "alice", "corrupts its state")
	for _, tc := range []struct {
		module string
		below  int64
		want   int64 // 0: none
	}{
		{"host", 100, 6},
		{"host", 7, 6},
		{"host", 6, 5},
		{"host", 5, 2}, // 4 is rejected, 3 never ran
		{"host", 4, 2},
		{"host", 3, 2},
		{"host", 2, 1},
		{"host", 1, 0},
		{"host", 0, 0},
		{"agent", 2, 1},
		{"agent", 1, 0},
		{"other", 100, 0},
	} {
		got, ok, err := c.NewestHealthyBelow(t.Context(), tc.module, tc.below)
		if err != nil {
			t.Fatalf("NewestHealthyBelow(%s, %d): %v", tc.module, tc.below, err)
		}
		want := mesh.Build{}
		if tc.want != 0 {
			want = Build(tc.module, tc.want)
		}
		if ok != (tc.want != 0) || got != want {
			t.Errorf("NewestHealthyBelow(%s, %d) = %+v, %v; want generation %d", tc.module, tc.below, got, ok, tc.want)
		}
	}
}

func testNewestHealthyBelowSharedDigest(t *testing.T, c catalogue.Catalogue) {
	// 2 and 7 are one digest, which ran as 2; 1 ran too, nothing else did.
	// Convergence is per digest, so 7 counts as having run, and a rejection
	// of 2 covers 7.
	recordUpTo(t, c, "host", 5)
	shared := Build("host", 2).Digest
	b7 := Build("host", 7)
	b7.Digest = shared
	record(t, c, b7, "plan/test")
	record(t, c, Build("host", 8), "plan/test")
	markConverged(t, c, shared, "edge-1")
	markConverged(t, c, Build("host", 1).Digest, "edge-1")
	expectBelow := func(below int64, want mesh.Build) {
		t.Helper()
		get := func(ctx context.Context, module string) (mesh.Build, bool, error) {
			return c.NewestHealthyBelow(ctx, module, below)
		}
		expect(t, fmt.Sprintf("NewestHealthyBelow %d", below), get, "host", want)
	}
	expectBelow(8, b7)
	expectBelow(7, Build("host", 2))
	reject(t, c, Build("host", 2), "alice", "bad bits")
	expectBelow(8, Build("host", 1))
	expectBelow(3, Build("host", 1))
}

func testBuildsShowRejected(t *testing.T, c catalogue.Catalogue) {
	recordUpTo(t, c, "host", 4)
	markConverged(t, c, Build("host", 3).Digest, "edge-1")
	markConverged(t, c, Build("host", 3).Digest, "edge-2")
	r3 := reject(t, c, Build("host", 3), "alice", "crashes on start")
	tick()
	r1 := reject(t, c, Build("host", 1), "", "leaks memory")
	want := map[int64]*catalogue.Rejection{3: &r3, 1: &r1}
	for _, tc := range []struct{ limit, entries int }{{0, 4}, {2, 2}, {3, 3}} {
		limit := tc.limit
		es := builds(t, c, "host", limit)
		if len(es) != tc.entries {
			t.Fatalf("Builds(limit %d) = %d entries, want %d", limit, len(es), tc.entries)
		}
		for _, e := range es {
			// The rejection joins the list without repeating or losing
			// the machines a build converged on.
			if e.Build.Generation == 3 && !slices.Equal(sorted(e.Converged), []string{"edge-1", "edge-2"}) {
				t.Errorf("Builds(limit %d): generation 3 converged on %v, want edge-1 and edge-2 once each", limit, e.Converged)
			}
			w := want[e.Build.Generation]
			switch {
			case w == nil && e.Rejected != nil:
				t.Errorf("Builds(limit %d): generation %d shows %+v, never rejected", limit, e.Build.Generation, *e.Rejected)
			case w != nil && (e.Rejected == nil || !sameRejection(*e.Rejected, *w)):
				t.Errorf("Builds(limit %d): generation %d shows %+v, want %+v", limit, e.Build.Generation, e.Rejected, *w)
			}
		}
	}
	// What Builds hands out is a copy: changing it changes nothing stored.
	es := builds(t, c, "host", 0)
	es[1].Rejected.Reason = "changed by a caller"
	expectRejected(t, c, Build("host", 3).Digest, &r3)
}

func testSharedVisibility(t *testing.T, a, b catalogue.Catalogue) {
	record(t, a, Build("host", 1), "plan/a")
	expect(t, "Lookup via the other handle", b.Lookup, Build("host", 1).Digest, Build("host", 1))
	record(t, b, Build("host", 1), "plan/b") // same build from the other worker: no-op
	other := Build("host", 1)
	other.Digest = Build("host", 2).Digest
	if err := b.Record(t.Context(), other, "plan/b"); !errors.Is(err, catalogue.ErrNotReproducible) {
		t.Fatalf("conflicting digest via the other handle: err = %v, want not reproducible", err)
	}
	markConverged(t, b, Build("host", 1).Digest, "edge-1")
	expect(t, "NewestConverged via the first handle", a.NewestConverged, "host", Build("host", 1))
	expectOn(t, a, "host", "edge-1", Build("host", 1))
	es := builds(t, a, "host", 0)
	if len(es) != 1 || es[0].Plan != "plan/a" || !slices.Equal(es[0].Converged, []string{"edge-1"}) {
		t.Fatalf("Builds = %+v; want one entry by plan/a converged on edge-1", es)
	}
	r := reject(t, a, Build("host", 1), "alice", "crashes on start")
	expectRejected(t, b, Build("host", 1).Digest, &r)
	if again := reject(t, b, Build("host", 1), "bob", "again"); !sameRejection(again, r) {
		t.Fatalf("rejecting again via the other handle = %+v, want the first %+v", again, r)
	}
	expect(t, "NewestConverged via the other handle", b.NewestConverged, "host", mesh.Build{})
}

// parallel runs fn(i, handle) for i in [0, n) at once, each goroutine on one
// of cs in turn, and fails the test with every error.
func parallel(t *testing.T, cs []catalogue.Catalogue, n int, fn func(ctx context.Context, i int, c catalogue.Catalogue) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			if err := fn(t.Context(), i, cs[i%len(cs)]); err != nil {
				errs <- fmt.Errorf("goroutine %d: %w", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
}

// shuffled returns gens 1..n in an order that differs per goroutine.
func shuffled(n int, seed int) []int64 {
	gens := make([]int64, n)
	for i := range gens {
		gens[i] = int64(i + 1)
	}
	r := rand.New(rand.NewPCG(uint64(seed), 0x6d657368))
	r.Shuffle(len(gens), func(i, j int) { gens[i], gens[j] = gens[j], gens[i] })
	return gens
}

// checkExactly fails unless every handle lists exactly want (by generation,
// newest first), each with its own build.
func checkExactly(t *testing.T, cs []catalogue.Catalogue, module string, want []int64) {
	t.Helper()
	slices.Sort(want)
	slices.Reverse(want)
	for h, c := range cs {
		es := builds(t, c, module, 0)
		if got := generations(es); !slices.Equal(got, want) {
			t.Fatalf("handle %d: Builds(%s) has %d entries %v, want %d %v", h, module, len(got), got, len(want), want)
		}
		for _, e := range es {
			if e.Build != Build(module, e.Build.Generation) {
				t.Fatalf("handle %d: entry %+v, want %+v", h, e.Build, Build(module, e.Build.Generation))
			}
		}
	}
}

// testConcurrentSame has every goroutine record the same builds: half of
// them in one order (so that they collide on every build, as retried
// activities do), half each in its own.
func testConcurrentSame(t *testing.T, cs []catalogue.Catalogue) {
	parallel(t, cs, workers, func(ctx context.Context, i int, c catalogue.Catalogue) error {
		order := shuffled(sharedBuildCount, i)
		if i%2 == 0 {
			slices.Sort(order)
		}
		for _, gen := range order {
			if err := c.Record(ctx, Build("host", gen), fmt.Sprintf("plan/%d", i)); err != nil {
				return err
			}
		}
		return nil
	})
	want := shuffled(sharedBuildCount, 0)
	checkExactly(t, cs, "host", want)
}

func testConcurrentDifferent(t *testing.T, cs []catalogue.Catalogue) {
	parallel(t, cs, workers, func(ctx context.Context, i int, c catalogue.Catalogue) error {
		for k := range buildsPerWorker {
			gen := int64(i*buildsPerWorker + k + 1)
			if err := c.Record(ctx, Build("host", gen), fmt.Sprintf("plan/%d", i)); err != nil {
				return err
			}
		}
		return nil
	})
	checkExactly(t, cs, "host", shuffled(workers*buildsPerWorker, 0))
}

// testConcurrentMixed has every goroutine record the shared builds and its
// own, in its own order, and mark each shared build converged on its own
// machine, all at once.
func testConcurrentMixed(t *testing.T, cs []catalogue.Catalogue) {
	const ownBase = 1000
	parallel(t, cs, workers, func(ctx context.Context, i int, c catalogue.Catalogue) error {
		machine := fmt.Sprintf("edge-%d", i)
		for k, gen := range shuffled(sharedBuildCount, i) {
			b := Build("host", gen)
			if err := c.Record(ctx, b, fmt.Sprintf("plan/%d", i)); err != nil {
				return err
			}
			if err := c.MarkConverged(ctx, b.Digest, machine); err != nil {
				return err
			}
			if k < buildsPerWorker {
				if err := c.Record(ctx, Build("host", int64(ownBase+i*buildsPerWorker+k)), machine); err != nil {
					return err
				}
			}
			if _, ok, err := c.Lookup(ctx, b.Digest); err != nil || !ok {
				return fmt.Errorf("look up a build just recorded: found %v, err %v", ok, err)
			}
		}
		return nil
	})
	want := shuffled(sharedBuildCount, 0)
	for i := range workers * buildsPerWorker {
		want = append(want, int64(ownBase+i))
	}
	checkExactly(t, cs, "host", want)
	var machines []string
	for i := range workers {
		machines = append(machines, fmt.Sprintf("edge-%d", i))
	}
	for h, c := range cs {
		for _, e := range builds(t, c, "host", 0) {
			want := machines
			if e.Build.Generation >= ownBase {
				want = nil
			}
			if got := sorted(e.Converged); !slices.Equal(got, sorted(want)) {
				t.Fatalf("handle %d: generation %d converged on %v, want %v", h, e.Build.Generation, got, want)
			}
		}
		expect(t, "NewestConverged", c.NewestConverged, "host", Build("host", sharedBuildCount))
		for _, machine := range machines {
			expectOn(t, c, "host", machine, Build("host", sharedBuildCount))
		}
		expectOn(t, c, "host", "edge-unmarked", mesh.Build{})
	}
}

// testConcurrentReject has every goroutine reject one build that all share,
// each with its own words, and one of a few others: every build ends with
// one rejection, and every caller was answered with it.
func testConcurrentReject(t *testing.T, cs []catalogue.Catalogue) {
	const others = 3
	recordUpTo(t, cs[0], "host", 1+others)
	for gen := int64(1); gen <= 1+others; gen++ {
		markConverged(t, cs[0], Build("host", gen).Digest, "edge-1")
	}
	got := make([][2]catalogue.Rejection, workers)
	parallel(t, cs, workers, func(ctx context.Context, i int, c catalogue.Catalogue) error {
		for k, gen := range []int64{1, int64(2 + i%others)} {
			b := Build("host", gen)
			r, err := c.Reject(ctx, b.Module, b.Commit, fmt.Sprintf("op-%d", i), fmt.Sprintf("reason %d", i))
			if err != nil {
				return err
			}
			got[i][k] = r
		}
		return nil
	})
	first := map[int64]catalogue.Rejection{}
	for i := range workers {
		for k, gen := range []int64{1, int64(2 + i%others)} {
			r := got[i][k]
			if r.Commit != Build("host", gen).Commit {
				t.Fatalf("goroutine %d rejecting generation %d was answered %+v", i, gen, r)
			}
			if f, ok := first[gen]; !ok {
				first[gen] = r
			} else if !sameRejection(f, r) {
				t.Fatalf("generation %d: answered %+v and %+v; want one rejection", gen, f, r)
			}
		}
	}
	for h, c := range cs {
		for gen, r := range first {
			expectRejected(t, c, Build("host", gen).Digest, &r)
		}
		for _, e := range builds(t, c, "host", 0) {
			if r, ok := first[e.Build.Generation]; !ok || e.Rejected == nil || !sameRejection(*e.Rejected, r) {
				t.Fatalf("handle %d: generation %d shows %+v, want %+v", h, e.Build.Generation, e.Rejected, r)
			}
		}
		expect(t, "NewestConverged", c.NewestConverged, "host", mesh.Build{})
		expectOn(t, c, "host", "edge-1", mesh.Build{})
	}
}

func sorted(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// freeze freezes module on machine and checks the answer describes it.
func freeze(t *testing.T, c catalogue.Catalogue, module, machine, by, reason string) catalogue.Freeze {
	t.Helper()
	f, err := c.Freeze(t.Context(), module, machine, by, reason)
	if err != nil {
		t.Fatalf("Freeze(%q, %q): %v", module, machine, err)
	}
	if f.ID == 0 || f.Module != module || f.Machine != machine || f.By != by || f.Reason != reason ||
		f.At.IsZero() || f.LiftedAt != nil || f.LiftedBy != "" {
		t.Fatalf("Freeze(%q, %q, %q, %q) = %+v; want it with an ID and a time, active", module, machine, by, reason, f)
	}
	return f
}

// sameFreeze compares every field, times by instant.
func sameFreeze(a, b catalogue.Freeze) bool {
	la, lb := a.LiftedAt, b.LiftedAt
	if (la == nil) != (lb == nil) || (la != nil && !la.Equal(*lb)) {
		return false
	}
	ta, tb := a.At, b.At
	a.At, b.At, a.LiftedAt, b.LiftedAt = time.Time{}, time.Time{}, nil, nil
	return a == b && ta.Equal(tb)
}

// expectFreezes checks Freezes lists want, in order.
func expectFreezes(t *testing.T, c catalogue.Catalogue, want ...catalogue.Freeze) {
	t.Helper()
	got, err := c.Freezes(t.Context())
	if err != nil {
		t.Fatalf("Freezes: %v", err)
	}
	ok := len(got) == len(want)
	for i := 0; ok && i < len(got); i++ {
		ok = sameFreeze(got[i], want[i])
	}
	if !ok {
		t.Fatalf("Freezes = %+v; want %+v", got, want)
	}
}

func testFreezeNeedsReason(t *testing.T, c catalogue.Catalogue) {
	for _, reason := range []string{"", " ", "\t\n"} {
		if f, err := c.Freeze(t.Context(), "host", "", "alice", reason); err == nil {
			t.Fatalf("Freeze with reason %q = %+v; want an error", reason, f)
		}
	}
	expectFreezes(t, c)
	// Who froze may be unsaid; why may not.
	f := freeze(t, c, "", "", "", "release week")
	expectFreezes(t, c, f)
}

func testFreezeListed(t *testing.T, c catalogue.Catalogue) {
	expectFreezes(t, c)
	before := time.Now()
	all := freeze(t, c, "", "", "alice", "release week")
	tick()
	mod := freeze(t, c, "host", "", "bob", "incident 42")
	tick()
	mach := freeze(t, c, "", "edge-1", "carol", "disk swap")
	tick()
	both := freeze(t, c, "host", "control-node", "dave", "controller upgrade")
	after := time.Now()
	ids := map[int64]bool{}
	for _, f := range []catalogue.Freeze{all, mod, mach, both} {
		if ids[f.ID] {
			t.Fatalf("two freezes with ID %d", f.ID)
		}
		ids[f.ID] = true
		if f.At.Before(before.Add(-time.Second)) || f.At.After(after.Add(time.Second)) {
			t.Errorf("freeze %d At = %v, want between %v and %v", f.ID, f.At, before, after)
		}
	}
	expectFreezes(t, c, all, mod, mach, both)
}

// testUnfreezeExactScope: unfreezing lifts the freezes of exactly that
// scope, never a wider or narrower one, marks them lifted by whom and when,
// and a second unfreeze finds nothing to lift.
func testUnfreezeExactScope(t *testing.T, c catalogue.Catalogue) {
	all := freeze(t, c, "", "", "alice", "release week")
	mod := freeze(t, c, "host", "", "bob", "incident 42")
	mach := freeze(t, c, "", "edge-1", "carol", "disk swap")
	both := freeze(t, c, "host", "edge-1", "dave", "controller upgrade")
	for _, scope := range [][2]string{{"metrics", ""}, {"", "edge-2"}, {"metrics", "edge-1"}} {
		if got, err := c.Unfreeze(t.Context(), scope[0], scope[1], "erin"); err != nil || len(got) != 0 {
			t.Fatalf("Unfreeze(%q, %q) = %+v, %v; want nothing lifted", scope[0], scope[1], got, err)
		}
	}
	expectFreezes(t, c, all, mod, mach, both)

	before := time.Now()
	got, err := c.Unfreeze(t.Context(), "host", "", "erin")
	after := time.Now()
	if err != nil || len(got) != 1 || got[0].ID != mod.ID || got[0].LiftedBy != "erin" || got[0].LiftedAt == nil {
		t.Fatalf("Unfreeze(host, \"\") = %+v, %v; want freeze %d lifted by erin", got, err, mod.ID)
	}
	if l := *got[0].LiftedAt; l.Before(before.Add(-time.Second)) || l.After(after.Add(time.Second)) {
		t.Errorf("LiftedAt = %v, want between %v and %v", l, before, after)
	}
	if got[0].Reason != mod.Reason || got[0].By != mod.By || !got[0].At.Equal(mod.At) {
		t.Errorf("lifted %+v; want the freeze as taken %+v", got[0], mod)
	}
	expectFreezes(t, c, all, mach, both)
	if again, err := c.Unfreeze(t.Context(), "host", "", "erin"); err != nil || len(again) != 0 {
		t.Fatalf("Unfreeze(host) again = %+v, %v; want nothing lifted", again, err)
	}

	for _, f := range []catalogue.Freeze{both, mach, all} {
		got, err := c.Unfreeze(t.Context(), f.Module, f.Machine, "")
		if err != nil || len(got) != 1 || got[0].ID != f.ID || got[0].LiftedAt == nil {
			t.Fatalf("Unfreeze(%q, %q) = %+v, %v; want freeze %d lifted", f.Module, f.Machine, got, err, f.ID)
		}
	}
	expectFreezes(t, c)
	// Lifted freezes are kept: a new freeze gets a new ID.
	if f := freeze(t, c, "host", "", "bob", "again"); ids(all, mod, mach, both)[f.ID] {
		t.Fatalf("a new freeze reused ID %d", f.ID)
	}
}

func ids(fs ...catalogue.Freeze) map[int64]bool {
	out := map[int64]bool{}
	for _, f := range fs {
		out[f.ID] = true
	}
	return out
}

// testUnfreezeEvery: freezing a scope twice keeps both freezes, each with
// its reason, and one unfreeze lifts both, oldest first.
func testUnfreezeEvery(t *testing.T, c catalogue.Catalogue) {
	a := freeze(t, c, "host", "", "alice", "incident 42")
	tick()
	b := freeze(t, c, "host", "", "bob", "incident 43")
	expectFreezes(t, c, a, b)
	got, err := c.Unfreeze(t.Context(), "host", "", "carol")
	if err != nil || len(got) != 2 || got[0].ID != a.ID || got[1].ID != b.ID {
		t.Fatalf("Unfreeze(host) = %+v, %v; want %d and %d lifted", got, err, a.ID, b.ID)
	}
	expectFreezes(t, c)
}

// testConcurrentUnfreeze has every goroutine take a freeze of one scope,
// then all lift it at once: every freeze is lifted by exactly one caller.
func testConcurrentUnfreeze(t *testing.T, cs []catalogue.Catalogue) {
	parallel(t, cs, workers, func(ctx context.Context, i int, c catalogue.Catalogue) error {
		_, err := c.Freeze(ctx, "host", "", fmt.Sprintf("op-%d", i), fmt.Sprintf("reason %d", i))
		return err
	})
	var mu sync.Mutex
	lifted := map[int64]int{}
	parallel(t, cs, workers, func(ctx context.Context, i int, c catalogue.Catalogue) error {
		got, err := c.Unfreeze(ctx, "host", "", fmt.Sprintf("op-%d", i))
		mu.Lock()
		defer mu.Unlock()
		for _, f := range got {
			lifted[f.ID]++
		}
		return err
	})
	if len(lifted) != workers {
		t.Fatalf("%d freezes lifted; want %d", len(lifted), workers)
	}
	for id, n := range lifted {
		if n != 1 {
			t.Errorf("freeze %d lifted by %d callers; want one", id, n)
		}
	}
	for _, c := range cs {
		expectFreezes(t, c)
	}
}
