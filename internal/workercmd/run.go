package workercmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/devstack"
	"github.com/meshroll/meshroll/internal/workerapp"
)

// runWorker loads and checks the mesh config, then runs the worker until
// ctx ends.
func runWorker(ctx context.Context, o *options, log zerolog.Logger) error {
	path := config.ResolvePath(o.config)
	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return err
	}
	if o.metricsListen != "" {
		cfg.Worker.MetricsListen = o.metricsListen
	}
	if v := &cfg.Worker.Versioning; o.buildID != "" {
		v.BuildID = o.buildID
	} else if v.BuildID == "" {
		v.BuildID = o.linkedBuildID
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := workerapp.CheckVersioning(cfg.Worker.Versioning); err != nil {
		return err
	}
	if o.makeCurrent && !cfg.Worker.Versioning.Enabled {
		return fmt.Errorf("--make-current needs worker.versioning.enabled (MESHROLL_WORKER_VERSIONING_ENABLED=true)")
	}
	for _, w := range cfg.Warnings() {
		log.Warn().Str("config", path).Msg(w)
	}
	if err := workerapp.CheckSources(ctx, cfg, dir); err != nil {
		return err
	}
	// The file is read again when it changes (machines join and leave
	// without a restart); an edit is held to the same checks.
	mesh, err := config.NewLive(path, cfg, func(c *config.Config) error { return workerapp.CheckSources(ctx, c, dir) })
	if err != nil {
		return err
	}

	tel, err := workerapp.NewTelemetry(cfg.Worker, log)
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
	deps, closeDeps, err := workerapp.DefaultDeps(ctx, mesh, dir, log)
	if err != nil {
		return err
	}
	defer closeDeps()
	if err := workerapp.EnsureSearchAttributes(ctx, c, cfg.Temporal.Namespace, log); err != nil {
		return err
	}
	if cfg.Worker.UIListen != "" {
		addr, stop, err := workerapp.ServeFleet(c, mesh, deps.Catalogue, log)
		if err != nil {
			return err
		}
		defer shutdown(stop)
		log.Info().Str("address", addr.String()).Msg("serving the fleet page (read-only)")
	}
	if cfg.Worker.WebhookListen != "" {
		addr, stop, err := workerapp.ServeWebhooks(ctx, c, cfg, dir, log)
		if err != nil {
			return err
		}
		defer shutdown(stop)
		log.Info().Str("address", addr.String()).Msg("serving the merge receiver at /v1/webhooks/github, /gitlab and /gitea")
	}
	if cfg.Worker.EnrollListen != "" {
		addr, stop, err := workerapp.ServeEnroll(c, mesh, log)
		if err != nil {
			return err
		}
		defer shutdown(stop)
		log.Info().Str("address", addr.String()).Msg("serving the enrollment endpoint at /v1/enroll")
	}
	w := workerapp.New(c, mesh, dir, deps, log)
	ev := log.Info().Str("address", cfg.Temporal.Address).Str("namespace", cfg.Temporal.Namespace).
		Str("task_queue", cfg.Temporal.TaskQueue).Int("machines", len(cfg.Machines)).Bool("tracing", tel.Tracing())
	if v := cfg.Worker.Versioning; v.Enabled {
		ev = ev.Str("deployment", v.Deployment()).Str("build_id", workerapp.BuildID(v))
	}
	ev.Msg("worker started")
	started := []func(){ready.Started}
	if o.makeCurrent {
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

// shutdown stops a server the worker started, giving requests in flight
// ten seconds.
func shutdown(stop func(context.Context) error) {
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = stop(sctx)
}

// runDev runs the dev stack until ctx ends (Ctrl-C). From then on SIGINT
// and SIGTERM have their default handling back, whoever asked for them
// before (the main's signal.NotifyContext), so that a second Ctrl-C stops
// the process at once instead of waiting for the stack to stop.
func runDev(ctx context.Context, o *options, out io.Writer, log zerolog.Logger) error {
	path := o.config
	if path == "" {
		path = os.Getenv(config.EnvConfig) // else devstack's example mesh
	}
	returned := make(chan struct{})
	defer close(returned)
	go func() {
		select {
		case <-ctx.Done():
			signal.Reset(os.Interrupt, syscall.SIGTERM)
		case <-returned:
		}
	}()
	return devstack.Run(ctx, devstack.Options{
		ConfigPath: path, StateDir: o.state, UIPort: o.uiPort, Runtime: o.runtime, DockerSocket: o.dockerSocket, MetricsListen: o.metricsListen, Out: out, Log: log,
	})
}
