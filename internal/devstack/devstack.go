// Package devstack runs a whole meshroll on one machine, for development
// and for the end-to-end tests: the Temporal dev server (the official CLI's
// `temporal server start-dev`, installed on first use), the embedded
// registry, the catalogue, one host agent per machine of the mesh and the
// worker, all from one command (`go run ./worker --dev`).
//
// Why one command rather than five terminals: a roll-out only means
// something when every piece is there, and a developer who forgets one (or
// starts an agent on the wrong port) learns it from a plan halted at tier 2.
// Run checks every port and tool before it starts anything, so a problem
// is one line naming it and its fix, and it keeps every piece's state in one
// directory, so that stopping the stack mid-plan and starting it again
// resumes the plan where it was: the Temporal database, the agents' journals,
// the registry's blobs and the catalogue all survive.
//
// State directory layout:
//
//	<state>/temporal.db       the dev server's SQLite database
//	<state>/hosts/<machine>/  each host agent's journal and checkpoint
//	<state>/registry/         the embedded registry's blobs and manifests
//	<state>/catalogue.db      the SQLite catalogue (unless catalogue.dsn)
//	<state>/logs/             the dev server's log (and the CLI's install log)
//	<state>/bin/              the Temporal CLI, when Run installed it
package devstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/meshroll/meshroll/internal/agent"
	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/statedir"
	"github.com/meshroll/meshroll/internal/workerapp"
)

// Defaults of Options. They are constants so that the worker's flags, its
// help text and Run cannot disagree.
const (
	// DefaultRuntime is the host agents' runtime: exec, which pulls each
	// built image by digest from the embedded registry and runs it as a
	// supervised process, so the dev mesh runs real code.
	DefaultRuntime = agent.RuntimeExec
	// DefaultStateDir keeps the stack's state next to where it is run, so
	// that two checkouts never share a database.
	DefaultStateDir = config.DefaultStateDir
	// DefaultUIPort is the Temporal Web UI's port, the CLI's own default
	// for a frontend on 7233.
	DefaultUIPort = 8233
	// DefaultFleetListen is where the stack serves the fleet page unless
	// worker.ui_listen says otherwise: on loopback, the port beside the
	// Web UI's.
	DefaultFleetListen = "127.0.0.1:8234"
	// DefaultConfigPath is the example mesh, run when no config is named.
	DefaultConfigPath = "examples/mesh.yaml"
	// DefaultStartTimeout bounds the wait for the dev server's frontend.
	DefaultStartTimeout = 2 * time.Minute
	// DefaultStopGrace is how long the dev server has to stop after an
	// interrupt before it is killed.
	DefaultStopGrace = 30 * time.Second
)

// agentShutdownGrace bounds how long a host agent waits for requests in
// flight when the stack stops.
const agentShutdownGrace = 10 * time.Second

// Options configures Run. The zero value runs the example mesh with state
// in .meshroll.
type Options struct {
	// ConfigPath is the mesh config (default DefaultConfigPath). Module
	// repositories given relative are relative to its directory, as for
	// the worker.
	ConfigPath string
	// StateDir holds every piece's state (default DefaultStateDir); it
	// replaces the config's state_dir.
	StateDir string
	// UIPort is the Temporal Web UI's port (default DefaultUIPort), on the
	// host of temporal.address.
	UIPort int
	// Runtime is the host agents' runtime name (default DefaultRuntime).
	Runtime string
	// DockerSocket is the engine the docker runtime uses (default
	// agent.DefaultDockerSocket).
	DockerSocket string
	// MetricsListen, when set, replaces the config's worker.metrics_listen:
	// where the worker serves /metrics, /livez and /readyz. Neither set:
	// nothing is served.
	MetricsListen string
	// Out receives the human-readable account: one line per piece started
	// and where, then "ready" once everything runs, and what stopped.
	Out io.Writer
	// Log receives the pieces' logs: the worker's, the agents', the SDK's.
	Log zerolog.Logger
	// StartTimeout bounds the wait for the dev server (default
	// DefaultStartTimeout).
	StartTimeout time.Duration
	// StopGrace is the dev server's time to stop (default
	// DefaultStopGrace).
	StopGrace time.Duration
}

