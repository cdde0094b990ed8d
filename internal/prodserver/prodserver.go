// Package prodserver starts the production topology's Temporal server on
// this machine: the real temporal-server binary (not the CLI's dev server)
// on a PostgreSQL of the caller's, its schema set up by
// deploy/temporal/setup-schema.sh, configured as docker-compose.yml's
// temporal service is (the temporalio/server image's config template,
// deploy/temporal/dynamicconfig.yaml and the service's environment), and
// its namespace registered by deploy/temporal/create-namespace.sh.
//
// It exists so that there is one launcher of that server, shared by the
// production-topology test (testsuite/production_test.go), which proves
// deploy/ works, and the bench (`go run ./internal/bench -server
// production`), which measures the same scenarios on it as on the dev
// server: what the bench measures is then the server the test proves, set
// up the same way. It takes a context and returns errors, not a
// *testing.T, for the bench's sake; the server dies with its caller
// (package devlaunch's parent-death signal) even when the caller is
// SIGKILLed or a test binary times out.
package prodserver

import (
	"bufio"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// Module and Version are the Temporal server scripts/install-temporal-server.sh
// installs, and the only one Start runs: deploy/ is written for it (the
// compose file's temporalio/server image is the same release).
const (
	Module  = "go.temporal.io/server"
	Version = "v1.29.1"
)

// ServerEnv names the environment variable that points at the
// temporal-server binary (scripts/install-temporal-server.sh's output),
// looked at first by FindBinaries.
const ServerEnv = "MESHROLL_TEMPORAL_SERVER"

// InstallHint says how to get the binaries FindBinaries looks for.
const InstallHint = "run scripts/install-temporal-server.sh (or set " + ServerEnv + " to its output)"

// ErrNotInstalled is wrapped by FindBinaries (and Start) when no
// temporal-server and temporal-sql-tool of Version are found, so that a
// caller can tell "not installed" from a failure: the production test
// skips locally (and fails in CI) on it.
var ErrNotInstalled = errors.New("the production topology's Temporal server is not installed")

// Binaries are temporal-server and the temporal-sql-tool beside it, the
// SQL tool deploy/temporal/setup-schema.sh runs.
type Binaries struct {
	Server, SQLTool string
}

// FindBinaries finds temporal-server and temporal-sql-tool where
// scripts/install-temporal-server.sh puts them, at the version it installs:
// $MESHROLL_TEMPORAL_SERVER, temporal-server on PATH, $GOBIN, then the
// first GOPATH's bin, the SQL tool beside the server. The error wraps
// ErrNotInstalled and says where it looked and what to run.
func FindBinaries(ctx context.Context) (Binaries, error) {
	var candidates []string
	if p := os.Getenv(ServerEnv); p != "" {
		candidates = append(candidates, p)
	}
	if p, err := exec.LookPath("temporal-server"); err == nil {
		candidates = append(candidates, p)
	}
	for _, key := range []string{"GOBIN", "GOPATH"} {
		out, err := exec.CommandContext(ctx, "go", "env", key).Output()
		if dir := strings.TrimSpace(strings.Split(string(out), string(os.PathListSeparator))[0]); err == nil && dir != "" {
			if key == "GOPATH" {
				dir = filepath.Join(dir, "bin")
			}
			candidates = append(candidates, filepath.Join(dir, "temporal-server"))
		}
	}
	return findBinaries(candidates)
}

// findBinaries is the first candidate that is temporal-server of Version
// with temporal-sql-tool of Version beside it.
func findBinaries(candidates []string) (Binaries, error) {
	for _, c := range candidates {
		tool := filepath.Join(filepath.Dir(c), "temporal-sql-tool")
		if built(c, Module+"/cmd/server") && built(tool, Module+"/cmd/tools/sql") {
			return Binaries{Server: c, SQLTool: tool}, nil
		}
	}
	return Binaries{}, fmt.Errorf("%w: no temporal-server and temporal-sql-tool of %s %s in %v: %s", ErrNotInstalled, Module, Version, candidates, InstallHint)
}

// built reports whether the binary at path was built from package pkg
// with Module at Version, as scripts/install-temporal-server.sh checks:
// Module is the main module (go install) or a dependency (the script's
// scratch module, which builds the server with the CLI's dependencies).
func built(path, pkg string) bool {
	bi, err := buildinfo.ReadFile(path)
	if err != nil || bi.Path != pkg {
		return false
	}
	if bi.Main.Path == Module && bi.Main.Version == Version {
		return true
	}
	for _, d := range bi.Deps {
		if d.Path == Module && d.Version == Version {
			return true
		}
	}
	return false
}

// ModuleDir is Module at Version in the module cache (the install
// script's build downloaded it): its PostgreSQL schema, which
// setup-schema.sh applies, and config/docker.yaml, the config template the
// temporalio/server image runs with. `go mod download` runs in a scratch
// directory, outside any module, so that no go.mod is touched.
func ModuleDir(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	scratch, err := os.MkdirTemp("", "meshroll-prodserver-mod-")
	if err != nil {
		return "", fmt.Errorf("find %s@%s in the module cache: %w", Module, Version, err)
	}
	defer func() { _ = os.RemoveAll(scratch) }()
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", Module+"@"+Version)
	cmd.Dir = scratch
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s@%s (it needs the go command and the module proxy, or the module in the cache: %s): %w: %s", Module, Version, InstallHint, err, out)
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(out, &mod); err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %w: %s", Module, Version, err, out)
	}
	if mod.Error != "" {
		return "", fmt.Errorf("go mod download %s@%s: %s", Module, Version, mod.Error)
	}
	for _, p := range []string{filepath.Join("schema", "postgresql", "v12", "temporal", "versioned"), filepath.Join("config", "docker.yaml")} {
		if _, err := os.Stat(filepath.Join(mod.Dir, p)); err != nil {
			return "", fmt.Errorf("%s@%s in the module cache (%s) has no %s: %w", Module, Version, mod.Dir, p, err)
		}
	}
	return mod.Dir, nil
}

// repoModule is this repository's module path, which FindRoot looks for.
const repoModule = "github.com/meshroll/meshroll"

// FindRoot walks up from dir to the directory whose go.mod declares this
// repository's module: the root that holds deploy/ and docker-compose.yml,
// which Start reads. The production test runs in testsuite/, the bench
// anywhere in the tree, so neither can name deploy/ relative to its working
// directory.
func FindRoot(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("find the meshroll repository from %s: %w", dir, err)
	}
	for d := abs; ; d = filepath.Dir(d) {
		if goModModule(filepath.Join(d, "go.mod")) == repoModule {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod of module %s in %s or above it: run from the meshroll repository, or name its root", repoModule, abs)
		}
	}
}

// DefaultRoot is FindRoot from the working directory, else from the
// directory this package's source was built from (a binary built here and
// run elsewhere; not with -trimpath).
func DefaultRoot() (string, error) {
	wd, err := os.Getwd()
	if err == nil {
		var root string
		if root, err = FindRoot(wd); err == nil {
			return root, nil
		}
	}
	if _, src, _, ok := runtime.Caller(0); ok && filepath.IsAbs(src) {
		if root, ferr := FindRoot(filepath.Dir(src)); ferr == nil {
			return root, nil
		}
	}
	return "", err
}

// goModModule is the module path go.mod at path declares, or "".
func goModModule(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}
