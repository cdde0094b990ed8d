package build

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gitRepo makes a repository with n commits on main touching mod/, returning
// the commit ids oldest first.
func gitRepo(t *testing.T, n int) (string, []string) {
	t.Helper()
	dir := t.TempDir()
	run := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	run("init", "-q", "-b", "main")
	var commits []string
	for i := 0; i < n; i++ {
		if err := os.MkdirAll(filepath.Join(dir, "mod"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "mod", "main.go"), []byte("package main // "+string(rune('a'+i))), 0o644); err != nil {
			t.Fatal(err)
		}
		run("add", ".")
		run("commit", "-q", "-m", "c")
		commits = append(commits, run("rev-parse", "HEAD"))
	}
	return dir, commits
}

func TestGitDigestOrdersAndReproduces(t *testing.T) {
	dir, commits := gitRepo(t, 3)
	ctx := context.Background()
	var b GitDigest
	first, err := b.Build(ctx, Request{Module: "m", Commit: commits[0], Repo: dir, Path: "mod"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := b.Build(ctx, Request{Module: "m", Commit: commits[0], Repo: dir, Path: "mod"})
	if err != nil {
		t.Fatal(err)
	}
	if first.Digest != again.Digest {
		t.Errorf("same commit gave digests %s and %s", first.Digest, again.Digest)
	}
	last, err := b.Build(ctx, Request{Module: "m", Commit: commits[2], Repo: dir, Path: "mod"})
	if err != nil {
		t.Fatal(err)
	}
	if last.Generation <= first.Generation {
		t.Errorf("generation of newer commit %d not above older %d", last.Generation, first.Generation)
	}
	if last.Digest == first.Digest {
		t.Error("different commits gave one digest")
	}
}

func TestGitDigestRefusesUnknownCommit(t *testing.T) {
	dir, _ := gitRepo(t, 1)
	_, err := GitDigest{}.Build(context.Background(), Request{Module: "m", Commit: strings.Repeat("ab", 20), Repo: dir, Path: "mod"})
	if err == nil || !IsPermanent(err) {
		t.Fatalf("err = %v, want a permanent error", err)
	}
	if !strings.Contains(err.Error(), "not in repository") {
		t.Errorf("error %q does not say the commit is missing", err)
	}
}