func (o Options) withDefaults() Options {
	if o.ConfigPath == "" {
		o.ConfigPath = DefaultConfigPath
	}
	if o.StateDir == "" {
		o.StateDir = DefaultStateDir
	}
	if o.UIPort == 0 {
		o.UIPort = DefaultUIPort
	}
	if o.Runtime == "" {
		o.Runtime = DefaultRuntime
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if o.StopGrace <= 0 {
		o.StopGrace = DefaultStopGrace
	}
	return o
}

// Run starts the dev stack and runs it until ctx ends (Ctrl-C), then stops
// the worker, the host agents, the registry and catalogue and last the dev
// server, in that order, and returns nil. A port in use, a missing tool or
// a config the stack cannot serve is an error before anything starts. If
// the dev server exits while the stack runs, Run stops the rest and returns
// an error naming the server's log.
func Run(ctx context.Context, o Options) error {
	o = o.withDefaults()
	s, err := prepare(o)
	if err != nil {
		return err
	}
	srv, serveErr, err := s.start(ctx)
	if err != nil {
		stopErr := s.stopAll()
		if ctx.Err() != nil { // interrupted while starting: the user asked to stop
			s.say("stopped", "")
			return stopErr
		}
		return errors.Join(err, stopErr)
	}
	s.line("ready")

	var runErr error
	select {
	case <-ctx.Done():
	case <-srv.Done():
		runErr = srv.exitError("while the stack was running")
	case err := <-serveErr:
		runErr = err
	}
	s.say("stopping", "worker, host agents, registry and catalogue, then the Temporal dev server")
	stopErr := s.stopAll()
	if runErr == nil && stopErr == nil {
		s.say("stopped", "state kept in %s", s.display(s.state))
	}
	return errors.Join(runErr, stopErr)
}

// stack is one run's settings and the pieces started so far.
type stack struct {
	o          Options
	cfg        *config.Config
	configPath string
	configDir  string
	state      string
	cwd        string
	// runtimes are the agents' runtimes not yet handed to an agent (which
	// then owns it).
	runtimes map[string]agent.Runtime
	// sayStay is set once an agent runs on the docker runtime: stopping
	// then says that its containers stay.
	sayStay bool
	// stops undo what was started, in start order; stopAll runs them
	// backwards.
	stops []stopStep
}

// prepare reads the config and checks everything that can be checked
// before a process starts: the config suits a stack on this machine, every
// port is free, the tools are there, the state directory is ours.
func prepare(o Options) (*stack, error) {
	cfg, err := config.Load(o.ConfigPath)
	if err != nil {
		return nil, err
	}
	configDir, err := filepath.Abs(filepath.Dir(o.ConfigPath))
	if err != nil {
		return nil, fmt.Errorf("config directory: %w", err)
	}
	state, err := filepath.Abs(o.StateDir)
	if err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	cwd, _ := os.Getwd()
	// The stack's state is in one place whatever the file says, so that
	// --state alone decides what a restart resumes.
	own := *cfg
	own.StateDir = state
	if o.MetricsListen != "" {
		own.Worker.MetricsListen = o.MetricsListen
		if err := own.Validate(); err != nil {
			return nil, fmt.Errorf("--metrics-listen: %w", err)
		}
	}
	devDefaults(&own, o.UIPort)

	bs, err := binds(&own, o.UIPort, o.ConfigPath)
	if err != nil {
		return nil, err
	}
	if err := checkPorts(bs); err != nil {
		return nil, err
	}
	if err := checkTools(&own); err != nil {
		return nil, err
	}
	if err := workerapp.CheckSources(context.Background(), &own, configDir); err != nil {
		return nil, err
	}
	for _, d := range []string{state, filepath.Join(state, "logs"), filepath.Join(state, "hosts")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("state directory: %w", err)
		}
	}
	unlock, err := lockState(state)
	if err != nil {
		return nil, err
	}
	s := &stack{o: o, cfg: &own, configPath: o.ConfigPath, configDir: configDir, state: state, cwd: cwd,
		runtimes: map[string]agent.Runtime{}}
	s.onStop("state directory lock", unlock)
	s.onStop("host runtimes", s.closeRuntimes)
	// Runtimes first: an unknown --runtime, or a docker engine that does
	// not answer, is a usage problem to report before any server starts.
	for _, name := range machineOrder(&own) {
		// The exec runtime keeps its images beside the agent's journal and
		// pulls from the registry the worker pushes to.
		rt, err := agent.NewRuntime(o.Runtime, agent.RuntimeOptions{
			Machine:      name,
			StateDir:     filepath.Join(state, "hosts", name),
			Registry:     workerapp.RegistryOptions(own.Registry),
			DockerSocket: o.DockerSocket,
		})
		if err != nil {
			_ = s.stopAll()
			return nil, fmt.Errorf("--runtime %s: %w", o.Runtime, err)
		}
		s.runtimes[name] = rt
	}
	for _, w := range runtimeWarnings(&own, s.runtimes) {
		s.say("warning", "%s", w)
	}
	return s, nil
}

