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

func TestPathFindsExtraDir(t *testing.T) {
	isolate(t)
	extra := t.TempDir()
	p := filepath.Join(extra, "temporal")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := Path("", extra)
	if err != nil || got != p {
		t.Fatalf("Path = %q, %v; want %q", got, err, p)
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
