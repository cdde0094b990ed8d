package build

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/meshroll/meshroll/internal/mesh"
)

// DefaultRepository prefixes the repositories images are pushed to:
// <registry>/meshroll/<module>.
const DefaultRepository = "meshroll"

// Go is the default builder: it checks the module's repository out at the
// commit into a clean worktree, builds the module's main package with
// CGO_ENABLED=0 and -trimpath, wraps the binary into a one-layer OCI image
// whose entrypoint is /app/<module>, and pushes it.
//
// The image is a function of the commit (and the Go toolchain): the binary
// carries no paths or build ID, the layer's entries carry the commit's time
// and root ownership, and the config and annotations carry the commit's time
// rather than the clock's. So the same commit gives the same digest, and a
// retried build finds its image already in the registry and pushes nothing.
//
// Options.Env reaches the go command; CGO_ENABLED, GOOS and GOARCH are set
// by the builder and cannot be overridden. The builder never adds -mod=mod:
// a build uses the commit's go.mod and go.sum as they are, and needs no
// network when the module cache holds its dependencies.
type Go struct {
	Options
	// Arch is the image's GOARCH (default runtime.GOARCH); the OS is
	// always linux, which is what host agents run.
	Arch string
	// GoCommand is the go binary (default "go" on PATH).
	GoCommand string
}

// Build implements Builder.
func (g *Go) Build(ctx context.Context, r Request) (mesh.Build, error) {
	return buildNamed(ctx, r, g.build)
}

func (g *Go) build(ctx context.Context, r Request) (mesh.Build, error) {
	mainPkg, err := mainPackage(r.Main)
	if err != nil {
		return mesh.Build{}, err
	}
	arch := g.Arch
	if arch == "" {
		arch = runtime.GOARCH
	}
	repo, err := g.repository(r.Module)
	if err != nil {
		return mesh.Build{}, err
	}

	j, err := startJob(ctx, r, g.ProgressInterval)
	if err != nil {
		return mesh.Build{}, err
	}
	defer j.end()
	created, err := commitTime(ctx, r.Repo, r.Commit)
	if err != nil {
		return mesh.Build{}, err
	}
	opts, done, err := session(ctx, g.Registry)
	if err != nil {
		return mesh.Build{}, err
	}
	defer done()
	if err := checkRegistry(opts, repo, r.Commit); err != nil {
		return mesh.Build{}, err
	}
	if err := j.checkout(ctx); err != nil {
		return mesh.Build{}, err
	}
	// Scratch space beside the worktree, removed with it.
	out := filepath.Join(filepath.Dir(j.dir), "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		return mesh.Build{}, fmt.Errorf("build output: %w", err)
	}

	bin := filepath.Join(out, r.Module)
	goCmd := g.GoCommand
	if goCmd == "" {
		goCmd = "go"
	}
	args := []string{"build", "-trimpath", "-ldflags=-buildid=", "-o", bin, mainPkg}
	j.logf("%s %s (in %s, GOOS=linux GOARCH=%s CGO_ENABLED=0)", goCmd, strings.Join(args, " "), displayPath(r.Path), arch)
	cmd := j.command(ctx, append([]string{goCmd}, args...), g.Env, "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	if err := cmd.Run(); err != nil {
		return mesh.Build{}, commandFailure(ctx, "go build "+mainPkg, err, j.tail)
	}

	img, err := goImage(bin, out, imageMeta{
		Module:  r.Module,
		Commit:  r.Commit,
		Source:  r.Source,
		Created: created,
		Arch:    arch,
		Recipe:  "go build -trimpath " + mainPkg,
	})
	if err != nil {
		return mesh.Build{}, fmt.Errorf("image: %w", err)
	}
	digest, err := push(opts, repo, r.Commit, img, j.run)
	if err != nil {
		return mesh.Build{}, err
	}
	return j.built(repo.Name(), digest), nil
}

// relPath cleans a path that must stay inside the checkout.
func relPath(what, p string) (string, error) {
	if p == "" {
		return ".", nil
	}
	c := filepath.Clean(filepath.FromSlash(p))
	if !filepath.IsLocal(c) {
		return "", &PermanentError{fmt.Errorf("%s %q must be relative and inside the repository", what, p)}
	}
	return c, nil
}

// mainPackage is the go build argument for Request.Main: a package path
// relative to the module's directory.
func mainPackage(m string) (string, error) {
	c, err := relPath("main package", m)
	if err != nil {
		return "", err
	}
	if c == "." {
		return ".", nil
	}
	return "./" + filepath.ToSlash(c), nil
}

func displayPath(p string) string {
	if p == "" {
		return "."
	}
	return p
}

func prefix(p string) string {
	if p = strings.Trim(p, "/"); p == "" {
		return DefaultRepository
	}
	return p
}

// commandFailure classifies a failed build command. A command that exits
// with an error has failed on what the commit says (a compile error, a
// broken recipe) and is permanent, unless its output shows the network
// failed under it, and so is a program the worker does not have; one killed
// by a signal (the OOM killer, a worker shutting down) is worth retrying.
func commandFailure(ctx context.Context, what string, err error, t *tail) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", what, ctx.Err())
	}
	if errors.Is(err, exec.ErrNotFound) {
		// A typo in the config, or a tool the worker lacks: retrying
		// would fail the same way until someone changes one of them.
		return &PermanentError{fmt.Errorf("%s: program not found on this worker (install it or fix the module's config): %w", what, err)}
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return fmt.Errorf("%s could not run on this worker: %w", what, err)
	}
	if !ee.Exited() {
		return failure(what+" was killed", err, t)
	}
	if transientOutput(t.String()) {
		return failure(what+" failed on the network", err, t)
	}
	return &PermanentError{failure(what+" failed", err, t)}
}

// transientOutput reports whether a failed build's output blames the
// network (fetching a module, most often) rather than the source.
func transientOutput(out string) bool {
	for _, s := range []string{
		"dial tcp", "i/o timeout", "connection refused", "connection reset",
		"TLS handshake timeout", "no such host", "temporary failure in name resolution",
		"502 Bad Gateway", "503 Service Unavailable", "504 Gateway Timeout",
	} {
		if strings.Contains(out, s) {
			return true
		}
	}
	return false
}
