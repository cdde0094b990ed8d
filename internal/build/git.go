package build

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/meshroll/meshroll/internal/mesh"
)

// DefaultBranch is the main line a module's commits are ordered on when its
// Request names none.
const DefaultBranch = "main"

// Generation is the commit's first-parent depth on the repository's main
// line: the number of commits on the first-parent chain from the root to the
// commit, so that commits order exactly as they were merged. branch names
// the main line ("" means DefaultBranch; see Request.Branch for how it is
// found). A commit that is not on the first-parent chain of the main line (a
// commit of a side branch, or one merged only as a second parent) has no
// place in that order and is refused with a PermanentError, as are unknown
// commits and shallow clones, whose depths are not the real ones.
func Generation(ctx context.Context, repo, branch, commit string) (int64, error) {
	if err := mesh.ValidCommit(commit); err != nil {
		return 0, &PermanentError{err}
	}
	if err := commitExists(ctx, repo, commit); err != nil {
		return 0, err
	}
	shallow, err := git(ctx, repo, "rev-parse", "--is-shallow-repository")
	if err != nil {
		return 0, fmt.Errorf("generation of %s: %w", commit, err)
	}
	if shallow == "true" {
		return 0, &PermanentError{fmt.Errorf("repository %s is a shallow clone; generations need the whole main line (git fetch --unshallow)", repo)}
	}
	depth, err := firstParentDepth(ctx, repo, commit)
	if err != nil {
		return 0, err
	}
	lines, name, err := mainLines(ctx, repo, branch)
	if err != nil {
		if ctx.Err() != nil {
			// A git killed by the context looks like a missing branch.
			return 0, ctx.Err()
		}
		return 0, err
	}
	for _, ref := range lines {
		on, err := onFirstParentChain(ctx, repo, ref, commit, depth)
		if err != nil {
			return 0, err
		}
		if on {
			return depth, nil
		}
	}
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	return 0, &PermanentError{fmt.Errorf("commit %s is not on the main line of %s (branch %s); build merged commits only", commit, repo, name)}
}

func commitExists(ctx context.Context, repo, commit string) error {
	if _, err := git(ctx, repo, "cat-file", "-e", commit+"^{commit}"); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if _, serr := os.Stat(repo); serr != nil {
			return &PermanentError{fmt.Errorf("repository %s: %w", repo, serr)}
		}
		return &PermanentError{fmt.Errorf("commit %s is not in repository %s", commit, repo)}
	}
	return nil
}

func firstParentDepth(ctx context.Context, repo, rev string) (int64, error) {
	out, err := git(ctx, repo, "rev-list", "--first-parent", "--count", rev)
	if err != nil {
		return 0, fmt.Errorf("first-parent depth of %s: %w", rev, err)
	}
	n, err := strconv.ParseInt(out, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("first-parent depth of %s: %w", rev, err)
	}
	return n, nil
}

// onFirstParentChain reports whether commit, at first-parent depth depth, is
// on ref's first-parent chain: walking depth(ref)-depth first parents back
// from ref must land on it.
func onFirstParentChain(ctx context.Context, repo, ref, commit string, depth int64) (bool, error) {
	tip, err := firstParentDepth(ctx, repo, ref)
	if err != nil {
		return false, err
	}
	if tip < depth {
		return false, nil
	}
	at, err := git(ctx, repo, "rev-parse", "--verify", fmt.Sprintf("%s~%d^{commit}", ref, tip-depth))
	if err != nil {
		return false, fmt.Errorf("walk %s: %w", ref, err)
	}
	return at == commit, nil
}

