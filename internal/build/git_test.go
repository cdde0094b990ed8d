package build

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestGeneration(t *testing.T) {
	h := helloHistory(t)
	ctx := context.Background()

	// A clone that fetched further commits without moving its local main
	// (the usual state of a worker's clone), and one whose local main has
	// diverged from origin's.
	origin := h.r
	stale := &repo{t: t, dir: t.TempDir()}
	stale.git("clone", "-q", origin.dir, stale.dir)
	after := origin.commit("after clone", map[string]string{"later.txt": "x"})
	stale.git("fetch", "-q", "origin")
	diverged := &repo{t: t, dir: t.TempDir()}
	diverged.git("clone", "-q", origin.dir, diverged.dir)
	diverged.git("reset", "-q", "--hard", "HEAD~1")
	local := diverged.commit("local only", map[string]string{"local.txt": "y"})

	// A repository whose main line is called trunk, cloned: no main at all,
	// and origin/HEAD says trunk.
	trunkOrigin := newRepo(t)
	trunkOrigin.git("checkout", "-q", "-b", "trunk")
	t1 := trunkOrigin.commit("t1", map[string]string{"a": "1"})
	trunk := &repo{t: t, dir: t.TempDir()}
	trunk.git("clone", "-q", trunkOrigin.dir, trunk.dir)
	trunk.git("checkout", "-q", "--detach")
	trunk.git("branch", "-q", "-D", "trunk")

	shallow := &repo{t: t, dir: t.TempDir()}
	shallow.git("clone", "-q", "--depth", "1", "file://"+origin.dir, shallow.dir)

	cases := []struct {
		name, dir, branch, commit string
		gen                       int64
		err                       string
	}{
		{name: "first", dir: origin.dir, commit: h.c1, gen: 1},
		{name: "second", dir: origin.dir, commit: h.c2, gen: 2},
		{name: "merge", dir: origin.dir, commit: h.merged, gen: 3},
		{name: "merged side commit", dir: origin.dir, commit: h.side, err: "is not on the main line of " + origin.dir + " (branch main)"},
		{name: "side commit on its own branch", dir: origin.dir, branch: "feature", commit: h.side, gen: 3},
		{name: "unknown branch", dir: origin.dir, branch: "release", commit: h.c1, err: "main line branch release not found"},
		{name: "unknown commit", dir: origin.dir, commit: strings.Repeat("cd", 20), err: "not in repository"},
		{name: "stale local main", dir: stale.dir, commit: after, gen: 4},
		{name: "stale clone, old commit", dir: stale.dir, commit: h.c2, gen: 2},
		{name: "diverged local main wins", dir: diverged.dir, commit: local, gen: 4},
		{name: "diverged: origin's commit refused", dir: diverged.dir, commit: after, err: "is not on the main line"},
		{name: "origin HEAD when no main", dir: trunk.dir, commit: t1, gen: 1},
		{name: "shallow clone", dir: shallow.dir, commit: after, err: "shallow clone"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			gen, err := Generation(ctx, c.dir, c.branch, c.commit)
			if c.err != "" {
				if err == nil || !IsPermanent(err) || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want a permanent error saying %q", err, c.err)
				}
				return
			}
			if err != nil || gen != c.gen {
				t.Fatalf("Generation = %d, %v; want %d", gen, err, c.gen)
			}
		})
	}
}

func TestGitDigestRefusesSideCommit(t *testing.T) {
	h := helloHistory(t)
	_, err := GitDigest{}.Build(context.Background(), Request{Module: "hello", Commit: h.side, Repo: h.r.dir, Path: "services/hello"})
	if err == nil || !IsPermanent(err) || !strings.Contains(err.Error(), "not on the main line") {
		t.Fatalf("err = %v, want the main-line refusal", err)
	}
}

