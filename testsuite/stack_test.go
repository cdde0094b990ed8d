package testsuite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/agent"
	"github.com/meshroll/meshroll/internal/build"
	"github.com/meshroll/meshroll/internal/catalogue"
	"github.com/meshroll/meshroll/internal/catalogue/pgtest"
	"github.com/meshroll/meshroll/internal/catalogue/sqlcat"
	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/devserver"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/meshfile"
	"github.com/meshroll/meshroll/internal/plans"
	"github.com/meshroll/meshroll/internal/registry"
	"github.com/meshroll/meshroll/internal/workerapp"
)

// machineSpec is one machine of a test mesh.
type machineSpec struct {
	name    string
	tier    int
	modules []string
	// labels, when set, are the machine's labels in flow style; with
	// them, tier 0 leaves the tier out for a tier's select to place it.
	labels string
}

// stack is a whole meshroll on loopback: a Temporal dev server (a
// namespace of its own on the package's shared server, unless the test
// restarts the server or watches its Web UI), a git repository holding the
// modules, one real host agent per machine, and the real worker: in this
// process, or with faults the built binary on the written config, its
// agents behind fault proxies. newStack builds every one; see doc.go.
type stack struct {
	t   *testing.T
	srv *devserver.Server
	c   client.Client
	// namespace is the stack's namespace on srv.
	namespace string
	cfg       *config.Config
	// configPath is the mesh config written out for the starter CLI (and
	// the worker binary); file is what was written there, for a test that
	// edits it (see writeConfig).
	configPath string
	file       meshfile.File
	// enrollURL is where a stack with enroll serves its enrollment
	// endpoint.
	enrollURL string
	repo      string
	hosts     map[string]*agentHost
	cat       catalogue.Catalogue
	// worker is the in-process worker started last.
	worker *workerapp.Workers
	// builder is what the in-process worker builds with.
	builder build.Builder
	// registry is the embedded registry's options when there is one.
	registry registry.Options

	// With faults: each machine's proxy, the worker processes, and the
	// embedded registry's directory and address, so that it can be
	// stopped and started again on both.
	proxies         map[string]*faultProxy
	workers         *faultWorkers
	regDir, regAddr string
	reg             *registry.Server
	// access is who may do what at the stack's registry.
	access   registry.Access
	stateDir string
}

// stackOptions shapes a stack. The zero value is a stack of no machines
// running no images, its worker in this process.
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
	// see meshfile.Section), with providers and checks:
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
	// picture keeps the worker's catalogue in SQLite in the state
	// directory, where the starter reads the fleet picture from.
	picture bool
	// postgres keeps the worker's catalogue in a PostgreSQL database of
	// its own (pgtest.Fresh), where picture keeps it in SQLite.
	postgres bool
	// persist gives the stack a dev server of its own keeping its state
	// in a SQLite file, so that the server can be restarted.
	persist bool
	// images builds real OCI images of real Go programs (the go builder)
	// into an embedded registry, instead of digests without images.
	images bool
	// registry, when set, is where the go builder pushes instead.
	registry string
	// registryAccess, when it names a push credential, makes the stack's
	// registry ask for credentials: the builder pushes with Push, the
	// agents' runtimes pull with Pull.
	registryAccess registry.Access
	// uiPort, when set, gives the stack a dev server of its own serving
	// the Temporal Web UI there.
	uiPort string
	// ownServer gives the stack a dev server of its own, its plans in
	// namespace default as in a first deployment: the histories the
	// capture tests record for the replay tests come from one.
	ownServer bool
	// exec runs the host agents with the exec runtime (real processes of
	// the built images); it needs images.
	exec bool
	// docker runs the host agents with the docker runtime on the test
	// engine (see dockerEngine), every module's containers on the host
	// network; it needs images.
	docker bool
	// bridge, with docker, runs the docker runtime on the bridge engine
	// (see dockerBridgeSocket) and declares every module's containers on
	// its bridge, their probe ports published on 127.0.0.1.
	bridge bool
	// tokens makes every host agent require a token of its own (see
	// machineToken), which the config gives the worker.
	tokens bool
	// windows, when set, gives the windows: section in YAML flow style. It
	// is called as the config is written, just before the worker starts,
	// so that a window can be a few seconds from then.
	windows func() string

	// faults is meshroll as deployed, with doors for faults: the worker
	// is the built binary, run by the test (s.workers.start()) on the
	// written config with a state directory and the embedded registry
	// (which stopRegistry and startRegistry take down and bring back on
	// its address); each machine's agent sits behind a faultProxy
	// (s.proxies); without images a command builder makes a digest from
	// the commit at once.
	faults bool
	// noAgents leaves the machines' agents to the test (with faults:
	// proxies start pointing nowhere, for setBackend).
	noAgents bool
	// startDelay is how long the agents' noop runtime reports a container
	// starting before it runs, so that pushes stay in flight that long.
	startDelay time.Duration
	// notify, when set, is the notify: section in YAML flow style.
	notify string
	// moduleKeys, when set, are more keys of every module's mapping in
	// YAML flow style, such as `memory: 64MiB, user: "1000:1000"`.
	moduleKeys string
	// live runs the in-process worker on the written config as the worker
	// command does (config.Live): an edit of the file (writeConfig) is
	// put in force without a restart.
	live bool
	// enroll, when set, is the enroll: section in YAML flow style: the
	// stack serves the enrollment endpoint (s.enrollURL) with the token
	// enrollToken, beside a live worker.
	enroll string
}