// lockState locks the state directory, so that two dev stacks never share a
// Temporal database, a catalogue or host journals.
func lockState(state string) (func() error, error) {
	unlock, err := statedir.Lock(filepath.Join(state, "devstack.lock"))
	if errors.Is(err, statedir.ErrLocked) {
		return nil, fmt.Errorf("state directory %s is in use by another dev stack: stop it, or pass another --state", state)
	}
	if err != nil {
		return nil, fmt.Errorf("lock state directory %s: %w", state, err)
	}
	return unlock, nil
}

// devDefaults turns on what a developer's stack shows and a deployed
// worker leaves off until asked: the fleet page, on loopback, its plans
// linked to the stack's own Temporal Web UI, and the merge receiver.
func devDefaults(cfg *config.Config, uiPort int) {
	if cfg.Worker.UIListen == "" {
		cfg.Worker.UIListen = DefaultFleetListen
	}
	webhookDefaults(cfg)
	enrollDefaults(cfg)
	if cfg.Temporal.UIURL == "" {
		host, _, _ := net.SplitHostPort(cfg.Temporal.Address)
		cfg.Temporal.UIURL = "http://" + dialable(net.JoinHostPort(host, strconv.Itoa(uiPort)))
	}
}

// checkTools finds the tools builds need: git always (builds check commits
// out), go when a module uses the go builder.
func checkTools(cfg *config.Config) error {
	if _, err := exec.LookPath("git"); err != nil {
		return errors.New("git not found on PATH: install git (meshroll builds modules from their git commits) and run again")
	}
	for _, name := range cfg.ModuleNames() {
		if b := cfg.Modules[name].Builder; b == "" || b == config.BuilderGo {
			if _, err := exec.LookPath("go"); err != nil {
				return fmt.Errorf("go not found on PATH: install Go 1.26 and put its bin directory on PATH (module %s is built with the go builder)", name)
			}
			break
		}
	}
	return nil
}

