// Package workerapp wires the worker: it registers the workflows under their
// stable names and the activities with their dependencies, and runs the
// worker until its context ends. The worker's main and the integration tests
// share it, so the tests run what is deployed.
package workerapp

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

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
	"github.com/meshroll/meshroll/internal/machinefeed"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/registry"
	"github.com/meshroll/meshroll/workflows"
)

// Register puts meshroll's workflows and activities on a worker. Under
// Worker Versioning (see WithDeployment) a plan is pinned: it finishes on
// the build that started it, so a plan in flight never meets code it was
// not written against. A machine workflow auto-upgrades: it runs forever,
// so it must move to new builds, on its next workflow task (its changes are
// gated by workflow.GetVersion, which is what lets it replay on new code),
// and its continue-as-new runs start on the deployment's current build.
// Without versioning the SDK ignores both behaviours.
func Register(w worker.Registry, a *activities.Activities) {
	RegisterWorkflows(w)
	w.RegisterActivityWithOptions(a, activity.RegisterOptions{})
}

// RegisterWorkflows registers every workflow type under its meshapi name:
// the worker's list, which the replay tests register too, so that a
// history of any type the worker runs is one they can replay.
func RegisterWorkflows(w worker.WorkflowRegistry) {
	w.RegisterWorkflowWithOptions(workflows.Plan, workflow.RegisterOptions{
		Name: meshapi.PlanWorkflowType, VersioningBehavior: workflow.VersioningBehaviorPinned,
	})
	w.RegisterWorkflowWithOptions(workflows.Machine, workflow.RegisterOptions{
		Name: meshapi.MachineWorkflowType, VersioningBehavior: workflow.VersioningBehaviorAutoUpgrade,
	})
	// The fleet budget lives for ever, as machine workflows do.
	w.RegisterWorkflowWithOptions(workflows.FleetBudget, workflow.RegisterOptions{
		Name: meshapi.FleetBudgetWorkflowType, VersioningBehavior: workflow.VersioningBehaviorAutoUpgrade,
	})
	// An enrollment lives as long as its machine is known.
	w.RegisterWorkflowWithOptions(workflows.Enrollment, workflow.RegisterOptions{
		Name: meshapi.EnrollmentWorkflowType, VersioningBehavior: workflow.VersioningBehaviorAutoUpgrade,
	})
	registerRelay(w)
	// The levers and a delivery's Receive are short: each run finishes on
	// the build that started it.
	for name, fn := range map[string]any{
		meshapi.RejectWorkflowType:   workflows.RejectBuild,
		meshapi.BuildsWorkflowType:   workflows.ListBuilds,
		meshapi.FreezeWorkflowType:   workflows.Freeze,
		meshapi.UnfreezeWorkflowType: workflows.Unfreeze,
		meshapi.FreezesWorkflowType:  workflows.ListFreezes,
		meshapi.ReceiveWorkflowType:  workflows.Receive,
		meshapi.NotifierWorkflowType: workflows.Notifier,
		meshapi.RebuildWorkflowType:  workflows.RebuildCatalogue,
	} {
		w.RegisterWorkflowWithOptions(fn, workflow.RegisterOptions{Name: name, VersioningBehavior: workflow.VersioningBehaviorPinned})
	}
}

// registerRelay registers Relay, which runs on the relays' own task queue
// (see Workers) and in the replay tests beside the others. A relay lives
// within its plan, on the plan's build: the relays' queue is in the same
// deployment version as the plan's, so a pinned plan's relays inherit its
// version.
func registerRelay(w worker.WorkflowRegistry) {
	w.RegisterWorkflowWithOptions(workflows.Relay, workflow.RegisterOptions{
		Name: meshapi.RelayWorkflowType, VersioningBehavior: workflow.VersioningBehaviorPinned,
	})
}