// enrollToken is the enrollment token of a stack with enroll.
const enrollToken = "enroll-token-5a4b3c2d"

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

// commandDigest is the command builder of a stack with faults and no
// images: a digest made from module and commit at once, so that the tests
// that run no image spend no time compiling.
const commandDigest = `printf 'fault.invalid/meshroll/%s@sha256:%s\n' "$MESHROLL_MODULE" "$(printf '%s %s' "$MESHROLL_MODULE" "$MESHROLL_COMMIT" | sha256sum | cut -c1-64)" > "$MESHROLL_DIGEST_FILE"`

func newStack(t *testing.T, o stackOptions) *stack {
	t.Helper()
	s := &stack{t: t, repo: t.TempDir(), hosts: map[string]*agentHost{}, cat: catalogue.NewMemory(), proxies: map[string]*faultProxy{}}
	s.connect(o)
	var bins string
	if o.faults {
		bins = dsBuild(t, "worker")
		s.stateDir = t.TempDir()
	}
	s.git("init", "-q", "-b", "main")
	s.builder = build.GitDigest{}
	if o.images || o.faults {
		require.NoError(t, os.WriteFile(filepath.Join(s.repo, "go.mod"), []byte("module example.com/mesh\n\ngo 1.26\n"), 0o644))
		s.regDir = t.TempDir()
		s.access = o.registryAccess
		s.startRegistry()
		t.Cleanup(s.stopRegistry)
		s.registry = registry.Options{Address: "http://" + s.regAddr, Username: s.access.Push.Username, Password: s.access.Push.Password}
		if o.registry != "" {
			s.registry.Address = o.registry
		}
	}
	if o.images {
		s.builder = &build.Go{Options: build.Options{Registry: s.registry}}
	}
	for _, m := range o.modules {
		s.commit(m)
	}

	f := meshfile.File{
		Address: s.srv.HostPort(), Namespace: s.namespace, TaskQueue: "meshroll-" + strings.ToLower(sanitize(t.Name())),
		Push: o.push, Tiers: o.tiers, Analysis: o.analysis, Notify: o.notify, Enroll: o.enroll,
	}
	if o.enroll != "" {
		f.Worker = fmt.Sprintf("{enroll_listen: 127.0.0.1:0, enroll_token: %s}", enrollToken)
	}
	if o.faults {
		f.StateDir, f.Registry = s.stateDir, s.registry.Address
	}
	if o.picture {
		// The worker's catalogue where the starter finds it: in the
		// state directory, so that status reads the fleet picture.
		s.stateDir = t.TempDir()
		f.StateDir = s.stateDir
		s.cat = openCatalogue(t, s.sqliteDSN())
	}
	if o.postgres {
		s.cat = openCatalogue(t, pgtest.Fresh(t))
	}
	for _, m := range o.modules {
		mod := meshfile.Module{Name: m, Repo: s.repo, ControlPlane: slices.Contains(o.controlPlane, m), Health: o.healthYAML()}
		if o.docker {
			mod.Network = mesh.NetworkHost
			if o.bridge {
				mod.Network = mesh.NetworkBridge
			}
		}
		if o.faults && !o.images {
			mod.Extra = "builder: command, command: [sh, -c, " + strconv.Quote(commandDigest) + "]"
		}
		if o.moduleKeys != "" {
			mod.Extra = strings.TrimPrefix(mod.Extra+", "+o.moduleKeys, ", ")
		}
		f.Modules = append(f.Modules, mod)
	}
	for _, m := range o.machines {
		token := ""
		if o.tokens {
			token = machineToken(m.name)
		}
		host := ""
		if !o.noAgents {
			h := newAgentHostWithToken(t, m.name, s.runtime(o, m.name), token)
			s.hosts[m.name] = h
			host = h.URL()
		}
		if o.faults {
			p := newFaultProxy(t, "http://127.0.0.1:1")
			if host != "" {
				p.setBackend(host)
			}
			s.proxies[m.name] = p
			host = p.URL()
		}
		f.Machines = append(f.Machines, meshfile.Machine{Name: m.name, Host: host, Tier: m.tier, NoTier: m.labels != "" && m.tier == 0,
			Modules: m.modules, Labels: m.labels, Token: token})
	}
	if o.windows != nil {
		f.Windows = o.windows()
	}
	y := f.String()
	cfg, err := config.Parse("test mesh.yaml", []byte(y))
	require.NoError(t, err, "test mesh config:\n%s", y)
	s.cfg, s.file = cfg, f
	s.configPath = filepath.Join(t.TempDir(), "mesh.yaml")
	require.NoError(t, os.WriteFile(s.configPath, []byte(y), 0o644))

	if o.faults {
		s.workers = newFaultWorkers(t, filepath.Join(bins, "worker"), s.configPath)
		return s
	}
	if o.live {
		live, err := config.NewLive(s.configPath, cfg, nil)
		require.NoError(t, err)
		s.startWorkerOn(live)
		if o.enroll != "" {
			addr, stop, err := workerapp.ServeEnroll(s.c, live, zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel))
			require.NoError(t, err)
			t.Cleanup(func() { _ = stop(context.Background()) })
			s.enrollURL = "http://" + addr.String()
		}
		return s
	}
	s.startWorker()
	return s
}

