// Package workerapp wires the worker: it registers the workflows under their
// stable names and the activities with their dependencies, and runs the
// worker until its context ends. The worker's main and the integration tests
// share it, so the tests run what is deployed.
package workerapp

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/rs/zerolog"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/activities"
	"github.com/meshroll/meshroll/internal/build"
	"github.com/meshroll/meshroll/internal/catalogue"
	"github.com/meshroll/meshroll/internal/catalogue/sqlcat"
	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/workflows"
)

// Register puts meshroll's workflows and activities on a worker.
func Register(w worker.Registry, a *activities.Activities) {
	w.RegisterWorkflowWithOptions(workflows.Plan, workflow.RegisterOptions{Name: meshapi.PlanWorkflowType})
	w.RegisterWorkflowWithOptions(workflows.Machine, workflow.RegisterOptions{Name: meshapi.MachineWorkflowType})
	w.RegisterActivityWithOptions(a, activity.RegisterOptions{})
}

// Deps are the activities' dependencies that a deployment chooses.
type Deps struct {
	Catalogue catalogue.Catalogue
	Builder   build.Builder
	Hosts     activities.Hosts
}

// DefaultDeps opens what the config names: the catalogue (SQLite in the
// state directory unless catalogue.dsn says otherwise), the builder, and host
// agents at the URLs in the mesh config. The returned close releases them.
func DefaultDeps(ctx context.Context, cfg *config.Config, configDir string) (Deps, func() error, error) {
	dsn := cfg.Catalogue.DSN
	if dsn == "" {
		dir := cfg.StateDir
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(configDir, dir)
		}
		dsn = "sqlite:" + filepath.Join(dir, "catalogue.db")
	}
	cat, err := sqlcat.Open(ctx, dsn)
	if err != nil {
		return Deps{}, nil, fmt.Errorf("catalogue: %w", err)
	}
	return Deps{Catalogue: cat, Builder: build.GitDigest{}, Hosts: &activities.ConfigHosts{Mesh: cfg}}, cat.Close, nil
}

// New builds a worker on the configured task queue.
func New(c client.Client, cfg *config.Config, configDir string, deps Deps, log zerolog.Logger) worker.Worker {
	w := worker.New(c, cfg.Temporal.TaskQueue, worker.Options{})
	Register(w, &activities.Activities{
		Mesh:      cfg,
		Catalogue: deps.Catalogue,
		Builder:   deps.Builder,
		Hosts:     deps.Hosts,
		Temporal:  c,
		ConfigDir: configDir,
		Log:       log,
	})
	return w
}

// Run runs the worker until ctx ends, then stops it cleanly (in-flight
// activity attempts are given the SDK's stop timeout to finish).
func Run(ctx context.Context, w worker.Worker) error {
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	<-ctx.Done()
	w.Stop()
	return nil
}
