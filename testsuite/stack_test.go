package testsuite

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/meshroll/meshroll/internal/agent"
	"github.com/meshroll/meshroll/internal/build"
	"github.com/meshroll/meshroll/internal/catalogue"
	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/devserver"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/plans"
	"github.com/meshroll/meshroll/internal/registry"
	"github.com/meshroll/meshroll/internal/workerapp"
)

// machineSpec is one machine of a test mesh.
type machineSpec struct {
	name    string
	tier    int
	modules []string
}

// stack is a whole meshroll on loopback: a Temporal dev server, a git
// repository holding the modules, one real host agent per machine, and the
// real worker.
type stack struct {
	t   *testing.T
	srv *devserver.Server
	c   client.Client
	cfg *config.Config
	// configPath is the mesh config written out for the starter CLI.
	configPath string
	repo       string
	hosts      map[string]*agentHost
	cat        *catalogue.Memory
	// worker is the worker started last.
	worker worker.Worker
	// builder is what the worker builds with.
	builder build.Builder
	// registry is the embedded registry's options when images are built.
	registry registry.Options
}

type stackOptions struct {
	// health is every module's health key in YAML flow style (default:
	// healthYAML's).
	health   string
	machines []machineSpec
	// tiers is the tiers: section in YAML flow style, if any, such as
	// {1: {max_parallel: 1, bake: 5s, analysis: [error-rate]}}.
	tiers string
	// analysis is the analysis: section's value, if any: YAML in flow
	// style or block style (a Go raw string indented with tabs will do;
	// see sectionYAML), with providers and checks as in the issue:
	//
	//	providers:
	//	  prom: {prometheus: {address: http://127.0.0.1:9090}}
	//	checks:
	//	  error-rate: {provider: prom, query: '...', success: 'result < 0.05', interval: 1s, count: 3}
	analysis string
	// controlPlane names modules marked control_plane.
	controlPlane []string
	// modules lists every module (each gets examples/<name> in the repo).
	modules []string
	push    string // YAML of the push: section, if any
	// identity, when set, is the worker's and client's identity (recorded in
	// histories; the default names the machine's host).
	identity string
	// persist keeps the dev server's state in a SQLite file, so that the
	// server can be restarted.
	persist bool
	// images builds real OCI images of real Go programs (the go builder)
	// into an embedded registry, instead of digests without images.
	images bool
	// registry, when set, is where the go builder pushes instead.
	registry string
	// uiPort, when set, serves the Temporal Web UI there.
	uiPort string
	// exec runs the host agents with the exec runtime (real processes of
	// the built images); it needs images.
	exec bool
	// tokens makes every host agent require a token of its own (see
	// machineToken), which the config gives the worker.
	tokens bool
	// windows, when set, gives the windows: section in YAML flow style. It
	// is called as the config is written, just before the worker starts,
	// so that a window can be a few seconds from then.
	windows func() string
}

// healthYAML is every module's health key: the test's own, or no probe
// and min_healthy 0s, so that tests of orchestration do not wait out the
// default 10 s per push (the health tests set theirs).
func (o stackOptions) healthYAML() string {
	if o.health != "" {
		return o.health
	}
	return "{min_healthy: 0s}"
}

// machineToken is the host token of machine in a stack with tokens.
func machineToken(machine string) string { return "host-token-" + machine + "-0f9e8d7c" }

func newStack(t *testing.T, o stackOptions) *stack {
	t.Helper()
	var dbFile string
	if o.persist {
		dbFile = filepath.Join(t.TempDir(), "temporal.db")
	}
	srv := devserver.Start(t, devserver.Options{DBFile: dbFile, UIPort: o.uiPort})
	s := &stack{t: t, srv: srv, c: srv.Client(), repo: t.TempDir(), hosts: map[string]*agentHost{}, cat: catalogue.NewMemory()}
	if o.identity != "" {
		opts := srv.ClientOptions()
		opts.Identity = o.identity
		c, err := client.Dial(opts)
		require.NoError(t, err)
		t.Cleanup(c.Close)
		s.c = c
	}
	s.git("init", "-q", "-b", "main")
	s.builder = build.GitDigest{}
	if o.images {
		require.NoError(t, os.WriteFile(filepath.Join(s.repo, "go.mod"), []byte("module example.com/mesh\n\ngo 1.26\n"), 0o644))
		srv, err := registry.New(t.TempDir())
		require.NoError(t, err)
		url, err := srv.Start("127.0.0.1:0")
		require.NoError(t, err)
		t.Cleanup(func() { _ = srv.Close() })
		s.registry = registry.Options{Address: url}
		if o.registry != "" {
			s.registry.Address = o.registry
		}
		s.builder = &build.Go{Options: build.Options{Registry: s.registry}}
	}
	for _, m := range o.modules {
		s.commit(m)
	}

	var y strings.Builder
	fmt.Fprintf(&y, "temporal: {address: %q, namespace: default, task_queue: %q}\n", srv.HostPort(), "meshroll-"+strings.ToLower(sanitize(t.Name())))
	if o.push != "" {
		fmt.Fprintf(&y, "push: %s\n", o.push)
	}
	y.WriteString("modules:\n")
	for _, m := range o.modules {
		cp := false
		for _, c := range o.controlPlane {
			cp = cp || c == m
		}
		fmt.Fprintf(&y, "  %s: {repo: ., path: examples/%s, control_plane: %v, health: %s}\n", m, m, cp, o.healthYAML())
	}
	y.WriteString("machines:\n")
	for _, m := range o.machines {
		token := ""
		if o.tokens {
			token = machineToken(m.name)
		}
		h := newAgentHostWithToken(t, m.name, s.runtime(o, m.name), token)
		s.hosts[m.name] = h
		fmt.Fprintf(&y, "  %s: {host: %q, tier: %d, modules: [%s], token: %q}\n", m.name, h.URL(), m.tier, strings.Join(m.modules, ", "), token)
	}
	if o.tiers != "" {
		fmt.Fprintf(&y, "tiers: %s\n", o.tiers)
	}
	if o.analysis != "" {
		fmt.Fprintf(&y, "analysis:\n%s", sectionYAML(o.analysis))
	}
	if o.windows != nil {
		fmt.Fprintf(&y, "windows: %s\n", o.windows())
	}
	cfg, err := config.Parse("test mesh.yaml", []byte(y.String()))
	require.NoError(t, err, "test mesh config:\n%s", y.String())
	s.cfg = cfg
	s.configPath = filepath.Join(t.TempDir(), "mesh.yaml")
	require.NoError(t, os.WriteFile(s.configPath, []byte(y.String()), 0o644))

	s.startWorker()
	return s
}

