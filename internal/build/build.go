// Package build turns a module at a commit into a build: an image digest
// and the generation that orders it among the module's builds. Builder is
// the contract the build activity calls; which builder a module uses is its
// kind in the mesh config, and Select dispatches on it.
//
// Go (KindGo, the default) builds the module's main package into a
// reproducible one-layer OCI image and pushes it, so that the same commit
// always gives the same digest and a retried build pushes nothing. Command
// (KindCommand) runs the module's own recipe, which pushes an image and
// reports its digest. Both work in a clean worktree of the commit
// (Checkout), never in the user's checkout, and both take the generation
// from git (Generation: the commit's first-parent depth on the main line,
// so commits order as they were merged; a commit off the main line is
// refused). GitDigest derives a digest from the tree without producing an
// image; it remains for exercising the orchestration without a registry.
//
// A *PermanentError is a failure a retry cannot fix (a compile error, a
// commit off the main line, a registry refusing the credentials) and
// carries the last lines of the build's output; any other error (an
// unreachable registry, a killed build) is worth retrying.
package build

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/meshroll/meshroll/internal/mesh"
)

// Request is one build to make. The activity fills it from the module's
// entry in the mesh config; zero fields take the defaults documented on
// them, so a Request with only Module, Commit, Repo and Path still builds.
type Request struct {
	Module string
	Commit string
	// Repo is the repository's directory; Path the module's directory in it.
	Repo string
	Path string

	// Kind picks the builder when the builder is a Select: KindGo (the
	// default) or KindCommand.
	Kind string
	// Main is the package to build, relative to Path (default ".").
	Main string
	// Branch is the main line whose first-parent chain orders the module's
	// commits (default DefaultBranch, "main"). The local branch is used,
	// or origin's branch of that name when there is no local one or the
	// local one is behind it; with Branch unset and no "main" at all,
	// origin's default branch (refs/remotes/origin/HEAD). The branch the
	// user's checkout happens to be on is never used: it may be a feature
	// branch, whose commits must not become generations.
	Branch string
	// Source is the image's org.opencontainers.image.source (the
	// repository's URL), or none. It is part of the image, so it must not
	// come from the clone being built (whose origin each worker may spell
	// differently): the activity takes it from the module's config.
	Source string
	// Output receives the build's output (git, the compiler, the command)
	// as it is produced; the activity points it at the worker's log with
	// the plan's ID. Nil discards it. It is written from one goroutine at a
	// time.
	Output io.Writer
	// Progress is called every few seconds while the build runs, from
	// another goroutine, so that the activity can heartbeat through a long
	// compile or push. Nil is fine.
	Progress func()
	// Command is the argv the command builder runs in the module's
	// directory of a clean checkout (no shell: use {"sh", "-c", "..."} for
	// one).
	Command []string
	// DigestFile is where the command writes the pushed image's digest,
	// relative to the module's directory in the checkout. Default: a file
	// outside the checkout. Either way MESHROLL_DIGEST_FILE names it.
	DigestFile string
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
	gen, err := Generation(ctx, r.Repo, r.Branch, r.Commit)
	if err != nil {
		return mesh.Build{}, fmt.Errorf("build %s: %w", r.Module, err)
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

// Kinds of builder, as a module names them in the mesh config.
const (
	// KindGo builds the module's main package with the Go toolchain into
	// an image (Go).
	KindGo = "go"
	// KindCommand runs the module's own build command, which pushes an
	// image and reports its digest (Command).
	KindCommand = "command"
)

// Select is the builder of a mesh whose modules use different kinds: it
// hands each request to the builder of its Kind ("" is KindGo), so the
// activity keeps calling one Builder.
type Select map[string]Builder

// Build implements Builder.
func (s Select) Build(ctx context.Context, r Request) (mesh.Build, error) {
	kind := r.Kind
	if kind == "" {
		kind = KindGo
	}
	b, ok := s[kind]
	if !ok || b == nil {
		known := make([]string, 0, len(s))
		for k := range s {
			known = append(known, k)
		}
		sort.Strings(known)
		return mesh.Build{}, &PermanentError{fmt.Errorf("build %s: no builder of kind %q (this worker has %v)", r.Module, kind, known)}
	}
	return b.Build(ctx, r)
}
