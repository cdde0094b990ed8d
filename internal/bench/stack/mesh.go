package stack

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/meshroll/meshroll/internal/agent"
	"github.com/meshroll/meshroll/internal/build"
	"github.com/meshroll/meshroll/internal/catalogue"
	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshfile"
	"github.com/meshroll/meshroll/internal/registry"
	"github.com/meshroll/meshroll/internal/workerapp"
)

// PollInterval is the push activity's report polling the bench runs with,
// in the worker and in the direct baseline alike. The noop runtime reports
// a container running a moment after it is declared, so the production
// default (a quarter second) would pad both sides with the same wait and
// hide what the orchestration itself costs.
const PollInterval = 20 * time.Millisecond

// MachineSpec is one machine of a bench mesh.
type MachineSpec struct {
	Name    string
	Tier    int
	Modules []string
}

// MeshOptions configures NewMesh.
type MeshOptions struct {
	// TaskQueue is the mesh's own task queue.
	TaskQueue string
	Machines  []MachineSpec
	Modules   []string
	// Builder is what the in-process worker builds with (default
	// build.GitDigest, a digest of the commit's tree: a build that costs a
	// git lookup, as a cached build does).
	Builder build.Builder
	// Log receives the worker's and the SDK's logs.
	Log zerolog.Logger
	// MinHealthy is every module's health.min_healthy. The default, 0s,
	// makes a push count once its container runs: most scenarios measure
	// the orchestration, not a health wait.
	MinHealthy time.Duration
	// MaxParallel is tiers.<tier>.max_parallel for the tiers it names;
	// the others are pushed whole, as a tier without a policy is.
	MaxParallel map[int]int
	// Runtime is the agents' runtime: noop (the default, what the
	// orchestration figures are measured on), or exec or docker, which
	// run real images, so that a push's time to healthy on one runtime
	// can be read against the other's for the same build. With exec or
	// docker the modules are a program that serves until stopped, built
	// by the go builder into Registry (unless Builder is set) and pulled
	// from it by the agents; on docker every module's containers are on
	// the host network (the engines meshroll is developed on have no
	// bridge), and Close removes the containers the mesh's agents left.
	Runtime string
	// AgentsPerProcess, on the noop runtime, is the most agents one
	// process serves (0: the package's AgentsPerProcess): a larger fleet
	// is served by agents processes, this process serving none.
	AgentsPerProcess int
	// DockerSocket is the engine the docker runtime uses.
	DockerSocket string
	// Registry is where the go builder pushes and the agents pull from.
	Registry registry.Options
}

// real reports whether the agents run real images.
func (o MeshOptions) real() bool {
	return o.Runtime == agent.RuntimeExec || o.Runtime == agent.RuntimeDocker
}

// Mesh is a set of host agents serving on loopback, the git repository its
// modules build from, its mesh config (also written to a file, for a worker
// process) and its catalogue.
type Mesh struct {
	Config     *config.Config
	ConfigPath string
	Repo       string
	Catalogue  *catalogue.Memory
	Builder    build.Builder
	// URLs are the machines' agents' addresses.
	URLs map[string]string

	srv *Server
	dir string
	log zerolog.Logger
	// served are the agents this process serves; children, the agents
	// processes serving the others (a fleet over AgentsPerProcess).
	served   []*servedAgent
	children []*child
	worker   *workerapp.Workers
	// engine and engineNames, on docker: the engine and the machine
	// names the agents' containers are labelled with, for Close.
	engine      string
	engineNames []string
}