// mainLines resolves the branch to the refs whose first-parent chains count
// as the main line, best first, and the name to use in messages.
//
// A named branch is refs/heads/<branch>, and refs/remotes/origin/<branch>
// too when the local branch is missing or is an ancestor of it (a clone
// that fetches but never fast-forwards its local branch). A diverged local
// branch wins alone: accepting both lines would give two commits one
// generation. With no branch given, DefaultBranch is tried the same way and
// then origin's default branch (refs/remotes/origin/HEAD). The current
// checkout's HEAD is never used: it may be any feature branch.
func mainLines(ctx context.Context, repo, branch string) ([]string, string, error) {
	name := branch
	if name == "" {
		name = DefaultBranch
	}
	if strings.HasPrefix(name, "-") || strings.Contains(name, "..") {
		return nil, name, &PermanentError{fmt.Errorf("branch %q is not a valid branch name", name)}
	}
	local, remote := "refs/heads/"+name, "refs/remotes/origin/"+name
	hasLocal, hasRemote := refExists(ctx, repo, local), refExists(ctx, repo, remote)
	switch {
	case hasLocal && hasRemote:
		if _, err := git(ctx, repo, "merge-base", "--is-ancestor", local, remote); err == nil {
			return []string{local, remote}, name, nil
		}
		return []string{local}, name, nil
	case hasLocal:
		return []string{local}, name, nil
	case hasRemote:
		return []string{remote}, name, nil
	}
	if branch == "" {
		if ref, err := git(ctx, repo, "symbolic-ref", "-q", "refs/remotes/origin/HEAD"); err == nil && ref != "" {
			return []string{ref}, strings.TrimPrefix(ref, "refs/remotes/"), nil
		}
	}
	return nil, name, &PermanentError{fmt.Errorf("main line branch %s not found in %s (neither refs/heads/%s nor refs/remotes/origin/%s); set the module's branch", name, repo, name, name)}
}

// ErrNoRepository is wrapped by CheckPath for a repository that is not
// there, or is not a git repository.
var ErrNoRepository = errors.New("not a git repository")

// CheckPath checks, before any build, that path (relative to the root of
// the repository, as Request.Path is) is a directory in repo: in its
// working tree or at the tip of its main line (branch, found as
// Generation finds it). Either will do, so that a clone that has not
// fetched a new module yet, and a bare clone, pass where they hold it.
// The error says where it looked.
func CheckPath(ctx context.Context, repo, branch, path string) error {
	if _, err := git(ctx, repo, "rev-parse", "--git-dir"); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if _, serr := os.Stat(repo); serr != nil {
			return fmt.Errorf("%w: %s does not exist", ErrNoRepository, repo)
		}
		return fmt.Errorf("%w: %s", ErrNoRepository, repo)
	}
	p, err := relPath("path", path)
	if err != nil {
		return err
	}
	looked := []string{}
	if top, err := git(ctx, repo, "rev-parse", "--show-toplevel"); err == nil && top != "" {
		if fi, err := os.Stat(filepath.Join(top, p)); err == nil && fi.IsDir() {
			return nil
		}
		looked = append(looked, "its working tree "+top)
	}
	if lines, name, err := mainLines(ctx, repo, branch); err == nil {
		for _, ref := range lines {
			if kind, err := git(ctx, repo, "cat-file", "-t", ref+":"+filepath.ToSlash(p)); err == nil && kind == "tree" {
				return nil
			}
		}
		looked = append(looked, "its main line "+name)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if len(looked) == 0 {
		looked = append(looked, "a working tree or main line, of which it has neither")
	}
	return fmt.Errorf("%q is not a directory in repository %s (looked in %s)", path, repo, strings.Join(looked, " and "))
}

func refExists(ctx context.Context, repo, ref string) bool {
	_, err := git(ctx, repo, "rev-parse", "--verify", "--quiet", ref+"^{commit}")
	return err == nil
}

// commitTime is the commit's committer time: when it was merged, which is
// the only time a reproducible image may carry.
func commitTime(ctx context.Context, repo, commit string) (time.Time, error) {
	out, err := git(ctx, repo, "show", "-s", "--format=%ct", commit)
	if err != nil {
		return time.Time{}, fmt.Errorf("commit time of %s: %w", commit, err)
	}
	sec, err := strconv.ParseInt(out, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("commit time of %s: %w", commit, err)
	}
	return time.Unix(sec, 0).UTC(), nil
}

