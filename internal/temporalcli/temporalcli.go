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
	"debug/buildinfo"
	"errors"
	"fmt"
	"go/build"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Env names the environment variable that points at the temporal binary.
// When it is set it wins and must name an executable: someone who set it
// meant that binary, so a typo is an error rather than a silent fallback.
const Env = "MESHROLL_TEMPORAL_CLI"

// Version is the Temporal CLI version the project pins (and CI installs),
// so that the dev server's behaviour does not drift under the tests.
const Version = "v1.5.1"

// Module is the CLI's Go module, as its binaries' build information names
// it.
const Module = "github.com/temporalio/cli"

// Package is the CLI's main package, as `go install` takes it.
const Package = Module + "/cmd/temporal"

// InstallHint tells how to get the CLI by hand.
const InstallHint = "run scripts/install-temporal.sh (it runs `go install " + Package + "@" +
	Version + "`, a few minutes the first time, and prints the binary's path) and/or set " + Env + " to the binary"

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
//     database, which it does not have;
//   - the priority-enabled task matcher, without which a server up to 1.31
//     ignores the task priority a rollback's workflow and pushes carry
//     (meshapi.RollbackPriority): with it, their tasks go before merge
//     plans' wherever a task queue is backed up.
var FastDynamicConfig = []string{
	"--dynamic-config-value", "matching.numTaskqueueReadPartitions=1",
	"--dynamic-config-value", "matching.numTaskqueueWritePartitions=1",
	"--dynamic-config-value", "system.enableActivityEagerExecution=true",
	"--dynamic-config-value", "history.transferProcessorMaxPollRPS=1000",
	"--dynamic-config-value", "matching.useNewMatcher=true",
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

// Path is Find's binary: the pinned CLI, or an error saying why there is
// none (wrapping ErrNotFound when it is missing).
func Path(extraDirs ...string) (string, error) {
	f, err := Find(context.Background(), extraDirs...)
	return f.Path, err
}

// Found is the CLI Find chose, and the binaries of another version it
// passed over on the way.
type Found struct {
	// Path is the binary, Version its version (always Version), From where
	// it was found: $MESHROLL_TEMPORAL_CLI, PATH, $GOBIN, GOPATH or one of
	// the caller's directories.
	Path, Version, From string
	// Passed are binaries of another version (or none that could be read)
	// it found first, in the order it looked: worth naming, since a plain
	// `temporal` typed in a shell may run one of them.
	Passed []Other
}

// Other is a binary Find passed over.
type Other struct {
	Path, From string
	// Version is the version it is, as VersionOf read it; Err is why that
	// could not be read.
	Version string
	Err     error
}

// String says which binary it is and what it is: "/usr/bin/temporal (on
// PATH) is Temporal CLI v1.1.0".
func (o Other) String() string {
	if o.Err != nil {
		return fmt.Sprintf("%s (%s) is no Temporal CLI whose version can be read: %v", o.Path, o.From, o.Err)
	}
	return fmt.Sprintf("%s (%s) is Temporal CLI %s", o.Path, o.From, o.Version)
}

// Find finds the pinned Temporal CLI (Version) as scripts/install-temporal.sh
// does, looking at $MESHROLL_TEMPORAL_CLI, `temporal` on PATH,
// $GOBIN/temporal, temporal in each GOPATH's bin, and temporal in each of
// extraDirs (where a caller installs it itself), in that order, and taking
// the first that is that version (VersionOf). Another version is passed
// over (Found.Passed) rather than run: its dev server takes other flags,
// and fails on meshroll's with "unknown flag: --search-attribute". A
// variable naming something else than the pinned CLI is refused instead:
// whoever set it meant that binary, so a typo or a wrong version is an
// error rather than a silent fallback. With none found the error wraps
// ErrNotFound, says where it looked and what it passed over, and how to
// install it; Found.Passed is set then too.
func Find(ctx context.Context, extraDirs ...string) (Found, error) {
	if p := os.Getenv(Env); p != "" {
		if err := isExecutable(p); err != nil {
			return Found{}, fmt.Errorf("%s=%q: %w; %s", Env, p, err, InstallHint)
		}
		o := read(ctx, Other{Path: p, From: "$" + Env})
		if o.Err == nil && pinned(o.Version) {
			return Found{Path: p, Version: o.Version, From: o.From}, nil
		}
		return Found{}, fmt.Errorf("%s; meshroll runs Temporal CLI %s, whose dev server takes the flags it passes (another version fails on them, such as --search-attribute): point %s at a %s binary, or unset it to use one found elsewhere; %s",
			o, Version, Env, Version, InstallHint)
	}
	var candidates []Other
	if p, err := exec.LookPath("temporal"); err == nil {
		candidates = append(candidates, Other{Path: p, From: "on PATH"})
	}
	if gobin := os.Getenv("GOBIN"); gobin != "" {
		candidates = append(candidates, Other{Path: filepath.Join(gobin, "temporal"), From: "in $GOBIN"})
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		gopath = build.Default.GOPATH // $HOME/go
	}
	for _, gp := range filepath.SplitList(gopath) {
		if gp != "" {
			candidates = append(candidates, Other{Path: filepath.Join(gp, "bin", "temporal"), From: "in GOPATH"})
		}
	}
	for _, d := range extraDirs {
		if d != "" {
			candidates = append(candidates, Other{Path: filepath.Join(d, "temporal"), From: "in " + d})
		}
	}
	var f Found
	looked := []string{"$" + Env, "PATH"}
	seen := map[string]bool{}
	for _, c := range candidates {
		if c.From != "on PATH" {
			looked = append(looked, c.Path)
		}
		if seen[c.Path] || isExecutable(c.Path) != nil {
			continue
		}
		seen[c.Path] = true
		c = read(ctx, c)
		if c.Err == nil && pinned(c.Version) {
			f.Path, f.Version, f.From = c.Path, c.Version, c.From
			return f, nil
		}
		f.Passed = append(f.Passed, c)
	}
	passed := ""
	for _, o := range f.Passed {
		passed += "; " + o.String() + ", not " + Version
	}
	return f, fmt.Errorf("%w (looked at %s%s); %s", ErrNotFound, strings.Join(looked, ", "), passed, InstallHint)
}

// read fills in o's version, or why it could not be read.
func read(ctx context.Context, o Other) Other {
	o.Version, o.Err = VersionOf(ctx, o.Path)
	return o
}

// pinned reports whether v, as VersionOf gives it, is Version.
func pinned(v string) bool { return v == Version }

// versionRE finds the version in `temporal --version`'s output:
// "temporal version 1.5.1 (Server 1.29.1, UI 2.42.1)".
var versionRE = regexp.MustCompile(`version v?([0-9]+\.[0-9]+\.[0-9]+[^\s]*)`)

// VersionOf reads which Temporal CLI release the binary at path is, as
// scripts/install-temporal.sh does: the module version in its Go build
// information when it was built from Module (`go install`'s builds, whose
// --version says 0.0.0-DEV), else what `path --version` says (release
// builds). It answers in Version's form, "v1.5.1".
func VersionOf(ctx context.Context, path string) (string, error) {
	if bi, err := buildinfo.ReadFile(path); err == nil && bi.Main.Path == Module && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", path, err)
	}
	m := versionRE.FindStringSubmatch(string(out))
	if m == nil {
		first, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
		return "", fmt.Errorf("%s --version says %q, which names no version", path, first)
	}
	return "v" + m[1], nil
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
