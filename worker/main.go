// Command worker runs meshroll's Temporal worker: it hosts the plan and
// machine workflows and the activities that build, compose and push.
//
//	go run ./worker [--config mesh.yaml] [--log-level info] [--log-format auto]
//	                [--metrics-listen 127.0.0.1:9090] [--build-id B] [--make-current]
//
// --metrics-listen (worker.metrics_listen) serves Prometheus metrics on
// /metrics and the probes /livez and /readyz. Tracing (worker.tracing) and
// Worker Versioning (worker.versioning) are set in the mesh config; the
// build ID a versioned worker announces is --build-id, else
// worker.versioning.build_id, else the one linked in with
// -ldflags "-X main.buildID=B", else the git revision Go stamped in.
// --make-current makes that build the deployment's current version once the
// worker polls (the first deployment, or a switch-over as soon as the new
// worker is up); otherwise an operator does it with
// `temporal worker deployment set-current-version`.
//
// With --dev it starts the whole development mesh instead (package
// devstack): a Temporal dev server, the embedded registry, the catalogue, a
// host agent per machine and the worker, with every piece's state in one
// directory so that stopping and starting again resumes plans in flight.
// It prints what it started and where, then "ready"; Ctrl-C stops it all.
//
//	go run ./worker --dev [--config examples/mesh.yaml] [--state .meshroll]
//	                      [--ui-port 8233] [--runtime noop]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/devstack"
	"github.com/meshroll/meshroll/internal/logging"
	"github.com/meshroll/meshroll/internal/telemetry"
	"github.com/meshroll/meshroll/internal/workerapp"
)

// buildID is set at link time (-ldflags "-X main.buildID=...") by builds
// that name their version; see --build-id.
var buildID string

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

func run() error {
	cfgFlag := flag.String("config", "", "mesh config file (default $MESHROLL_CONFIG or mesh.yaml; with --dev "+devstack.DefaultConfigPath+")")
	level := flag.String("log-level", "info", "log level: debug, info, warn, error (with --dev the default is warn)")
	format := flag.String("log-format", "auto", "log format: json, console, auto (console on a terminal)")
	dev := flag.Bool("dev", false, "start the whole dev mesh: Temporal dev server, registry, catalogue, a host agent per machine and the worker")
	state := flag.String("state", devstack.DefaultStateDir, "with --dev: the directory holding all state (a restart on it resumes plans)")
	uiPort := flag.Int("ui-port", devstack.DefaultUIPort, "with --dev: the Temporal Web UI's port")
	runtime := flag.String("runtime", devstack.DefaultRuntime, "with --dev: the host agents' runtime (noop, exec, docker)")
	metricsListen := flag.String("metrics-listen", "", "serve /metrics, /livez and /readyz on this host:port (overrides worker.metrics_listen)")
	buildIDFlag := flag.String("build-id", "", "the build ID announced under Worker Versioning (overrides worker.versioning.build_id)")
	makeCurrent := flag.Bool("make-current", false, "under Worker Versioning, make this build the deployment's current version once it polls (new plans and machine workflows move to it)")
	flag.Parse()
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	if !*dev && (set["state"] || set["ui-port"] || set["runtime"]) {
		return fmt.Errorf("--state, --ui-port and --runtime go with --dev")
	}
	if *dev && (set["metrics-listen"] || set["build-id"] || set["make-current"]) {
		return fmt.Errorf("--metrics-listen, --build-id and --make-current do not go with --dev")
	}
	if *dev && !set["log-level"] {
		*level = "warn" // the terminal is for the stack's account; --log-level info shows the rest
	}

	log, err := logging.New(os.Stderr, *level, *format)
	if err != nil {
		return err
	}
	if *dev {
		return runDev(*cfgFlag, *state, *uiPort, *runtime, log)
	}
	path := config.ResolvePath(*cfgFlag)
	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return err
	}
	if *metricsListen != "" {
		cfg.Worker.MetricsListen = *metricsListen
	}
	if v := &cfg.Worker.Versioning; *buildIDFlag != "" {
		v.BuildID = *buildIDFlag
	} else if v.BuildID == "" {
		v.BuildID = buildID
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := workerapp.CheckVersioning(cfg.Worker.Versioning); err != nil {
		return err
	}
	if *makeCurrent && !cfg.Worker.Versioning.Enabled {
		return fmt.Errorf("--make-current needs worker.versioning.enabled (MESHROLL_WORKER_VERSIONING_ENABLED=true)")
	}
	for _, w := range cfg.Warnings() {
		log.Warn().Str("config", path).Msg(w)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	tel, err := telemetry.New(telemetry.Options{Worker: cfg.Worker, Log: log})
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := tel.Shutdown(sctx); err != nil {
			log.Warn().Err(err).Msg("telemetry did not stop cleanly")
		}
	}()
	c, err := workerapp.Dial(ctx, cfg, tel, log, 10*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	ready := workerapp.NewReadiness(c)
	if cfg.Worker.MetricsListen != "" {
		addr, err := tel.Serve(cfg.Worker.MetricsListen, ready.Check)
		if err != nil {
			return err
		}
		log.Info().Str("address", addr.String()).Msg("serving /metrics, /livez and /readyz")
	}
	deps, closeDeps, err := workerapp.DefaultDeps(ctx, cfg, dir, log)
	if err != nil {
		return err
	}
	defer closeDeps()
	if err := workerapp.EnsureSearchAttributes(ctx, c, cfg.Temporal.Namespace, log); err != nil {
		return err
	}
	w := workerapp.New(c, cfg, dir, deps, log)
	ev := log.Info().Str("address", cfg.Temporal.Address).Str("namespace", cfg.Temporal.Namespace).
		Str("task_queue", cfg.Temporal.TaskQueue).Strs("machines", cfg.MachineNames()).Bool("tracing", tel.Tracing())
	if v := cfg.Worker.Versioning; v.Enabled {
		ev = ev.Str("deployment", v.Deployment()).Str("build_id", workerapp.BuildID(v))
	}
	ev.Msg("worker started")
	started := []func(){ready.Started}
	if *makeCurrent {
		started = append(started, func() {
			go func() {
				if err := workerapp.MakeCurrent(ctx, c, cfg.Worker.Versioning, log); err != nil {
					log.Error().Err(err).Msg("could not make this build current; do it with temporal worker deployment set-current-version")
				}
			}()
		})
	}
	err = workerapp.Run(ctx, w, started...)
	log.Info().Msg("worker stopped")
	return err
}

// runDev runs the dev stack until Ctrl-C. After the first Ctrl-C the
// default handling is back, so a second one stops the process at once.
func runDev(cfgFlag, state string, uiPort int, runtime string, log zerolog.Logger) error {
	path := cfgFlag
	if path == "" {
		path = os.Getenv(config.EnvConfig) // else devstack's example mesh
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); stop() }()
	return devstack.Run(ctx, devstack.Options{
		ConfigPath: path, StateDir: state, UIPort: uiPort, Runtime: runtime, Out: os.Stdout, Log: log,
	})
}
