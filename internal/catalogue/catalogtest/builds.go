package catalogtest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshroll/meshroll/internal/catalogue"
	"github.com/meshroll/meshroll/internal/mesh"
)

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
