// Command worker runs meshroll's Temporal worker: it hosts the plan and
// machine workflows and the activities that build, compose and push.
//
//	go run ./worker [--config mesh.yaml] [--log-level info] [--log-format auto]
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
	"github.com/meshroll/meshroll/internal/temporalx"
	"github.com/meshroll/meshroll/internal/workerapp"
)

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
	flag.Parse()
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	if !*dev && (set["state"] || set["ui-port"] || set["runtime"]) {
		return fmt.Errorf("--state, --ui-port and --runtime go with --dev")
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
	for _, w := range cfg.Warnings() {
		log.Warn().Str("config", path).Msg(w)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	c, err := temporalx.Dial(ctx, cfg.Temporal, log, 10*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	deps, closeDeps, err := workerapp.DefaultDeps(ctx, cfg, dir, log)
	if err != nil {
		return err
	}
	defer closeDeps()
	if err := workerapp.EnsureSearchAttributes(ctx, c, cfg.Temporal.Namespace, log); err != nil {
		return err
	}
	w := workerapp.New(c, cfg, dir, deps, log)
	log.Info().Str("address", cfg.Temporal.Address).Str("namespace", cfg.Temporal.Namespace).
		Str("task_queue", cfg.Temporal.TaskQueue).Strs("machines", cfg.MachineNames()).Msg("worker started")
	err = workerapp.Run(ctx, w)
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
