// Package build turns a module at a commit into a build: a digest and the
// generation that orders it among the module's builds. Builder is the
// contract the build activity calls; the OCI image builder drops in behind it.
//
// GitDigest is this stage's builder: it derives the generation from git
// (first-parent depth of the commit, so commits order as they were merged)
// and a reproducible digest from the module, commit and the tree at the
// module's path, without producing an image. It exists so the orchestration
// can be exercised on real repositories before images are built.
package build

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"

	"github.com/meshroll/meshroll/internal/mesh"
)

// Request is one build to make.
type Request struct {
	Module string
	Commit string
	// Repo is the repository's directory; Path the module's directory in it.
	Repo string
	Path string
}

// Builder builds modules. Build returns a *PermanentError for a failure a
// retry cannot fix (a commit that does not exist, a broken recipe).
type Builder interface {
	Build(ctx context.Context, r Request) (mesh.Build, error)
}

// PermanentError is a build failure that retrying will not fix.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// IsPermanent reports whether err is a PermanentError.
func IsPermanent(err error) bool {
	var p *PermanentError
	return errors.As(err, &p)
}

// GitDigest builds a digest without an image; see the package comment.
type GitDigest struct{}

// Build implements Builder.
func (GitDigest) Build(ctx context.Context, r Request) (mesh.Build, error) {
	if err := mesh.ValidCommit(r.Commit); err != nil {
		return mesh.Build{}, &PermanentError{fmt.Errorf("build %s: %w", r.Module, err)}
	}
	if _, err := git(ctx, r.Repo, "cat-file", "-e", r.Commit+"^{commit}"); err != nil {
		return mesh.Build{}, &PermanentError{fmt.Errorf("build %s: commit %s is not in repository %s", r.Module, r.Commit, r.Repo)}
	}
	depth, err := git(ctx, r.Repo, "rev-list", "--first-parent", "--count", r.Commit)
	if err != nil {
		return mesh.Build{}, fmt.Errorf("build %s: generation of %s: %w", r.Module, r.Commit, err)
	}
	gen, err := strconv.ParseInt(depth, 10, 64)
	if err != nil {
		return mesh.Build{}, fmt.Errorf("build %s: generation of %s: %w", r.Module, r.Commit, err)
	}
	spec := r.Commit + "^{tree}"
	if p := strings.Trim(r.Path, "/"); p != "" && p != "." {
		spec = r.Commit + ":" + p
	}
	tree, err := git(ctx, r.Repo, "rev-parse", "--verify", spec)
	if err != nil {
		return mesh.Build{}, &PermanentError{fmt.Errorf("build %s: path %q not found at %s", r.Module, r.Path, r.Commit)}
	}
	sum := sha256.Sum256([]byte("meshroll/git-digest\x00" + r.Module + "\x00" + r.Commit + "\x00" + tree))
	return mesh.Build{
		Module:     r.Module,
		Commit:     r.Commit,
		Digest:     fmt.Sprintf("sha256:%x", sum),
		Generation: gen,
	}, nil
}

func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return strings.TrimSpace(out.String()), nil
}
