package demo

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/meshroll/meshroll/internal/agent"
	"github.com/meshroll/meshroll/internal/build"
	"github.com/meshroll/meshroll/internal/registry"
)

// exampleModules maps each demo module to its directory under examples/.
var exampleModules = []struct{ module, dir string }{
	{ModuleController, "controller"},
	{ModuleHost, "host"},
}

// FindExamples walks up from dir to the first directory holding
// examples/controller/main.go and examples/host/main.go, and returns that
// examples directory: the meshroll checkout the demo is run from.
func FindExamples(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := abs; ; d = filepath.Dir(d) {
		ex := filepath.Join(d, "examples")
		ok := true
		for _, m := range exampleModules {
			if _, err := os.Stat(filepath.Join(ex, m.dir, "main.go")); err != nil {
				ok = false
			}
		}
		if ok {
			return ex, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no examples/controller and examples/host above %s; run the demo from the meshroll checkout or pass --examples", abs)
		}
	}
}

// versionLine is the line of an example program that says its version.
var versionLine = regexp.MustCompile(`(?m)^const version = ".*"$`)

// repo is the scratch git repository the demo merges into.
type repo struct {
	dir      string
	examples string
	run      string
}

// newRepo copies the example modules into dir, adds a go.mod and commits
// them on main, each module at version 1. run goes into every commit
// message, so that two demos never make the same commit (and so the same
// plan IDs) even within one second.
func newRepo(ctx context.Context, dir, examples, run string) (*repo, string, error) {
	r := &repo{dir: dir, examples: examples, run: run}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/demo\n\ngo 1.26\n"), 0o644); err != nil {
		return nil, "", err
	}
	for _, m := range exampleModules {
		if err := copyDir(filepath.Join(examples, m.dir), filepath.Join(dir, "examples", m.dir)); err != nil {
			return nil, "", fmt.Errorf("copy examples/%s: %w", m.dir, err)
		}
		if err := r.setVersion(m.module, 1); err != nil {
			return nil, "", err
		}
	}
	if _, err := r.git(ctx, "init", "-q", "-b", "main"); err != nil {
		return nil, "", err
	}
	c, err := r.commit(ctx, "controller v1, host v1")
	return r, c, err
}

// modulePath is where a demo module lives in the repository.
func modulePath(module string) string {
	for _, m := range exampleModules {
		if m.module == module {
			return "examples/" + m.dir
		}
	}
	return ""
}

// setVersion rewrites the module's version constant, which changes the
// binary and so the image digest.
func (r *repo) setVersion(module string, v int) error {
	f := filepath.Join(r.dir, modulePath(module), "main.go")
	src, err := os.ReadFile(f)
	if err != nil {
		return err
	}
	if !versionLine.Match(src) {
		return fmt.Errorf("%s/main.go has no `const version = \"...\"` line to change", modulePath(module))
	}
	src = versionLine.ReplaceAll(src, fmt.Appendf(nil, "const version = \"%d\"", v))
	return os.WriteFile(f, src, 0o644)
}

// change sets a module's version and commits it, returning the commit.
func (r *repo) change(ctx context.Context, module string, v int) (string, error) {
	if err := r.setVersion(module, v); err != nil {
		return "", err
	}
	return r.commit(ctx, fmt.Sprintf("%s v%d", module, v))
}

func (r *repo) commit(ctx context.Context, msg string) (string, error) {
	if _, err := r.git(ctx, "add", "-A"); err != nil {
		return "", err
	}
	if _, err := r.git(ctx, "commit", "-q", "-m", msg+" (starter demo "+r.run+")"); err != nil {
		return "", err
	}
	return r.git(ctx, "rev-parse", "HEAD")
}

func (r *repo) git(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", r.dir}, args...)...)
	cmd.Env = build.GitEnv("GIT_AUTHOR_NAME=meshroll demo", "GIT_AUTHOR_EMAIL=demo@example.invalid",
		"GIT_COMMITTER_NAME=meshroll demo", "GIT_COMMITTER_EMAIL=demo@example.invalid")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

// copyDir copies the regular files under src to dst.
func copyDir(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
}

// demoHost is one in-process host agent with the exec runtime, serving its host
// API on a free loopback port.
type demoHost struct {
	machine string
	url     string
	a       *agent.Agent
	srv     *http.Server
}

func startHost(ctx context.Context, machine, dir string, reg registry.Options, log zerolog.Logger) (*demoHost, error) {
	rt, err := agent.NewRuntime(agent.RuntimeExec, agent.RuntimeOptions{
		StateDir: dir, Registry: reg, Machine: machine,
		HealthyAfter: time.Second, StopGrace: 5 * time.Second,
	})
	if err != nil {
		return nil, fmt.Errorf("host agent %s: %w", machine, err)
	}
	a, err := agent.Open(ctx, agent.Options{Machine: machine, StateDir: dir, Runtime: rt, Log: log})
	if err != nil {
		_ = rt.Close(ctx)
		return nil, fmt.Errorf("host agent %s: %w", machine, err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = a.Close(ctx)
		return nil, fmt.Errorf("host agent %s: %w", machine, err)
	}
	h := &demoHost{machine: machine, url: "http://" + l.Addr().String(), a: a,
		srv: agent.NewServer(a, "")}
	go func() { _ = h.srv.Serve(l) }()
	return h, nil
}

// close stops serving, then stops the agent and the processes it runs.
func (h *demoHost) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err := h.srv.Shutdown(ctx)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return errors.Join(err, h.a.Close(ctx))
}

// pingRegistry checks that the registry answers the OCI API at all (any
// HTTP answer to GET /v2/, 401 included, is a registry).
func pingRegistry(ctx context.Context, o registry.Options) error {
	reg, err := o.Registry()
	if err != nil {
		return err
	}
	tr, err := o.Transport()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, reg.Scheme()+"://"+reg.RegistryStr()+"/v2/", nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// scratchDir makes (or checks) the scratch directory; the cleanup removes
// it when it was made here.
func scratchDir(dir string) (string, func(), error) {
	if dir == "" {
		d, err := os.MkdirTemp("", "meshroll-demo-")
		if err != nil {
			return "", nil, fmt.Errorf("scratch directory: %w", err)
		}
		return d, func() { _ = os.RemoveAll(d) }, nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", nil, err
	}
	if es, err := os.ReadDir(abs); err == nil && len(es) > 0 {
		return "", nil, fmt.Errorf("--dir %s is not empty; give an empty or new directory for the scratch repository", dir)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return "", nil, fmt.Errorf("scratch directory: %w", err)
	}
	return abs, func() {}, nil
}
