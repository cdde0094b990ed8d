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
	"fmt"
	"testing"

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
		{"HostsEmpty", testHostsEmpty},
		{"HostReportNewestRevisionWins", testHostReportNewestRevisionWins},
		{"HostsHeardForwardOnly", testHostsHeardForwardOnly},
		{"HostErrorSinceAndCleared", testHostErrorSinceAndCleared},
		{"MachineFeed", testMachineFeed},
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
