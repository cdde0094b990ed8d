package build

import (
	"context"
	"testing"
)

// A clone fetches what was pushed to its origin, after which the pushed
// commit is on its main line and the diff names the files it changed.
func TestFetchAndChangedPaths(t *testing.T) {
	ctx := context.Background()
	origin := newRepo(t)
	c1 := origin.commit("one", map[string]string{"examples/host/main.go": "1", "examples/api/main.go": "1"})
	clone := &repo{t: t, dir: t.TempDir()}
	clone.git("clone", "-q", origin.dir, clone.dir)
	c2 := origin.commit("two", map[string]string{"examples/host/main.go": "2", "README": "x"})

	if HasCommit(ctx, clone.dir, c2) {
		t.Fatal("the clone holds the new commit before any fetch")
	}
	if err := Fetch(ctx, clone.dir, ""); err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	if !HasCommit(ctx, clone.dir, c2) {
		t.Fatal("the clone lacks the pushed commit after Fetch")
	}
	if gen, err := Generation(ctx, clone.dir, "", c2); err != nil || gen != 2 {
		t.Fatalf("Generation after Fetch = %d, %v; want 2", gen, err)
	}
	if err := Fetch(ctx, origin.dir, "main"); err != nil {
		t.Fatalf("Fetch of a repository without an origin: %v; want nothing to do", err)
	}
	if err := Fetch(ctx, clone.dir, "--upload-pack=x"); err == nil {
		t.Fatal("Fetch took an option for a branch")
	}
	if got := OriginURL(ctx, clone.dir); got != origin.dir {
		t.Errorf("OriginURL = %q, want %q", got, origin.dir)
	}
	if got := OriginURL(ctx, origin.dir); got != "" {
		t.Errorf("OriginURL without an origin = %q, want empty", got)
	}

	paths, err := ChangedPaths(ctx, clone.dir, c1, c2)
	if err != nil {
		t.Fatalf("ChangedPaths: %v", err)
	}
	for _, tc := range []struct {
		path string
		want bool
	}{
		{"examples/host", true},
		{"./examples/host/", true},
		{"examples/api", false},
		{"examples/hos", false},
		{".", true},
	} {
		if got := Touches(tc.path, paths); got != tc.want {
			t.Errorf("Touches(%q, %q) = %v, want %v", tc.path, paths, got, tc.want)
		}
	}
}
