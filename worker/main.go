// Command worker runs meshroll's Temporal worker: it hosts the plan and
// machine workflows and the activities that build, compose and push.
//
//	go run ./worker [--config mesh.yaml] [--log-level info] [--log-format auto]
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

	"github.com/meshroll/meshroll/internal/config"
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
	cfgFlag := flag.String("config", "", "mesh config file (default $MESHROLL_CONFIG or mesh.yaml)")
	level := flag.String("log-level", "info", "log level: debug, info, warn, error")
	format := flag.String("log-format", "auto", "log format: json, console, auto (console on a terminal)")
	flag.Parse()

	log, err := logging.New(os.Stderr, *level, *format)
	if err != nil {
		return err
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