// runtime is machine's host agent's runtime for the options.
func (s *stack) runtime(o stackOptions, machine string) func(dir string) agent.Runtime {
	return func(dir string) agent.Runtime {
		if !o.exec {
			return agent.NewNoopRuntime(0)
		}
		rt, err := agent.NewRuntime(agent.RuntimeExec, agent.RuntimeOptions{
			Machine: machine, StateDir: dir, Registry: s.registry, HealthyAfter: 200 * time.Millisecond, StopGrace: 5 * time.Second,
		})
		require.NoError(s.t, err)
		return rt
	}
}

// startWorker runs the real worker in-process; it stops with the test, or
// earlier with the returned worker's Stop.
func (s *stack) startWorker() worker.Worker {
	deps := workerapp.Deps{Catalogue: s.cat, Builder: s.builder, Hosts: &config.Hosts{Mesh: s.cfg}, PollInterval: 20 * time.Millisecond}
	log := zerolog.New(zerolog.NewTestWriter(s.t)).Level(zerolog.WarnLevel)
	require.NoError(s.t, workerapp.EnsureSearchAttributes(context.Background(), s.c, s.cfg.Temporal.Namespace, log))
	w := workerapp.New(s.c, s.cfg, s.repo, deps, log)
	require.NoError(s.t, w.Start())
	s.t.Cleanup(w.Stop)
	s.worker = w
	return w
}

// sectionYAML is a section's value as written under its key: val's lines
// with their common leading whitespace removed, any tab left at the start
// of a line (YAML indents with spaces only) as two spaces, and all of it
// indented two spaces. Blank lines are dropped.
func sectionYAML(val string) string {
	var lines []string
	for _, l := range strings.Split(val, "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, strings.TrimRight(l, " \t\r"))
		}
	}
	common := ""
	for i, l := range lines {
		lead := l[:len(l)-len(strings.TrimLeft(l, " \t"))]
		if i == 0 {
			common = lead
			continue
		}
		for !strings.HasPrefix(lead, common) {
			common = common[:len(common)-1]
		}
	}
	var b strings.Builder
	for _, l := range lines {
		l = strings.TrimPrefix(l, common)
		rest := strings.TrimLeft(l, "\t")
		fmt.Fprintf(&b, "  %s%s\n", strings.Repeat("  ", len(l)-len(rest)), rest)
	}
	return b.String()
}

func sanitize(name string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, name)
}

