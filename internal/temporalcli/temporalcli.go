// Package temporalcli finds, and when asked installs, the official Temporal
// CLI, whose `temporal server start-dev` is the Temporal meshroll develops
// and tests against.
//
// It is its own package, outside the test support in internal/devserver,
// because two kinds of program need the same answer to "which temporal
// binary?": the integration tests and the worker's --dev mode. Both must
// run the same pinned version with the same server settings, or a green
// test run says nothing about what a developer runs.
package temporalcli

import (
	"context"
	"errors"
	"fmt"
	"go/build"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Env names the environment variable that points at the temporal binary.
// When it is set it wins and must name an executable: someone who set it
// meant that binary, so a typo is an error rather than a silent fallback.
const Env = "MESHROLL_TEMPORAL_CLI"

// Version is the Temporal CLI version the project pins (and CI installs),
// so that the dev server's behaviour does not drift under the tests.
const Version = "v1.5.1"

// Package is the CLI's main package, as `go install` takes it.
const Package = "github.com/temporalio/cli/cmd/temporal"

// InstallHint tells how to get the CLI by hand.
const InstallHint = "run scripts/install-temporal.sh (it runs `go install " + Package + "@" +
	Version + "`; the first build takes about 6 minutes) and/or set " + Env + " to the binary"

// ErrNotFound is wrapped by Path when no candidate exists, so that a caller
// able to install the CLI can tell "missing" from "MESHROLL_TEMPORAL_CLI
// names something that is not a binary".
var ErrNotFound = errors.New("temporal CLI not found")

// ErrNoGo is wrapped by Install when the go command is not on PATH: the CLI
// is built from source with it.
var ErrNoGo = errors.New("go not found on PATH")

// FastDynamicConfig is passed to every dev server meshroll starts:
//   - one task queue partition makes matching (and so every workflow and
//     activity task) prompt on a small box;
//   - eager activity dispatch hands an activity a workflow schedules
//     straight back to the worker that scheduled it, in the answer to its
//     workflow task, saving a poll round trip per push (the Go SDK asks for
//     it; servers up to 1.31 ship it off);
//   - the history service reads its transfer queue, which is how every new
//     workflow task reaches matching, at most 20 times a second per shard
//     by default, and a dev server has one shard: under steady load every
//     workflow task then waits 30-50 ms to be dispatched (a 3-machine plan
//     right after another took 0.42 s instead of 0.10-0.14 s). A dev
//     server is one process on one machine; the limit protects a shared
//     database, which it does not have.
var FastDynamicConfig = []string{
	"--dynamic-config-value", "matching.numTaskqueueReadPartitions=1",
	"--dynamic-config-value", "matching.numTaskqueueWritePartitions=1",
	"--dynamic-config-value", "system.enableActivityEagerExecution=true",
	"--dynamic-config-value", "history.transferProcessorMaxPollRPS=1000",
}

// SearchAttributeArgs are the dev server's flags that register types
// (name -> type, such as meshapi.SearchAttributeTypes), in name order so
// that the command line is the same every time.
func SearchAttributeArgs(types map[string]string) []string {
	names := make([]string, 0, len(types))
	for n := range types {
		names = append(names, n)
	}
	slices.Sort(names)
	args := make([]string, 0, 2*len(names))
	for _, n := range names {
		args = append(args, "--search-attribute", n+"="+types[n])
	}
	return args
}

// Path finds the temporal CLI: $MESHROLL_TEMPORAL_CLI if set (it must
// exist), else `temporal` on PATH, else $GOBIN/temporal, else temporal in
// each GOPATH's bin, else temporal in each of extraDirs (where a caller
// installs it itself). A missing CLI is an error wrapping ErrNotFound that
// says where it looked and how to install it.
func Path(extraDirs ...string) (string, error) {
	if p := os.Getenv(Env); p != "" {
		if err := isExecutable(p); err != nil {
			return "", fmt.Errorf("%s=%q: %w; %s", Env, p, err, InstallHint)
		}
		return p, nil
	}
	if p, err := exec.LookPath("temporal"); err == nil {
		return p, nil
	}
	var candidates []string
	if gobin := os.Getenv("GOBIN"); gobin != "" {
		candidates = append(candidates, filepath.Join(gobin, "temporal"))
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		gopath = build.Default.GOPATH // $HOME/go
	}
	for _, gp := range filepath.SplitList(gopath) {
		if gp != "" {
			candidates = append(candidates, filepath.Join(gp, "bin", "temporal"))
		}
	}
	for _, d := range extraDirs {
		if d != "" {
			candidates = append(candidates, filepath.Join(d, "temporal"))
		}
	}
	for _, p := range candidates {
		if isExecutable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w (looked at $%s, PATH, %s); %s",
		ErrNotFound, Env, strings.Join(candidates, ", "), InstallHint)
}

// Install builds the pinned CLI with `go install` into dir (as GOBIN) and
// returns the binary's path. The go command's output goes to output (a log
// file, typically: it is long and only matters when the build fails, and
// then its last lines are in the error). The first build takes minutes;
// later ones come from the Go build cache.
func Install(ctx context.Context, dir string, output io.Writer) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("%w: install Go 1.26 and put its bin directory on PATH (the Temporal CLI is built with it), or set %s to a temporal binary", ErrNoGo, Env)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("install the Temporal CLI: %w", err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return "", fmt.Errorf("install the Temporal CLI: %w", err)
	}
	tail := &tailWriter{max: 4 << 10}
	var out io.Writer = tail
	if output != nil {
		out = io.MultiWriter(output, tail)
	}
	cmd := exec.CommandContext(ctx, goBin, "install", Package+"@"+Version)
	// Outside any module, so that the caller's go.mod, vendor directory or
	// go.work cannot change what is built.
	cmd.Dir = abs
	cmd.Env = append(os.Environ(), "GOBIN="+abs, "GOWORK=off", "GOFLAGS=")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("install the Temporal CLI: %w", ctx.Err())
		}
		return "", fmt.Errorf("go install %s@%s: %w\n%s", Package, Version, err, strings.TrimSpace(tail.String()))
	}
	p := filepath.Join(abs, "temporal")
	if err := isExecutable(p); err != nil {
		return "", fmt.Errorf("go install %s@%s succeeded but %s: %w", Package, Version, p, err)
	}
	return p, nil
}

func isExecutable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return errors.New("is a directory")
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return errors.New("is not executable")
	}
	return nil
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	buf []byte
	max int
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	if over := len(w.buf) - w.max; over > 0 {
		w.buf = append(w.buf[:0], w.buf[over:]...)
	}
	return len(p), nil
}

func (w *tailWriter) String() string { return string(w.buf) }
