package catalogtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshroll/meshroll/internal/catalogue"
	"github.com/meshroll/meshroll/internal/mesh"
)

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
