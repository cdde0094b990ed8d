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

// DefaultDeps are this stage's: a file catalogue in the state directory, the
// git digest builder, and host agents at the URLs in the mesh config.
func DefaultDeps(cfg *config.Config, configDir string) (Deps, error) {
	dir := cfg.StateDir
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(configDir, dir)
	}
	cat, err := catalogue.OpenFile(filepath.Join(dir, "catalogue.json"))
	if err != nil {
		return Deps{}, err
	}
	return Deps{Catalogue: cat, Builder: build.GitDigest{}, Hosts: &activities.ConfigHosts{Mesh: cfg}}, nil
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