// connect gives the stack its server, namespace and client: a namespace
// of the package's shared server, or a server of its own when the test
// restarts it (persist), watches its Web UI or records histories.
func (s *stack) connect(o stackOptions) {
	t := s.t
	t.Helper()
	if !o.persist && o.uiPort == "" && !o.ownServer {
		s.srv = sharedServer(t)
		s.namespace, s.c = s.srv.NewNamespace(t, o.identity)
		return
	}
	var dbFile string
	if o.persist {
		dbFile = filepath.Join(t.TempDir(), "temporal.db")
	}
	s.srv = devserver.Start(t, devserver.Options{DBFile: dbFile, UIPort: o.uiPort})
	s.namespace, s.c = s.srv.Namespace(), s.srv.Client()
	if o.identity != "" {
		opts := s.srv.ClientOptions()
		opts.Identity = o.identity
		c, err := client.Dial(opts)
		require.NoError(t, err)
		t.Cleanup(c.Close)
		s.c = c
	}
}

// clientOptions dials the stack's server and namespace, for code under
// test that builds its own client.
func (s *stack) clientOptions() client.Options {
	o := s.srv.ClientOptions()
	o.Namespace = s.namespace
	return o
}

// runtime is machine's host agent's runtime for the options.
func (s *stack) runtime(o stackOptions, machine string) func(dir string) agent.Runtime {
	var socket string
	if o.docker {
		socket = s.dockerEngine(machine, o.bridge)
	}
	return func(dir string) agent.Runtime {
		switch {
		case o.docker:
			rt, err := agent.NewRuntime(agent.RuntimeDocker, agent.RuntimeOptions{
				Machine: s.engineName(machine), DockerSocket: socket, StateDir: dir, Registry: s.pullRegistry(),
			})
			require.NoError(s.t, err)
			return rt
		case o.exec:
			rt, err := agent.NewRuntime(agent.RuntimeExec, agent.RuntimeOptions{
				Machine: machine, StateDir: dir, Registry: s.pullRegistry(), HealthyAfter: 200 * time.Millisecond, StopGrace: 5 * time.Second,
			})
			require.NoError(s.t, err)
			return rt
		}
		return agent.NewNoopRuntime(o.startDelay)
	}
}

// pullRegistry is the stack's registry as the agents pull from it: with
// the pull credential when the registry asks for one.
func (s *stack) pullRegistry() registry.Options {
	o := s.registry
	if s.access.Pull.Username != "" {
		o.Username, o.Password = s.access.Pull.Username, s.access.Pull.Password
	}
	return o
}

// startWorker runs the real worker in-process; it stops with the test, or
// earlier with the returned worker's Stop.
func (s *stack) startWorker() *workerapp.Workers { return s.startWorkerOn(s.cfg) }

