package build

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/registry"
)

// The steps here are the frame both image builders (Go and Command) put
// around their own work, kept in one place so that the two cannot drift
// apart on what a build promises: a request checked before any work, a
// generation taken from git before anything is built, a clean checkout
// that is always removed, a command that never sees the worker's secrets,
// and errors that name the module and commit.

// Options are the settings both image builders share: where their images
// go, what they add to the build's environment, and how often they report
// progress. Go and Command embed them.
type Options struct {
	// Registry is where images are pushed (Go), or expected (Command, where
	// it may be empty when every command writes a full image reference).
	Registry registry.Options
	// Repository is the path prefix of image repositories (default
	// DefaultRepository): images are <registry>/<Repository>/<module>.
	Repository string
	// Env is added to the build command's environment after the worker's
	// own (GOPROXY, GOFLAGS, GOCACHE, ...; never its MESHROLL_* and
	// TEMPORAL_* variables, which carry the worker's secrets).
	Env []string
	// ProgressInterval is how often Request.Progress is called (default
	// DefaultProgressInterval).
	ProgressInterval time.Duration
}

// repository is the image repository of module in Registry. A name the
// registry cannot take is the config's fault, so it is permanent.
func (o Options) repository(module string) (name.Repository, error) {
	repo, err := o.Registry.Repository(path.Join(prefix(o.Repository), module))
	if err != nil {
		return name.Repository{}, &PermanentError{err}
	}
	return repo, nil
}

// buildNamed validates r and runs a builder's own build, naming the module
// and commit in its error, so that a failure in the worker's log or a
// plan's history says which build it was.
func buildNamed(ctx context.Context, r Request, build func(context.Context, Request) (mesh.Build, error)) (mesh.Build, error) {
	b, err := mesh.Build{}, validate(r)
	if err == nil {
		b, err = build(ctx, r)
	}
	if err != nil {
		return mesh.Build{}, fmt.Errorf("build %s at %s: %w", r.Module, r.Commit, err)
	}
	return b, nil
}

// validate checks what every builder needs of a request before any work,
// so that a typo in the config is a permanent error, not a retried one.
func validate(r Request) error {
	if err := mesh.ValidName("module", r.Module); err != nil {
		return &PermanentError{err}
	}
	if err := mesh.ValidCommit(r.Commit); err != nil {
		return &PermanentError{err}
	}
	if r.Repo == "" {
		return &PermanentError{errors.New("no repository given")}
	}
	if _, err := relPath("path", r.Path); err != nil {
		return err
	}
	return nil
}

// job is one build under way: its output plumbing, its generation and,
// once checked out, its worktree.
type job struct {
	*run
	r   Request
	gen int64
	// dir is the checkout's root; modDir the module's directory in it.
	dir, modDir string
	cleanup     func()
}

// startJob starts the build's output and heartbeat and takes its
// generation. The caller defers job.end.
func startJob(ctx context.Context, r Request, interval time.Duration) (*job, error) {
	j := &job{run: startRun(ctx, r, interval), r: r, cleanup: func() {}}
	gen, err := Generation(ctx, r.Repo, r.Branch, r.Commit)
	if err != nil {
		j.end()
		return nil, err
	}
	j.gen = gen
	return j, nil
}

// checkout checks the commit out into a clean worktree and finds the
// module's directory in it; end removes the worktree.
func (j *job) checkout(ctx context.Context) error {
	j.logf("checking out %s at %s", j.r.Repo, j.r.Commit)
	dir, cleanup, err := Checkout(ctx, j.r.Repo, j.r.Commit)
	if err != nil {
		return err
	}
	j.dir, j.cleanup = dir, cleanup
	j.modDir, err = moduleDir(dir, j.r)
	return err
}

// end removes the checkout and stops the heartbeat.
func (j *job) end() {
	j.cleanup()
	j.stop()
}

// command runs argv in the module's directory with the worker's
// environment less its secrets, then env, then own; its output goes to the
// build's output and tail.
func (j *job) command(ctx context.Context, argv []string, env []string, own ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = j.modDir
	cmd.Env = slices.Concat(inheritedEnv(), env, own)
	cmd.Stdout, cmd.Stderr = j.out, j.out
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// built reports the finished build.
func (j *job) built(image, digest string) mesh.Build {
	j.logf("built %s@%s (generation %d)", image, digest, j.gen)
	return mesh.Build{Module: j.r.Module, Commit: j.r.Commit, Digest: digest, Generation: j.gen, Image: image}
}

// moduleDir is the module's directory in the checkout, which the commit
// must have.
func moduleDir(checkout string, r Request) (string, error) {
	p, err := relPath("path", r.Path)
	if err != nil {
		return "", err
	}
	d := filepath.Join(checkout, p)
	if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
		return "", &PermanentError{fmt.Errorf("path %q is not a directory at commit %s", r.Path, r.Commit)}
	}
	return d, nil
}