func TestCheckoutIsCleanAndLeavesTheUserAlone(t *testing.T) {
	h := helloHistory(t)
	ctx := context.Background()
	before := h.r.git("status", "--porcelain")
	var wg sync.WaitGroup
	dirs := make([]string, 4)
	errs := make([]error, 4)
	for i := range dirs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			commit := []string{h.c1, h.c2}[i%2]
			dir, cleanup, err := Checkout(ctx, h.r.dir, commit)
			if err != nil {
				errs[i] = err
				return
			}
			defer cleanup()
			dirs[i] = dir
			got, err := os.ReadFile(filepath.Join(dir, "internal", "version", "version.go"))
			if err != nil {
				errs[i] = err
				return
			}
			if want := fmt.Sprintf("const V = \"%d\"", i%2+1); !strings.Contains(string(got), want) {
				errs[i] = fmt.Errorf("checkout of %s has %q, want %q", commit, got, want)
			}
			if _, err := os.Stat(filepath.Join(dir, "services", "hello", "broken.go")); !os.IsNotExist(err) {
				errs[i] = fmt.Errorf("checkout holds the user's untracked file: %v", err)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("checkout %s left behind", d)
		}
	}
	if after := h.r.git("status", "--porcelain"); after != before {
		t.Errorf("user's checkout changed:\nbefore %s\nafter %s", before, after)
	}
	if wt := h.r.git("worktree", "list", "--porcelain"); strings.Count(wt, "worktree ") != 1 {
		t.Errorf("worktrees left registered:\n%s", wt)
	}
	if head := h.r.git("rev-parse", "HEAD"); head != h.merged {
		t.Errorf("user's HEAD moved to %s", head)
	}
}

func TestCheckoutRunsNoHooks(t *testing.T) {
	r := newRepo(t)
	c := r.commit("c", map[string]string{"f": "x"})
	marker := filepath.Join(t.TempDir(), "hook-ran")
	hook := filepath.Join(r.dir, ".git", "hooks", "post-checkout")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, cleanup, err := Checkout(context.Background(), r.dir, c)
	if err != nil {
		t.Fatal(err)
	}
	cleanup()
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Error("the repository's post-checkout hook ran in a build checkout")
	}
}

func TestTailKeepsLastLines(t *testing.T) {
	tl := newTail()
	for i := range 100 {
		fmt.Fprintf(tl, "line %d\n", i)
	}
	_, _ = tl.Write([]byte("partial " + strings.Repeat("x", 2000)))
	lines := strings.Split(tl.String(), "\n")
	if len(lines) != tailLines+1 {
		t.Fatalf("kept %d lines", len(lines))
	}
	if lines[0] != "line 60" || lines[tailLines-1] != "line 99" {
		t.Errorf("kept %q .. %q", lines[0], lines[tailLines-1])
	}
	if len(lines[tailLines]) != maxLine {
		t.Errorf("long line kept at %d bytes", len(lines[tailLines]))
	}
}

func TestLineWriter(t *testing.T) {
	var got []string
	w := NewLineWriter(func(l string) { got = append(got, l) })
	_, _ = w.Write([]byte("a\r\nb"))
	_, _ = w.Write([]byte("c\nd"))
	_ = w.Close()
	if strings.Join(got, "|") != "a|bc|d" {
		t.Errorf("lines %q", got)
	}
}

// Checkouts hold a file lock in the repository's git directory while they
// change its worktrees, which is what keeps worker processes sharing the
// repository apart.
func TestCheckoutLocksTheRepositoryAcrossProcesses(t *testing.T) {
	r := newRepo(t)
	c := r.commit("one", map[string]string{"svc/VERSION": "one\n"})
	lock := filepath.Join(r.dir, ".git", RepoLockName)

	unlock, err := lockRepo(context.Background(), r.dir)
	if err != nil {
		t.Fatal(err)
	}
	if held, err := lockFileHeld(lock); err != nil || !held {
		t.Fatalf("while a checkout holds the repository, another process could take %s (held=%v, err=%v)", lock, held, err)
	}
	unlock()
	if held, err := lockFileHeld(lock); err != nil || held {
		t.Fatalf("%s still held after unlock (held=%v, err=%v)", lock, held, err)
	}

	// Three processes check the repository out at once, again and again:
	// without the lock, one's prune takes away another's half-made worktree.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmds := make([]*exec.Cmd, 3)
	outs := make([]*bytes.Buffer, len(cmds))
	for i := range cmds {
		cmds[i] = exec.Command(exe, "checkouts", r.dir, c, "10")
		cmds[i].Env = append(os.Environ(), helperEnv+"=1")
		outs[i] = &bytes.Buffer{}
		cmds[i].Stdout, cmds[i].Stderr = outs[i], outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("process %d: %v\n%s", i, err, outs[i])
		}
	}
	if out := r.git("worktree", "list", "--porcelain"); strings.Count(out, "worktree ") != 1 {
		t.Errorf("worktrees left behind:\n%s", out)
	}
}