// startWorkerOn is startWorker on a config source of the test's.
func (s *stack) startWorkerOn(mesh config.Source) *workerapp.Workers {
	deps := workerapp.Deps{Catalogue: s.cat, Builder: s.builder, Hosts: &config.Hosts{Mesh: mesh}, PollInterval: 20 * time.Millisecond}
	log := zerolog.New(zerolog.NewTestWriter(s.t)).Level(zerolog.WarnLevel)
	require.NoError(s.t, workerapp.EnsureSearchAttributes(context.Background(), s.c, s.cfg.Temporal.Namespace, log))
	w := workerapp.New(s.c, mesh, s.repo, deps, log)
	require.NoError(s.t, w.Start())
	s.t.Cleanup(w.Stop)
	s.worker = w
	return w
}

// sqliteDSN is where picture keeps the worker's catalogue: the starter
// finds it there.
func (s *stack) sqliteDSN() string { return "sqlite:" + filepath.Join(s.stateDir, "catalogue.db") }

// openCatalogue opens the SQL catalogue at dsn, closed with the test.
func openCatalogue(t *testing.T, dsn string) *sqlcat.Catalogue {
	t.Helper()
	cat, err := sqlcat.Open(t.Context(), dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cat.Close() })
	return cat
}

// startRegistry serves the embedded registry from its directory, on the
// address it had before (a picked one the first time, so that no outgoing
// connection takes it while the registry is down).
func (s *stack) startRegistry() {
	s.t.Helper()
	srv, err := registry.New(s.regDir, registry.WithAccess(s.access))
	require.NoError(s.t, err)
	addr := s.regAddr
	if addr == "" {
		addr = "127.0.0.1:" + freePort(s.t)
	}
	var url string
	deadline := time.Now().Add(30 * time.Second)
	for {
		url, err = srv.Start(addr)
		if err == nil || !errors.Is(err, syscall.EADDRINUSE) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // another process on the box may hold it a moment
	}
	require.NoError(s.t, err, "registry on %s", addr)
	s.regAddr = strings.TrimPrefix(url, "http://")
	s.reg = srv
}

// stopRegistry stops serving; everything it acknowledged stays on disk.
func (s *stack) stopRegistry() {
	if s.reg != nil {
		require.NoError(s.t, s.reg.Close())
		s.reg = nil
	}
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
	return gitIn(s.t, s.repo, args...)
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

// startGated starts a plan of module at commit that waits at gates (tier
// numbers: before each) and returns its ID once it waits at the first.
func (s *stack) startGated(module, commit string, gates ...int) string {
	s.t.Helper()
	id := s.start(module, commit, gates...).ID
	waitFor(s.t, s, id, meshapi.PlanGated)
	return id
}

// heldAtTier2 converges module at a first commit, then starts a plan of a
// second commit and waits until it holds at tier 2's gate: the set-up of
// the tests of what may reach a plan between its tiers. It returns both
// commits and the held plan.
func (s *stack) heldAtTier2(module string) (first, second, held string) {
	s.t.Helper()
	first = s.commit(module)
	s.converge(module, first)
	second = s.commit(module)
	return first, second, s.startGated(module, second, 2)
}

// staleHostPlan sets up the 2026-10-02 incident: host and controller
// converged, a host plan composed and held at tier 2's gate, then a newer
// controller converged while it waits. It returns the host's two commits,
// the controller's two and the held plan.
func (s *stack) staleHostPlan() (h1, h2, k1, k2, held string) {
	s.t.Helper()
	h1, k1 = s.commit("host"), s.commit("mesh-controller")
	s.converge("mesh-controller", k1)
	s.converge("host", h1)
	h2 = s.commit("host")
	held = s.startGated("host", h2, 2)
	k2 = s.commit("mesh-controller")
	s.converge("mesh-controller", k2)
	return h1, h2, k1, k2, held
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
		case agent.OutcomeFound:
			// What an agent with no state found running: no declaration
			// may go below it but a revert or a rollback.
			for _, c := range e.Containers {
				high[c.Module] = max(high[c.Module], c.Generation)
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

// everywhere asserts that every machine of the stack runs b, by its own
// report, and that its journal keeps the invariants (checkJournal).
func (s *stack) everywhere(b mesh.Build) {
	s.t.Helper()
	for m := range s.hosts {
		s.runs(m, b)
		s.checkJournal(m)
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

// withFaults is o with faults on: the same mesh, deployed (see
// stackOptions.faults).
func withFaults(o stackOptions) stackOptions {
	o.faults = true
	return o
}