// start brings the pieces up in order, each line printed once it runs. It
// returns the dev server, to watch, and where the agents' servers report
// failing.
func (s *stack) start(ctx context.Context) (*devServer, <-chan error, error) {
	s.say("config", "%s", s.display(s.configPath))
	s.say("state", "%s", s.display(s.state))

	cli, err := s.temporalCLI(ctx)
	if err != nil {
		return nil, nil, err
	}
	logPath := filepath.Join(s.state, "logs", "temporal.log")
	srv, err := s.startDevServer(ctx, cli, logPath)
	if err != nil {
		return nil, nil, err
	}
	host, _, _ := net.SplitHostPort(s.cfg.Temporal.Address)
	s.say("temporal", "%s  (namespace %s; Web UI http://%s; log %s)", s.cfg.Temporal.Address, s.cfg.Temporal.Namespace,
		dialable(net.JoinHostPort(host, fmt.Sprint(s.o.UIPort))), s.display(logPath))

	// The worker's metrics, as the deployed worker has them; served only
	// when asked (worker.metrics_listen or --metrics-listen).
	tel, err := workerapp.NewTelemetry(s.cfg.Worker, s.o.Log)
	if err != nil {
		return nil, nil, err
	}
	s.onStop("telemetry", func() error {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return tel.Shutdown(sctx)
	})
	c, err := workerapp.Dial(ctx, s.cfg, tel, s.o.Log, 30*time.Second)
	if err != nil {
		return nil, nil, err
	}
	s.onStop("Temporal client", func() error { c.Close(); return nil })
	ready := workerapp.NewReadiness(c)
	// The dev server registered them at start; this is the worker's own
	// check, run here too so the stack runs what is deployed.
	if err := workerapp.EnsureSearchAttributes(ctx, c, s.cfg.Temporal.Namespace, s.o.Log); err != nil {
		return nil, nil, err
	}

	mesh, err := s.followFile()
	if err != nil {
		return nil, nil, err
	}
	deps, closeDeps, err := workerapp.DefaultDeps(ctx, mesh, s.configDir, s.o.Log)
	if err != nil {
		return nil, nil, err
	}
	s.onStop("registry and catalogue", closeDeps)
	if s.cfg.Registry.Address == "" {
		s.say("registry", "http://%s  (embedded; %s)", dialable(s.cfg.Registry.Listen), s.display(filepath.Join(s.state, "registry")))
	} else {
		s.say("registry", "%s  (registry.address; not started here)", s.cfg.Registry.Address)
	}
	s.say("catalogue", "%s", s.catalogue())

	serveErr := make(chan error, len(s.cfg.Machines))
	width := 0
	for name := range s.cfg.Machines {
		width = max(width, len(name))
	}
	for _, name := range machineOrder(s.cfg) {
		if err := s.startAgent(ctx, name, serveErr); err != nil {
			return nil, nil, err
		}
		m := s.cfg.Machines[name]
		s.say("host", "%-*s  %s  (tier %d, runtime %s)", width, name, m.Host, m.Tier, s.o.Runtime)
	}

	w := workerapp.New(c, mesh, s.configDir, deps, s.o.Log)
	if err := w.Start(); err != nil {
		return nil, nil, fmt.Errorf("start the worker: %w", err)
	}
	s.onStop("worker", func() error { w.Stop(); return nil })
	ready.Started()
	s.say("worker", "task queue %s  (namespace %s; machines %s)", s.cfg.Temporal.TaskQueue, s.cfg.Temporal.Namespace,
		strings.Join(machineOrder(s.cfg), ", "))
	addr, stopFleet, err := workerapp.ServeFleet(c, mesh, deps.Catalogue, s.o.Log)
	if err != nil {
		return nil, nil, err
	}
	s.onStop("fleet page", stopServer(stopFleet))
	s.say("fleet", "http://%s  (the fleet page: what runs, what moves; read-only; its plans link to the Web UI %s)", dialable(addr.String()), s.cfg.Temporal.UIURL)
	if err := s.serveWebhooks(ctx, c); err != nil {
		return nil, nil, err
	}
	if err := s.serveEnroll(c, mesh); err != nil {
		return nil, nil, err
	}
	if l := s.cfg.Worker.MetricsListen; l != "" {
		addr, err := tel.Serve(l, ready.Check)
		if err != nil {
			return nil, nil, err
		}
		s.say("metrics", "http://%s/metrics  (and /livez, /readyz)", dialable(addr.String()))
	}
	return srv, serveErr, nil
}

// startAgent serves machine name's host agent in process where its host URL
// says, with its token, on its own state directory.
func (s *stack) startAgent(ctx context.Context, name string, serveErr chan<- error) error {
	m := s.cfg.Machines[name]
	addr, err := hostListen(m.Host)
	if err != nil {
		return fmt.Errorf("machines.%s.host: %w", name, err)
	}
	rt := s.runtimes[name]
	a, err := agent.Open(ctx, agent.Options{
		Machine:  name,
		StateDir: filepath.Join(s.state, "hosts", name),
		Runtime:  rt,
		Log:      s.o.Log.With().Str("machine", name).Logger(),
	})
	if err != nil {
		return fmt.Errorf("host agent of %s: %w", name, err)
	}
	delete(s.runtimes, name) // the agent closes it
	if s.o.Runtime == agent.RuntimeDocker && !s.sayStay {
		// Said once, after the agents stop (steps undo last first).
		s.sayStay = true
		s.onStop("docker containers", s.sayContainersStay)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		_ = a.Close(context.Background())
		return fmt.Errorf("host agent of %s on %s (machines.%s.host): %w", name, addr, name, err)
	}
	srv := agent.NewServer(a, m.Token.Reveal())
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			serveErr <- fmt.Errorf("host agent of %s on %s stopped serving: %w", name, addr, err)
		}
	}()
	s.onStop("host agent "+name, func() error {
		sctx, cancel := context.WithTimeout(context.Background(), agentShutdownGrace)
		defer cancel()
		herr := srv.Shutdown(sctx)
		if herr != nil {
			herr = fmt.Errorf("requests still in flight: %w", herr)
		}
		return errors.Join(herr, a.Close(sctx))
	})
	return nil
}

// machineOrder is the machines in push order: by tier, then by name.
func machineOrder(cfg *config.Config) []string {
	names := cfg.MachineNames()
	sort.SliceStable(names, func(i, j int) bool { return cfg.Machines[names[i]].Tier < cfg.Machines[names[j]].Tier })
	return names
}