// Deps are the activities' dependencies that a deployment chooses.
type Deps struct {
	Catalogue catalogue.Catalogue
	Builder   build.Builder
	Hosts     activities.Hosts
	// PollInterval is how often a push reads a host's report while it
	// waits; zero is activities.DefaultPollInterval. Tests and the bench
	// shorten it.
	PollInterval time.Duration
}

// DefaultDeps opens what the config names: the catalogue (SQLite in the
// state directory unless catalogue.dsn says otherwise), the registry (the
// embedded one, serving from the state directory, unless registry.address
// names one), the builders, and host agents at the URLs in the mesh config
// in force (mesh: the worker's is live). The returned close releases them.
func DefaultDeps(ctx context.Context, mesh config.Source, configDir string, log zerolog.Logger) (Deps, func() error, error) {
	cfg := mesh.Current()
	state := cfg.ResolvedStateDir(configDir)
	cat, err := sqlcat.Open(ctx, cfg.CatalogueDSN(configDir))
	if err != nil {
		return Deps{}, nil, fmt.Errorf("catalogue: %w", err)
	}
	closers := []func() error{cat.Close}
	closeAll := func() error {
		var errs []error
		for i := len(closers) - 1; i >= 0; i-- {
			errs = append(errs, closers[i]())
		}
		return errors.Join(errs...)
	}

	reg := RegistryOptions(cfg.Registry)
	if cfg.Registry.Address == "" {
		// The registry's warnings and errors (logfmt lines of its own) go
		// into the worker's log as messages of component=registry.
		srv, err := registry.New(filepath.Join(state, "registry"), registry.WithLog(log.With().Str("component", "registry").Logger()),
			registry.WithAccess(embeddedAccess(cfg.Registry)))
		if err != nil {
			_ = closeAll()
			return Deps{}, nil, fmt.Errorf("embedded registry: %w", err)
		}
		url, err := srv.Start(cfg.Registry.Listen)
		if err != nil {
			_ = closeAll()
			return Deps{}, nil, fmt.Errorf("embedded registry on %s: %w (another worker running? set registry.listen or registry.address)", cfg.Registry.Listen, err)
		}
		closers = append(closers, srv.Close)
		reg.Address = url
		log.Info().Str("address", url).Str("dir", filepath.Join(state, "registry")).Msg("embedded registry serving")
	}
	opts := build.Options{Registry: reg, Repository: cfg.Registry.Repository}
	builders := build.Select{
		build.KindGo:      &build.Go{Options: opts},
		build.KindCommand: &build.Command{Options: opts},
	}
	return Deps{Catalogue: cat, Builder: builders, Hosts: &config.Hosts{Mesh: mesh}}, closeAll, nil
}

// RegistryOptions is the registry section of the config as the registry
// package takes it. With no registry.address it names the embedded registry
// at registry.listen, where the worker serves it, so that everything that
// pushes or pulls (builders, host agents, the demo) agrees on one address.
func RegistryOptions(r config.Registry) registry.Options {
	o := registry.Options{
		Address: r.Address, Username: r.Username, Password: r.Password, Token: r.Token,
		Insecure: r.Insecure, CAFile: r.CAFile,
	}
	if o.Address == "" {
		o.Address = "http://" + r.Listen
	}
	return o
}

// embeddedAccess is who may do what at the embedded registry: the
// worker's credential pushes, the hosts' only pulls, deletes as
// configured.
func embeddedAccess(r config.Registry) registry.Access {
	return registry.Access{
		Push:    registry.Credential{Username: r.Username, Password: r.Password},
		Pull:    registry.Credential{Username: r.PullUsername, Password: r.PullPassword},
		Deletes: r.Deletes,
	}
}

// Workers are the workers one worker process runs: one on the configured
// task queue, for every workflow and activity, and one on the relays' task
// queue (meshapi.RelayTaskQueue) for Relay alone, so that a large plan's
// relays are served by pollers of their own rather than behind thousands of
// machine workflows' tasks.
type Workers struct {
	main, relays worker.Worker
	// watch keeps the catalogue's picture of the hosts current while the
	// workers run; nil without a catalogue.
	watch *hostWatch
	// feed keeps the machine workflows' summaries current in the
	// catalogue while the workers run (package machinefeed); nil without
	// a catalogue.
	feed *feedRun
	// inventory follows a live mesh config while the workers run; nil when
	// the config is read once.
	inventory *inventory
}

