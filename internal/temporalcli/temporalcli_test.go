package temporalcli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// isolate leaves only dirs for Path to search.
func isolate(t *testing.T) {
	t.Setenv(Env, "")
	t.Setenv("PATH", t.TempDir())
	t.Setenv("GOBIN", "")
	t.Setenv("GOPATH", t.TempDir())
}

func TestPathMissingWrapsErrNotFound(t *testing.T) {
	isolate(t)
	extra := t.TempDir()
	_, err := Path(extra)
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("want ErrNotFound, got %v", err)
	}
	for _, want := range []string{filepath.Join(extra, "temporal"), "scripts/install-temporal.sh", Version} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// fake writes a shell script standing in for a Temporal CLI whose
// --version says version (as release builds print it), into dir.
func fake(t *testing.T, dir, version string) string {
	t.Helper()
	p := filepath.Join(dir, "temporal")
	script := "#!/bin/sh\ntest \"$1\" = --version && echo \"temporal version " + version + " (Server 1.29.1, UI 2.42.1)\"\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPathFindsExtraDir(t *testing.T) {
	isolate(t)
	extra := t.TempDir()
	p := fake(t, extra, strings.TrimPrefix(Version, "v"))
	got, err := Path("", extra)
	if err != nil || got != p {
		t.Fatalf("Path = %q, %v; want %q", got, err, p)
	}
}

// Another version on PATH is passed over, named, for the pinned one
// further on; with none pinned, the error names what it passed over.
func TestFindPassesOverAnotherVersion(t *testing.T) {
	isolate(t)
	onPath := t.TempDir()
	t.Setenv("PATH", onPath)
	old := fake(t, onPath, "1.1.0")
	extra := t.TempDir()

	_, err := Find(t.Context(), extra)
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("want ErrNotFound, got %v", err)
	}
	if want := old + " (on PATH) is Temporal CLI v1.1.0, not " + Version; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}

	pinned := fake(t, extra, strings.TrimPrefix(Version, "v"))
	f, err := Find(t.Context(), extra)
	if err != nil {
		t.Fatal(err)
	}
	want := Found{Path: pinned, Version: Version, From: "in " + extra, Passed: []Other{{Path: old, From: "on PATH", Version: "v1.1.0"}}}
	if f.Path != want.Path || f.Version != want.Version || f.From != want.From || len(f.Passed) != 1 || f.Passed[0] != want.Passed[0] {
		t.Errorf("Find = %+v, want %+v", f, want)
	}
	if got := f.Passed[0].String(); got != old+" (on PATH) is Temporal CLI v1.1.0" {
		t.Errorf("Other.String = %q", got)
	}
}

// MESHROLL_TEMPORAL_CLI naming another version is refused, saying which
// binary, which version it is, which is wanted and what to do; one whose
// version cannot be read too.
func TestFindRefusesAnotherVersionInTheVariable(t *testing.T) {
	isolate(t)
	old := fake(t, t.TempDir(), "1.1.0")
	t.Setenv(Env, old)
	_, err := Find(t.Context())
	if err == nil || errors.Is(err, ErrNotFound) {
		t.Fatalf("want a refusal, got %v", err)
	}
	for _, want := range []string{old + " ($" + Env + ") is Temporal CLI v1.1.0", "meshroll runs Temporal CLI " + Version,
		"--search-attribute", "point " + Env + " at a " + Version + " binary, or unset it", "scripts/install-temporal.sh"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}

	mute := filepath.Join(t.TempDir(), "temporal")
	if err := os.WriteFile(mute, []byte("#!/bin/sh\nexit 2\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(Env, mute)
	_, err = Find(t.Context())
	if err == nil || !strings.Contains(err.Error(), mute+" ($"+Env+") is no Temporal CLI whose version can be read") {
		t.Errorf("err = %v", err)
	}
}

// A `go install` build says 0.0.0-DEV to --version; its build information
// says which release it is. Run with the real CLI when there is one.
func TestVersionOfAGoInstallBuild(t *testing.T) {
	cli := os.Getenv(Env)
	if cli == "" {
		t.Skip(Env + " is not set")
	}
	v, err := VersionOf(t.Context(), cli)
	if err != nil || v != Version {
		t.Fatalf("VersionOf(%s) = %q, %v; want %s", cli, v, err, Version)
	}
}

// A variable naming no binary is an error of its own, not "missing": the
// user meant that binary, so nothing should be installed instead.
func TestPathBadEnvIsNotNotFound(t *testing.T) {
	isolate(t)
	t.Setenv(Env, filepath.Join(t.TempDir(), "nope"))
	_, err := Path()
	if err == nil || errors.Is(err, ErrNotFound) {
		t.Fatalf("want an error other than ErrNotFound, got %v", err)
	}
}

func TestInstallWithoutGo(t *testing.T) {
	isolate(t)
	_, err := Install(t.Context(), t.TempDir(), nil)
	if !errors.Is(err, ErrNoGo) {
		t.Fatalf("want ErrNoGo, got %v", err)
	}
}

func TestSearchAttributeArgsInNameOrder(t *testing.T) {
	got := strings.Join(SearchAttributeArgs(map[string]string{"B": "Keyword", "A": "KeywordList"}), " ")
	if want := "--search-attribute A=KeywordList --search-attribute B=Keyword"; got != want {
		t.Errorf("SearchAttributeArgs = %q, want %q", got, want)
	}
}
