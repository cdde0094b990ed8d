package build

import (
	"context"
	"fmt"
	"strings"
)

// Fetch brings a module's clone up to date with its origin before a build
// the git host announced (the merge receiver's): it fetches branch (""
// means DefaultBranch) from the remote named origin into
// refs/remotes/origin/<branch>, which Generation counts as the main line,
// and leaves the local branch and working tree alone. A repository without
// an origin is itself where pushes land (a bare repository, or the clone
// the git host serves from) and has nothing to fetch. The one place
// meshroll fetches: builds read the clone as it is.
func Fetch(ctx context.Context, repo, branch string) error {
	if branch == "" {
		branch = DefaultBranch
	}
	if strings.HasPrefix(branch, "-") || strings.Contains(branch, "..") {
		return &PermanentError{fmt.Errorf("branch %q is not a valid branch name", branch)}
	}
	if _, err := git(ctx, repo, "remote", "get-url", "origin"); err != nil {
		return nil
	}
	refspec := fmt.Sprintf("+refs/heads/%s:refs/remotes/origin/%s", branch, branch)
	if _, err := git(ctx, repo, "fetch", "--quiet", "--no-tags", "origin", refspec); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("fetch %s of %s: %w", branch, repo, err)
	}
	return nil
}

// OriginURL is the URL of the clone's origin remote, "" when it has none:
// what a git host's push event names when the module's repo is a clone of
// it.
func OriginURL(ctx context.Context, repo string) string {
	u, err := git(ctx, repo, "remote", "get-url", "origin")
	if err != nil {
		return ""
	}
	return u
}

// HasCommit reports whether the repository holds the commit.
func HasCommit(ctx context.Context, repo, commit string) bool {
	return commitExists(ctx, repo, commit) == nil
}

// ChangedPaths lists the files (relative to the repository's root, with
// forward slashes) that differ between commits before and after, both of
// which the repository must hold.
func ChangedPaths(ctx context.Context, repo, before, after string) ([]string, error) {
	out, err := git(ctx, repo, "diff", "--name-only", "--no-renames", "-z", before, after, "--")
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("changes from %s to %s: %w", before, after, err)
	}
	var paths []string
	for _, p := range strings.Split(out, "\x00") {
		if p != "" {
			paths = append(paths, p)
		}
	}
	return paths, nil
}

// Touches reports whether a change to any of paths (as ChangedPaths
// lists them) touches the module at path: a file in its directory, or
// anything at all for a module at the repository's root.
func Touches(path string, paths []string) bool {
	dir := strings.Trim(strings.TrimPrefix(strings.ReplaceAll(path, "\\", "/"), "./"), "/")
	if dir == "" || dir == "." {
		return len(paths) > 0
	}
	for _, p := range paths {
		if p == dir || strings.HasPrefix(p, dir+"/") {
			return true
		}
	}
	return false
}
