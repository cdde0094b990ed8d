// Package activities holds the work the plan and machine workflows hand to
// the outside world, one file per step of the flow: resolving targets and
// building (this file), composing machines' declarations (compose.go),
// handing a tier's push requests to machine workflows (hand.go), and the
// push itself (push.go, its steps in push_read.go, push_send.go,
// push_wait.go and revert.go), which answers the plan through Plans
// (plans.go). Every activity takes one typed input from meshapi and
// returns one typed result; each is a thin shell over a small interface
// (build.Builder, catalogue.Catalogue, host.Client, Plans) so that the real
// builder, catalogue, host agent and Temporal drop in without touching
// workflow code.
package activities

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/rs/zerolog"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/meshroll/meshroll/internal/build"
	"github.com/meshroll/meshroll/internal/catalogue"
	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/window"
)

// Hosts gives the host API client of a machine. Credentials stay on the
// worker: no token ever passes through a workflow input or history.
type Hosts interface {
	Host(machine string) (host.Client, error)
}

// Activities is registered with the worker; the workflows call its methods
// through a nil *Activities, which only names them.
type Activities struct {
	// Mesh is the mesh config in force: the worker's is live (config.Live),
	// so each activity reads it once, when it starts.
	Mesh      config.Source
	Catalogue catalogue.Catalogue
	Builder   build.Builder
	Hosts     Hosts
	// Temporal is used to hand push requests to machine workflows
	// (signal-with-start).
	Temporal client.Client
	// Plans says whether a plan still runs, so that a push queued by a plan
	// an operator terminated is not sent, and takes a push's answer to its
	// plan.
	Plans Plans
	// ConfigDir resolves module repositories given relative to the config
	// file.
	ConfigDir string
	// PollInterval is how often a push reads the host's report while it
	// waits for a declaration to run; zero means DefaultPollInterval.
	PollInterval time.Duration
	// Windows are the mesh's deployment windows: outside them plans hold
	// (see Holds). Nil is the windows of the config in force; empty allows
	// any time.
	Windows window.Set
	// Clock tells the time the windows are judged at; nil is time.Now. Tests
	// set it to hold a plan at a chosen moment.
	Clock func() time.Time
	Log   zerolog.Logger
}

// Targets resolves which machines run a module, from the worker's mesh
// config, and how each tier is pushed (its batches, failure budget and
// bake, resolved for the machines of the tier that run the module). It is a
// local activity: cheap, and its answer is recorded in the plan's history
// so the plan keeps the topology and policy it started with.
func (a *Activities) Targets(_ context.Context, in meshapi.TargetsInput) (meshapi.TargetsResult, error) {
	res, err := a.targets(in)
	if err != nil {
		// A refusal, not a failure: the plan ends refused either way, and
		// in the result its notify targets hear why.
		return meshapi.TargetsResult{Refused: refusal(err), Notify: a.notifies(in.Module)}, nil
	}
	return res, nil
}

// refusal is err's words without the error type's wrapping.
func refusal(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Message()
	}
	return err.Error()
}