// Checkout makes a clean, detached worktree of repo at commit in a new
// temporary directory and returns it with the function that removes it. The
// user's checkout is never touched (uncommitted changes there are
// irrelevant); only git's worktree bookkeeping in the repository changes,
// and cleanup undoes it. Hooks are disabled, so a post-checkout hook of the
// repository cannot run inside a build. dir's parent directory belongs to
// the checkout too and goes with it: builders keep their scratch files
// there, outside the worktree, so the tree they build stays clean.
func Checkout(ctx context.Context, repo, commit string) (dir string, cleanup func(), err error) {
	if err := mesh.ValidCommit(commit); err != nil {
		return "", nil, &PermanentError{fmt.Errorf("checkout: %w", err)}
	}
	// git's worktree bookkeeping is not safe to change concurrently (a
	// prune can take away a worktree another add is still creating), so
	// changes to one repository's worktrees take turns, between goroutines
	// and between worker processes sharing the repository.
	unlock, err := lockRepo(ctx, repo)
	if err != nil {
		return "", nil, fmt.Errorf("checkout %s of %s: %w", commit, repo, err)
	}
	// Worktrees of builds that died without cleaning up are forgotten here.
	_, _ = git(ctx, repo, "worktree", "prune")
	parent, err := os.MkdirTemp("", "meshroll-checkout-")
	if err != nil {
		unlock()
		return "", nil, fmt.Errorf("checkout: %w", err)
	}
	// The worktree's name in git's bookkeeping is its base name; a unique
	// one keeps concurrent checkouts of one repository apart.
	dir = filepath.Join(parent, filepath.Base(parent))
	cleanup = func() {
		// A fresh context: cleanup must run even when the build's was
		// cancelled.
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if unlock, err := lockRepo(cctx, repo); err == nil {
			defer unlock()
		}
		if _, err := git(cctx, repo, "worktree", "remove", "--force", dir); err != nil {
			_ = removeAll(parent)
			_, _ = git(cctx, repo, "worktree", "prune")
		}
		_ = removeAll(parent)
	}
	_, err = git(ctx, repo, "-c", "core.hooksPath="+os.DevNull, "worktree", "add", "--detach", "--quiet", dir, commit)
	unlock()
	if err != nil {
		cleanup()
		if ctx.Err() != nil {
			return "", nil, ctx.Err()
		}
		return "", nil, fmt.Errorf("checkout %s of %s: %w", commit, repo, err)
	}
	return dir, cleanup, nil
}

var (
	repoLocksMu sync.Mutex
	repoLocks   = map[string]*repoLock{}
)

// repoLock keeps changes to one repository's worktree bookkeeping apart: mu
// between goroutines, the flock on file between worker processes.
type repoLock struct {
	mu   sync.Mutex
	file string // "" until found
}

// RepoLockName is the file, in the repository's git directory, that worker
// processes sharing the repository lock while they add or remove worktrees.
const RepoLockName = "meshroll-worktree.lock"

// lockRepo takes the lock of a repository's worktree bookkeeping, in this
// process and across processes.
func lockRepo(ctx context.Context, repo string) (unlock func(), err error) {
	if abs, err := filepath.Abs(repo); err == nil {
		repo = abs
	}
	repoLocksMu.Lock()
	l, ok := repoLocks[repo]
	if !ok {
		l = &repoLock{}
		repoLocks[repo] = l
	}
	repoLocksMu.Unlock()
	l.mu.Lock()
	if l.file == "" {
		common, err := git(ctx, repo, "rev-parse", "--path-format=absolute", "--git-common-dir")
		if err != nil {
			l.mu.Unlock()
			return nil, fmt.Errorf("find the git directory of %s: %w", repo, err)
		}
		l.file = filepath.Join(common, RepoLockName)
	}
	funlock, err := lockFile(l.file)
	if err != nil {
		l.mu.Unlock()
		return nil, err
	}
	return func() { funlock(); l.mu.Unlock() }, nil
}

// removeAll is os.RemoveAll that first makes directories writable, because
// a build may leave read-only trees behind (Go's module cache does, when a
// command sets GOMODCACHE inside the checkout).
func removeAll(dir string) error {
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o755)
		}
		return nil
	})
	return os.RemoveAll(dir)
}

func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	cmd.Env = GitEnv()
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return strings.TrimSpace(out.String()), nil
}