// NewMesh starts one noop host agent per machine, each on its own loopback
// listener (one process serving many machine identities), makes a git
// repository with a directory per module and writes the mesh config.
func NewMesh(ctx context.Context, srv *Server, o MeshOptions) (_ *Mesh, err error) {
	dir, err := os.MkdirTemp("", "meshroll-bench-")
	if err != nil {
		return nil, fmt.Errorf("bench mesh dir: %w", err)
	}
	m := &Mesh{
		Repo: filepath.Join(dir, "repo"), Catalogue: catalogue.NewMemory(), Builder: o.Builder,
		URLs: map[string]string{}, srv: srv, dir: dir, log: o.Log,
	}
	src := program
	if o.real() {
		if o.Registry.Address == "" {
			return nil, fmt.Errorf("bench mesh: runtime %s needs a registry to build into and pull from", o.Runtime)
		}
		src = servingProgram
		if m.Builder == nil {
			m.Builder = &build.Go{Options: build.Options{Registry: o.Registry}}
		}
	}
	if m.Builder == nil {
		m.Builder = build.GitDigest{}
	}
	defer func() {
		if err != nil {
			_ = m.Close()
		}
	}()
	if err := os.MkdirAll(m.Repo, 0o755); err != nil {
		return nil, fmt.Errorf("bench repo: %w", err)
	}
	if err := m.git(ctx, "init", "-q", "-b", "main"); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(m.Repo, "go.mod"), []byte("module example.com/bench\n\ngo 1.26\n"), 0o644); err != nil {
		return nil, fmt.Errorf("bench repo: %w", err)
	}
	for _, mod := range o.Modules {
		d := filepath.Join(m.Repo, "examples", mod)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("bench repo: %w", err)
		}
		if err := os.WriteFile(filepath.Join(d, "main.go"), []byte(src), 0o644); err != nil {
			return nil, fmt.Errorf("bench repo: %w", err)
		}
	}
	if _, err := m.Commit(ctx); err != nil {
		return nil, err
	}

	if o.Runtime == agent.RuntimeDocker {
		m.engine = o.DockerSocket
	}
	if per := cmp.Or(o.AgentsPerProcess, AgentsPerProcess); !o.real() && len(o.Machines) > per {
		names := make([]string, len(o.Machines))
		for i, spec := range o.Machines {
			names[i] = spec.Name
		}
		if m.URLs, err = m.startAgentsProcesses(ctx, names, per); err != nil {
			return nil, err
		}
	}
	for _, spec := range o.Machines {
		if m.URLs[spec.Name] != "" {
			continue
		}
		var rt agent.Runtime = agent.NewNoopRuntime(0)
		if o.real() {
			// On a shared engine a machine's name is this mesh's own:
			// another bench's, or a test's, are never touched.
			name := spec.Name
			if o.Runtime == agent.RuntimeDocker {
				name = filepath.Base(dir) + "." + spec.Name
				m.engineNames = append(m.engineNames, name)
			}
			rt, err = agent.NewRuntime(o.Runtime, agent.RuntimeOptions{Machine: name, DockerSocket: o.DockerSocket, StateDir: filepath.Join(dir, "hosts", spec.Name), Registry: o.Registry})
			if err != nil {
				return nil, fmt.Errorf("bench agent %s: %w", spec.Name, err)
			}
		}
		sa, err := serveAgent(ctx, dir, spec.Name, rt)
		if err != nil {
			return nil, err
		}
		m.served = append(m.served, sa)
		m.URLs[spec.Name] = sa.url
	}

	f := meshfile.File{Address: srv.HostPort(), Namespace: srv.Namespace, TaskQueue: o.TaskQueue, Compression: srv.Compression, StateDir: filepath.Join(dir, "state")}
	var push []string
	if srv.LocalPush {
		push = append(push, "local_activity: true")
	}
	if srv.HandWindow > 0 {
		push = append(push, fmt.Sprintf("hand_window: %d", srv.HandWindow))
	}
	if len(push) > 0 {
		f.Push = "{" + strings.Join(push, ", ") + "}"
	}
	for _, mod := range o.Modules {
		mf := meshfile.Module{Name: mod, Repo: m.Repo, Health: fmt.Sprintf("{min_healthy: %s}", o.MinHealthy)}
		if o.Runtime == agent.RuntimeDocker {
			mf.Network = mesh.NetworkHost
		}
		f.Modules = append(f.Modules, mf)
	}
	if len(o.MaxParallel) > 0 {
		var tiers []string
		for _, tier := range slices.Sorted(maps.Keys(o.MaxParallel)) {
			tiers = append(tiers, fmt.Sprintf("%d: {max_parallel: %d}", tier, o.MaxParallel[tier]))
		}
		f.Tiers = "{" + strings.Join(tiers, ", ") + "}"
	}
	for _, spec := range o.Machines {
		f.Machines = append(f.Machines, meshfile.Machine{Name: spec.Name, Host: m.URLs[spec.Name], Tier: spec.Tier, Modules: spec.Modules})
	}
	y := f.String()
	m.ConfigPath = filepath.Join(dir, "mesh.yaml")
	if err := os.WriteFile(m.ConfigPath, []byte(y), 0o644); err != nil {
		return nil, fmt.Errorf("bench mesh config: %w", err)
	}
	if m.Config, err = config.Parse(m.ConfigPath, []byte(y)); err != nil {
		return nil, fmt.Errorf("bench mesh config: %w", err)
	}
	return m, nil
}