func (a *Activities) targets(in meshapi.TargetsInput) (meshapi.TargetsResult, error) {
	cfg := a.Mesh.Current()
	if err := a.knownModule(in.Module); err != nil {
		return meshapi.TargetsResult{}, err
	}
	ts, err := cfg.Targets(in.Module)
	if err != nil {
		return meshapi.TargetsResult{}, err
	}
	if in.Remove != "" {
		m, err := a.knownMachine(in.Remove)
		if err != nil {
			return meshapi.TargetsResult{}, err
		}
		if slices.Contains(m.Modules, in.Module) {
			return meshapi.TargetsResult{}, permanent(meshapi.ErrInvalidInput, "machine %s runs %s by the worker's mesh config: a sync brings it up, it does not stop it", in.Remove, in.Module)
		}
		ts = []meshapi.Target{{Machine: in.Remove, Tier: m.Tier}}
	}
	res := meshapi.TargetsResult{Targets: ts, RelayAbove: cfg.Push.RelayAbove, RehandAfter: cfg.Push.RehandAfter, HandWindow: cfg.Push.HandWindow, Notify: a.notifies(in.Module)}
	size := map[int]int{}
	for _, t := range ts {
		if size[t.Tier] == 0 {
			res.Tiers = append(res.Tiers, meshapi.TierPolicy{Tier: t.Tier})
		}
		size[t.Tier]++
	}
	for i := range res.Tiers {
		r := cfg.Rollout(res.Tiers[i].Tier, size[res.Tiers[i].Tier])
		res.Tiers[i].MaxParallel, res.Tiers[i].MaxFailed, res.Tiers[i].Bake = r.MaxParallel, r.MaxFailed, r.Bake
		res.Tiers[i].Analysis = r.Analysis
		res.Tiers[i].GroupBy, res.Tiers[i].Groups = groupBudgets(cfg, res.Tiers[i].Tier, ts)
	}
	if err := withinSignalBudget(in.Module, res, size); err != nil {
		return meshapi.TargetsResult{}, err
	}
	return res, nil
}

// planSignalBudget is how many signals of answers one plan may wait for.
// Temporal refuses a workflow run's signals past 10,000
// (history.maximumSignalsPerExecution): an answer refused there would
// leave the plan waiting for good. The rest of the 10,000 is for
// hand-overs retried, measurements and an operator's levers.
const planSignalBudget = 9000

// withinSignalBudget refuses, before anything is built or pushed, a plan
// that could hear more than planSignalBudget signals of answers (see
// planSignals). Only a large plan in many small batches can.
func withinSignalBudget(module string, res meshapi.TargetsResult, size map[int]int) error {
	if signals := planSignals(res, size); signals > planSignalBudget {
		return permanent(meshapi.ErrInvalidInput, "module %s runs on %d machines in batches too small for one plan: it could hear %d signals of answers "+
			"(at least one per batch, however small), and a plan takes at most %d, as Temporal refuses a workflow's signals past 10,000; "+
			"raise max_parallel of its largest tiers, or give its machines to more modules",
			module, len(res.Targets), signals, planSignalBudget)
	}
	return nil
}

// planSignals is the most signals of answers a plan of these targets and
// tiers can hear. A plan of at most push.relay_above machines hears one
// per machine, and one more per machine of its largest analysed tier (a
// failed check puts them back). A larger plan hears its answers through
// relays: meshapi.RelayedSignals per hand-over, which is one per batch of
// its tiers (every machine marked alone a batch of its own), and the
// put-back of its largest analysed tier.
func planSignals(res meshapi.TargetsResult, size map[int]int) int {
	putBack := 0
	for _, tp := range res.Tiers {
		if len(tp.Analysis) > 0 {
			putBack = max(putBack, size[tp.Tier])
		}
	}
	if !meshapi.Relayed(len(res.Targets), res.RelayAbove) {
		return len(res.Targets) + putBack
	}
	alone := map[int]int{}
	for _, t := range res.Targets {
		if t.Alone {
			alone[t.Tier]++
		}
	}
	signals := meshapi.RelayedSignals(putBack)
	for _, tp := range res.Tiers {
		signals += alone[tp.Tier]
		if len(tp.Groups) > 0 {
			signals += groupedSignals(res.Targets, tp)
			continue
		}
		signals += batchSignals(size[tp.Tier]-alone[tp.Tier], tp.MaxParallel)
	}
	return signals
}

// batchSignals is the most signals of answers relayed for n machines
// pushed in batches of batch (0: all at once).
func batchSignals(n, batch int) int {
	if batch <= 0 {
		batch = max(n, 1)
	}
	signals := 0
	for from := 0; from < n; from += batch {
		signals += meshapi.RelayedSignals(min(batch, n-from))
	}
	return signals
}