// CheckPath finds a module's directory in the working tree or on the main
// line, and says where it looked when it is in neither.
func TestCheckPath(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	r.commit("modules", map[string]string{"services/web/main.go": "package main", "README": "x"})
	// Only in the working tree: a module not committed yet.
	r.write(map[string]string{"services/new/main.go": "package main"})
	// Only on the main line: a bare clone has no working tree.
	bare := t.TempDir()
	r.git("clone", "-q", "--bare", r.dir, bare)
	notRepo := t.TempDir()

	for _, tc := range []struct {
		name, repo, path, err string
		noRepo                bool
	}{
		{name: "committed", repo: r.dir, path: "services/web"},
		{name: "root", repo: r.dir, path: ""},
		{name: "working tree only", repo: r.dir, path: "services/new"},
		{name: "main line only (bare)", repo: bare, path: "services/web"},
		{name: "a subdirectory's repository", repo: filepath.Join(r.dir, "services"), path: "services/web"},
		{name: "mistyped", repo: r.dir, path: "services/wbe",
			err: `"services/wbe" is not a directory in repository ` + r.dir + ` (looked in its working tree ` + r.dir + ` and its main line main)`},
		{name: "a file", repo: r.dir, path: "README", err: `"README" is not a directory`},
		{name: "bare, mistyped", repo: bare, path: "services/new", err: "(looked in its main line main)"},
		{name: "outside", repo: r.dir, path: "../x", err: `path "../x" must be relative and inside the repository`},
		{name: "no repository", repo: notRepo, path: "x", noRepo: true, err: "not a git repository: " + notRepo},
		{name: "missing", repo: filepath.Join(notRepo, "gone"), path: "x", noRepo: true, err: "does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckPath(ctx, tc.repo, "", tc.path)
			if tc.err == "" {
				if err != nil {
					t.Fatalf("CheckPath = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("CheckPath = %v, want an error saying %q", err, tc.err)
			}
			if got := errors.Is(err, ErrNoRepository); got != tc.noRepo {
				t.Errorf("errors.Is(err, ErrNoRepository) = %v, want %v", got, tc.noRepo)
			}
		})
	}
}

// Git works on the repository it is pointed at even when the worker's
// environment names another, as a git hook's or `git bisect run`'s does:
// the commit is looked up, and the checkout made, in the module's own.
func TestGitIgnoresTheCallersRepository(t *testing.T) {
	mine := newRepo(t)
	commit := mine.commit("one", map[string]string{"a.txt": "1"})
	other := newRepo(t)
	other.commit("x", map[string]string{"b.txt": "1"})
	other.commit("y", map[string]string{"b.txt": "2"})
	t.Setenv("GIT_DIR", filepath.Join(other.dir, ".git"))
	t.Setenv("GIT_WORK_TREE", other.dir)
	t.Setenv("GIT_INDEX_FILE", filepath.Join(other.dir, ".git", "index"))

	gen, err := Generation(context.Background(), mine.dir, "", commit)
	if err != nil {
		t.Fatalf("Generation with GIT_DIR set elsewhere: %v", err)
	}
	if gen != 1 {
		t.Errorf("generation %d, want 1 (the module's repository has one commit; the other has two)", gen)
	}
}

func TestWithoutGitRepo(t *testing.T) {
	got := withoutGitRepo([]string{"PATH=/bin", "GIT_DIR=/x/.git", "GIT_WORK_TREE=/x", "GIT_INDEX_FILE=/x/i",
		"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=core.bare", "GIT_CONFIG_VALUE_0=true", "GIT_TERMINAL_PROMPT=0", "GIT_SSH_COMMAND=ssh -i k"})
	want := []string{"PATH=/bin", "GIT_TERMINAL_PROMPT=0", "GIT_SSH_COMMAND=ssh -i k"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("withoutGitRepo = %q, want %q", got, want)
	}
}