// Start starts both workers, then the hosts' watcher; if the second
// worker fails, the first is stopped.
func (w *Workers) Start() error {
	if err := w.main.Start(); err != nil {
		return err
	}
	if err := w.relays.Start(); err != nil {
		w.main.Stop()
		return fmt.Errorf("relays' task queue: %w", err)
	}
	if w.watch != nil {
		w.watch.start()
	}
	if w.feed != nil {
		w.feed.start()
	}
	if w.inventory != nil {
		w.inventory.start()
	}
	return nil
}

// Stop stops following the config and the hosts' watcher, then both
// workers, the relays' first.
func (w *Workers) Stop() {
	if w.inventory != nil {
		w.inventory.stop()
	}
	if w.watch != nil {
		w.watch.stop()
	}
	if w.feed != nil {
		w.feed.stop()
	}
	w.relays.Stop()
	w.main.Stop()
}

// New builds the worker process's workers (Workers) on the configured
// task queue. Their options are WorkerOptions and RelayWorkerOptions
// (tuning.go) with the deployment of worker.versioning added
// (WithDeployment), one deployment version for both queues; with
// versioning enabled, cfg must name a build ID or the binary must carry one
// (see BuildID), which the worker's command (package workercmd) checks
// before calling New. With a catalogue in deps, the Workers also watch
// every host of the config into it while they run (package fleetwatch),
// and keep a feed of the machine workflows' summaries in it (package
// machinefeed), so that status and the fleet page read both from it. With a live config
// (*config.Live) the Workers follow its file while they run (inventory.go):
// machines join and leave without a restart.
func New(c client.Client, mesh config.Source, configDir string, deps Deps, log zerolog.Logger) *Workers {
	cfg := mesh.Current()
	w := worker.New(c, cfg.Temporal.TaskQueue, WithDeployment(WorkerOptions(), cfg.Worker.Versioning))
	Register(w, &activities.Activities{
		Mesh:         mesh,
		Catalogue:    deps.Catalogue,
		Builder:      deps.Builder,
		Hosts:        deps.Hosts,
		Temporal:     c,
		Plans:        activities.NewTemporalPlans(c, log),
		ConfigDir:    configDir,
		PollInterval: deps.PollInterval,
		Log:          log,
	})
	relays := worker.New(c, meshapi.RelayTaskQueue(cfg.Temporal.TaskQueue), WithDeployment(RelayWorkerOptions(), cfg.Worker.Versioning))
	registerRelay(relays)
	ws := &Workers{main: w, relays: relays}
	if deps.Catalogue != nil {
		ws.watch = newHostWatch(cfg, deps.Catalogue, log)
		ws.feed = &feedRun{feed: machinefeed.New(machinefeed.Visibility{Client: c, Namespace: cfg.Temporal.Namespace, TaskQueue: cfg.Temporal.TaskQueue},
			machinefeed.Options{Keep: deps.Catalogue, Log: log.With().Str("component", "machine-feed").Logger()})}
	}
	if live, ok := mesh.(*config.Live); ok {
		live.Admitting(admitted(c, live))
		ws.inventory = &inventory{live: live, c: c, watch: ws.watch, log: log.With().Str("component", "inventory").Logger()}
	}
	return ws
}

// Run runs the workers until ctx ends, then stops them cleanly (in-flight
// activity attempts are given the SDK's stop timeout to finish). started,
// if not nil, is called once the workers poll (readiness).
func Run(ctx context.Context, w *Workers, started ...func()) error {
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	for _, f := range started {
		f()
	}
	<-ctx.Done()
	w.Stop()
	return nil
}