// buildOnly builds a module at a commit, recording nothing: the plan's
// build records what it builds, the catalogue rebuild only what matches
// the hosts. A build that can never succeed fails for good (ErrBuildFailed).
func (a *Activities) buildOnly(ctx context.Context, in meshapi.BuildInput) (mesh.Build, error) {
	if err := a.knownModule(in.Module); err != nil {
		return mesh.Build{}, err
	}
	m := a.Mesh.Current().Modules[in.Module]
	repo, local := m.RepoDir(a.ConfigDir)
	if !local {
		return mesh.Build{}, temporal.NewNonRetryableApplicationError("modules."+in.Module+".repo: "+m.URLRepoProblem(in.Module), meshapi.ErrBuildFailed, nil)
	}
	log := a.buildLog(in)
	log.Info().Msg("build started")
	out := build.NewLineWriter(func(line string) { log.Info().Str("output", line).Msg("build output") })
	defer out.Close()
	req := build.Request{
		Module: in.Module, Commit: in.Commit, Repo: repo, Path: m.Path,
		Kind: m.Builder, Main: m.Main, Branch: m.Branch, Command: m.Command, DigestFile: m.DigestFile,
		Source:   m.ImageSource(),
		Output:   out,
		Progress: func() { activity.RecordHeartbeat(ctx) },
	}
	b, err := a.Builder.Build(ctx, req)
	if err != nil {
		log.Error().Err(err).Msg("build failed")
		if build.IsPermanent(err) {
			return mesh.Build{}, temporal.NewNonRetryableApplicationError(err.Error(), meshapi.ErrBuildFailed, err)
		}
		return mesh.Build{}, fmt.Errorf("build %s at %s: %w", in.Module, in.Commit, err)
	}
	return b, nil
}

// buildLog is the log of one build: its plan (or lever), module and commit.
func (a *Activities) buildLog(in meshapi.BuildInput) zerolog.Logger {
	return a.Log.With().Str("plan", in.Plan).Str("module", in.Module).Str("commit", in.Commit).Logger()
}

// Build builds a module at a commit (buildOnly) and records the build in
// the catalogue, so that every push can judge it by its generation.
func (a *Activities) Build(ctx context.Context, in meshapi.BuildInput) (mesh.Build, error) {
	b, err := a.buildOnly(ctx, in)
	if err != nil {
		return mesh.Build{}, err
	}
	log := a.buildLog(in)
	if err := a.Catalogue.Record(ctx, b, in.Plan); err != nil {
		if errors.Is(err, catalogue.ErrNotReproducible) {
			return mesh.Build{}, temporal.NewNonRetryableApplicationError(err.Error(), meshapi.ErrBuildFailed, err)
		}
		return mesh.Build{}, fmt.Errorf("record build: %w", err)
	}
	log.Info().Str("digest", b.Digest).Int64("generation", b.Generation).Msg("build recorded")
	return b, nil
}

// report reads what machine's host reports running, and gives the client
// to talk to it further. A machine the worker does not know fails
// permanently (ErrUnknownMachine); an unreachable host is retried.
func (a *Activities) report(ctx context.Context, machine string) (host.Client, mesh.Report, error) {
	hc, err := a.Hosts.Host(machine)
	if err != nil {
		return nil, mesh.Report{}, temporal.NewNonRetryableApplicationError(err.Error(), meshapi.ErrUnknownMachine, err)
	}
	rep, err := hc.Report(ctx)
	if err != nil {
		if msg, ok := a.Mesh.Current().Machines[machine].TokenProblem(machine, err); ok {
			// Retried like any host away (a fixed token is picked up when
			// the worker restarts), in words that say which setting to fix.
			return nil, mesh.Report{}, fmt.Errorf("read report of %s: %s: %w", machine, msg, err)
		}
		return nil, mesh.Report{}, fmt.Errorf("read report of %s: %w", machine, err)
	}
	return hc, rep, nil
}