func (s *stack) git(args ...string) string {
	s.t.Helper()
	cmd := exec.Command("git", append([]string{"-C", s.repo}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=meshroll", "GIT_AUTHOR_EMAIL=t@example.invalid",
		"GIT_COMMITTER_NAME=meshroll", "GIT_COMMITTER_EMAIL=t@example.invalid")
	out, err := cmd.CombinedOutput()
	require.NoError(s.t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

// commit changes a module and commits on main, returning the commit id.
// The module is a Go program printing its version.
func (s *stack) commit(module string) string {
	s.t.Helper()
	return s.commitSource(module, "")
}

// exampleProgram is a test module: it prints its version and, unless asked
// only for the version, serves until SIGTERM, as a real service does.
const exampleProgram = `package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	fmt.Println(%q)
	if len(os.Args) > 1 && os.Args[1] == "version" {
		return
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, os.Interrupt)
	<-term
	fmt.Println("stopping")
}
`

// commitSource commits a module's main.go; src "" writes a program printing
// a new version each time.
func (s *stack) commitSource(module, src string) string {
	s.t.Helper()
	dir := filepath.Join(s.repo, "examples", module)
	require.NoError(s.t, os.MkdirAll(dir, 0o755))
	f := filepath.Join(dir, "version.txt")
	old, _ := os.ReadFile(f)
	version := append(old, 'x')
	require.NoError(s.t, os.WriteFile(f, version, 0o644))
	if src == "" {
		src = fmt.Sprintf(exampleProgram, module+" "+string(version))
	}
	require.NoError(s.t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644))
	s.git("add", ".")
	s.git("commit", "-q", "-m", "change "+module)
	return s.git("rev-parse", "HEAD")
}

func (s *stack) start(module, commit string, gates ...int) plans.Started {
	s.t.Helper()
	st, err := plans.Start(context.Background(), s.c, s.cfg.Temporal.TaskQueue, meshapi.PlanInput{
		Module: module, Commit: commit, Gates: gates, Policy: s.cfg.PushPolicy(),
	})
	require.NoError(s.t, err)
	return st
}

func (s *stack) wait(id string) meshapi.PlanState {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	st, err := plans.Wait(ctx, s.c, id, time.Second, nil)
	require.NoError(s.t, err, "plan %s", id)
	return st
}

func (s *stack) converge(module, commit string) meshapi.PlanState {
	s.t.Helper()
	st := s.wait(s.start(module, commit).ID)
	require.Equal(s.t, meshapi.PlanConverged, st.State, "%s: %s", st.Plan, st.Reason)
	return st
}

// build is the build the catalogue recorded for a module at a commit.
func (s *stack) build(module, commit string) mesh.Build {
	s.t.Helper()
	b, ok, err := s.cat.Lookup(context.Background(), s.digestOf(module, commit))
	require.NoError(s.t, err)
	require.True(s.t, ok, "%s at %s was built", module, commit)
	return b
}

// digestOf finds the digest the catalogue recorded for a module's commit.
func (s *stack) digestOf(module, commit string) string {
	s.t.Helper()
	es, err := s.cat.Builds(context.Background(), module, 0)
	require.NoError(s.t, err)
	for _, e := range es {
		if e.Build.Commit == commit {
			return e.Build.Digest
		}
	}
	s.t.Fatalf("no build of %s at %s in the catalogue", module, commit)
	return ""
}

// checkJournal asserts, from a host's own record, the invariants that must
// hold for every machine whatever the interleaving: one declaration in
// flight at a time, strictly increasing sequences, and no container's
// generation ever going down.
func (s *stack) checkJournal(machine string) {
	s.t.Helper()
	h := s.hosts[machine]
	require.LessOrEqual(s.t, h.MaxInFlight(), 1, "%s: declarations overlapped in flight", machine)
	checkJournalEntries(s.t, machine, h.journal())
}

// checkJournalEntries asserts, from a host's journal (oldest first, however
// it was read), that sequences only grow and that no container's generation
// goes down, except a revert, which may go back to the module's floor (the
// newest generation the host counted healthy) and never below it.
func checkJournalEntries(t *testing.T, machine string, entries []agent.Entry) {
	t.Helper()
	var last uint64
	high := map[string]int64{}  // newest generation declared, by module
	floor := map[string]int64{} // newest generation healthy for min_healthy, by module
	for _, e := range entries {
		switch e.Outcome {
		case agent.OutcomeFloorRaised, agent.OutcomeRunning:
			for _, c := range e.Containers {
				if e.Outcome == agent.OutcomeFloorRaised || c.Health == nil {
					floor[c.Module] = max(floor[c.Module], c.Generation)
				}
			}
			continue
		case agent.OutcomeApplied, agent.OutcomeRepeat, agent.OutcomeRefused:
		default:
			continue
		}
		require.Greater(t, e.Seq, last, "%s: sequence %d sent after %d", machine, e.Seq, last)
		last = e.Seq
		for _, c := range e.Containers {
			// The sanctioned downgrades: a revert, back to the floor and
			// never below it; and an operator's rollback, below it, which
			// the floor follows.
			bound := high[c.Module]
			if e.Revert {
				bound = floor[c.Module]
			}
			if e.Rollback {
				require.NotEmpty(t, e.Reason, "%s: rollback %d journalled without who and why", machine, e.Seq)
				bound, floor[c.Module] = c.Generation, c.Generation
			}
			require.GreaterOrEqual(t, c.Generation, bound,
				"%s: declaration %d (plan %s, revert %v) sends %s generation %d below %d", machine, e.Seq, e.Plan, e.Revert, c.Module, c.Generation, bound)
			high[c.Module] = c.Generation
		}
	}
}

// runs asserts what a machine runs now, by its own report.
func (s *stack) runs(machine string, want ...mesh.Build) {
	s.t.Helper()
	rep := s.hosts[machine].Report()
	for _, b := range want {
		r, ok := rep.Running(b.Module)
		require.True(s.t, ok, "%s runs no %s", machine, b.Module)
		require.Equal(s.t, b.Digest, r.Digest, "%s runs %s generation %d, want %d", machine, b.Module, r.Generation, b.Generation)
		require.Equal(s.t, mesh.StateRunning, r.State)
	}
}