// program is every bench module's source; only version.txt beside it
// changes between commits.
const program = "package main\n\nfunc main() {}\n"

// servingProgram is every module's source on a runtime that runs it: a
// service that runs until it is stopped.
const servingProgram = `package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, os.Interrupt)
	<-term
}
`

// Commit changes every module and commits on main, returning the commit.
func (m *Mesh) Commit(ctx context.Context) (string, error) {
	stamp := []byte(time.Now().UTC().Format(time.RFC3339Nano) + "\n")
	dirs, err := filepath.Glob(filepath.Join(m.Repo, "examples", "*"))
	if err != nil {
		return "", fmt.Errorf("bench commit: %w", err)
	}
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, "version.txt"), stamp, 0o644); err != nil {
			return "", fmt.Errorf("bench commit: %w", err)
		}
	}
	if err := m.git(ctx, "add", "-A"); err != nil {
		return "", err
	}
	if err := m.git(ctx, "commit", "-q", "--allow-empty", "-m", "bench"); err != nil {
		return "", err
	}
	out, err := m.gitOut(ctx, "rev-parse", "HEAD")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(out), nil
}

func (m *Mesh) git(ctx context.Context, args ...string) error {
	_, err := m.gitOut(ctx, args...)
	return err
}

func (m *Mesh) gitOut(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", m.Repo}, args...)...)
	cmd.Env = build.GitEnv("GIT_AUTHOR_NAME=meshroll-bench", "GIT_AUTHOR_EMAIL=bench@example.invalid",
		"GIT_COMMITTER_NAME=meshroll-bench", "GIT_COMMITTER_EMAIL=bench@example.invalid")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// Deps are the worker's dependencies over this mesh, as the in-process
// worker gets them; the direct baseline uses the same ones.
func (m *Mesh) Deps() workerapp.Deps {
	return workerapp.Deps{Catalogue: m.Catalogue, Builder: m.Builder, Hosts: &config.Hosts{Mesh: m.Config}, PollInterval: PollInterval}
}

// StartWorker runs the real worker (workerapp.New) in this process.
func (m *Mesh) StartWorker(ctx context.Context) error {
	if err := workerapp.EnsureSearchAttributes(ctx, m.srv.Client(), m.srv.Namespace, m.log); err != nil {
		return err
	}
	w := workerapp.New(m.srv.Client(), m.Config, m.Repo, m.Deps(), m.log)
	if err := w.Start(); err != nil {
		return fmt.Errorf("start bench worker: %w", err)
	}
	m.worker = w
	return nil
}

// Close stops the worker, the agents and their servers, and removes the
// mesh's directory.
func (m *Mesh) Close() error {
	if m.worker != nil {
		m.worker.Stop()
		m.worker = nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	for _, sa := range m.served {
		errs = append(errs, sa.close(ctx))
	}
	for _, c := range m.children {
		errs = append(errs, c.Stop())
	}
	if m.engine != "" {
		// Containers outlive their agent; the bench's must not.
		errs = append(errs, removeContainers(ctx, m.engine, m.engineNames))
	}
	errs = append(errs, os.RemoveAll(m.dir))
	return errors.Join(errs...)
}
