// Package activities holds the work the plan and machine workflows hand to
// the outside world: resolving targets from the mesh config, building,
// composing a machine's declaration, handing push requests to machine
// workflows, and the push itself. Every activity takes one typed input from
// meshapi and returns one typed result; each is a thin shell over a small
// interface (build.Builder, catalogue.Catalogue, host.Client) so that the
// real builder, catalogue and host agent drop in without touching workflow
// code.
package activities

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/rs/zerolog"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/meshroll/meshroll/internal/build"
	"github.com/meshroll/meshroll/internal/catalogue"
	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// Hosts gives the host API client of a machine. Credentials stay on the
// worker: no token ever passes through a workflow input or history.
type Hosts interface {
	Host(machine string) (host.Client, error)
}

// Activities is registered with the worker; the workflows call its methods
// through a nil *Activities, which only names them.
type Activities struct {
	Mesh      *config.Config
	Catalogue catalogue.Catalogue
	Builder   build.Builder
	Hosts     Hosts
	// Temporal is used to hand push requests to machine workflows
	// (signal-with-start).
	Temporal client.Client
	// ConfigDir resolves module repositories given relative to the config
	// file.
	ConfigDir string
	// Plans says whether a plan still runs, so that a push queued by a plan
	// an operator terminated is not sent. Nil skips the check (tests of the
	// push alone).
	Plans Plans
	Log   zerolog.Logger
}

// Targets resolves which machines run a module, from the worker's mesh
// config. It is a local activity: cheap, and its answer is recorded in the
// plan's history so the plan keeps the topology it started with.
func (a *Activities) Targets(_ context.Context, in meshapi.TargetsInput) (meshapi.TargetsResult, error) {
	ts, err := a.Mesh.Targets(in.Module)
	if err != nil {
		return meshapi.TargetsResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("module %q is not in the worker's mesh config (known: %v)", in.Module, a.Mesh.ModuleNames()),
			meshapi.ErrUnknownModule, err)
	}
	return meshapi.TargetsResult{Targets: ts}, nil
}

// Build builds the plan's module at its commit and records the build in the
// catalogue.
func (a *Activities) Build(ctx context.Context, in meshapi.BuildInput) (mesh.Build, error) {
	m, ok := a.Mesh.Modules[in.Module]
	if !ok {
		return mesh.Build{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("module %q is not in the worker's mesh config", in.Module), meshapi.ErrUnknownModule, nil)
	}
	repo := m.Repo
	if !filepath.IsAbs(repo) {
		repo = filepath.Join(a.ConfigDir, repo)
	}
	log := a.Log.With().Str("plan", in.Plan).Str("module", in.Module).Str("commit", in.Commit).Logger()
	log.Info().Msg("build started")
	out := build.NewLineWriter(func(line string) { log.Info().Str("output", line).Msg("build output") })
	defer out.Close()
	req := build.Request{
		Module: in.Module, Commit: in.Commit, Repo: repo, Path: m.Path,
		Kind: m.Builder, Main: m.Main, Branch: m.Branch, Command: m.Command, DigestFile: m.DigestFile,
		Output:   out,
		Progress: func() { activity.RecordHeartbeat(ctx) },
	}
	if strings.Contains(m.Repo, "://") {
		req.Source = m.Repo // stable across workers, unlike each clone's origin spelling
	}
	b, err := a.Builder.Build(ctx, req)
	if err != nil {
		log.Error().Err(err).Msg("build failed")
		if build.IsPermanent(err) {
			return mesh.Build{}, temporal.NewNonRetryableApplicationError(err.Error(), meshapi.ErrBuildFailed, err)
		}
		return mesh.Build{}, fmt.Errorf("build %s at %s: %w", in.Module, in.Commit, err)
	}
	if err := a.Catalogue.Record(ctx, b, in.Plan); err != nil {
		if errors.Is(err, catalogue.ErrNotReproducible) {
			return mesh.Build{}, temporal.NewNonRetryableApplicationError(err.Error(), meshapi.ErrBuildFailed, err)
		}
		return mesh.Build{}, fmt.Errorf("record build: %w", err)
	}
	log.Info().Str("digest", b.Digest).Int64("generation", b.Generation).Msg("build recorded")
	return b, nil
}

// Compose writes what the plan intends for one machine: its own module
// pinned to the plan's build, every other module as the machine runs it now,
// and a module the machine lacks at that module's newest build that has
// converged somewhere.
func (a *Activities) Compose(ctx context.Context, in meshapi.ComposeInput) (meshapi.ComposeResult, error) {
	hc, err := a.host(in.Target.Machine)
	if err != nil {
		return meshapi.ComposeResult{}, err
	}
	rep, err := hc.Report(ctx)
	if err != nil {
		return meshapi.ComposeResult{}, fmt.Errorf("compose %s: read host report: %w", in.Target.Machine, err)
	}
	d := mesh.Declaration{Machine: in.Target.Machine, Plan: in.Plan}
	var unknown []string
	for _, name := range in.Target.Modules {
		if name == in.Build.Module {
			d.Containers = append(d.Containers, a.container(in.Build))
			continue
		}
		if r, ok := rep.Running(name); ok {
			c := r.Declared()
			b, known, err := a.Catalogue.Lookup(ctx, r.Digest)
			if err != nil {
				return meshapi.ComposeResult{}, fmt.Errorf("compose %s: look up %s: %w", in.Target.Machine, name, err)
			}
			if known {
				c.Generation = b.Generation
			} else {
				// Never guessed: the host's own claim is not a generation. The
				// push refuses it unless an operator forces it.
				c.Generation = 0
				unknown = append(unknown, fmt.Sprintf("%s runs %s at %s, which the catalogue does not know", in.Target.Machine, name, r.Digest))
			}
			d.Containers = append(d.Containers, c)
			continue
		}
		b, ok, err := a.Catalogue.NewestConverged(ctx, name)
		if err != nil {
			return meshapi.ComposeResult{}, fmt.Errorf("compose %s: newest converged %s: %w", in.Target.Machine, name, err)
		}
		if ok {
			d.Containers = append(d.Containers, a.container(b))
		}
	}
	return meshapi.ComposeResult{Declaration: d, Unknown: unknown}, nil
}

// container is a build as declared with its module's settings.
func (a *Activities) container(b mesh.Build) mesh.Container {
	m := a.Mesh.Modules[b.Module]
	return mesh.Container{
		Module: b.Module, Digest: b.Digest, Generation: b.Generation, Commit: b.Commit,
		Image: b.Image, Args: m.Args, Env: m.Env,
	}
}

// EnqueuePushes hands a tier's push requests to their machine workflows,
// starting a machine workflow on first use (signal-with-start). Requests are
// signals, not updates, so fifty plans waiting on one machine are never
// refused by the server's in-flight update limit; the machine workflow drops
// duplicates by request ID, so a retry of this activity is harmless.
func (a *Activities) EnqueuePushes(ctx context.Context, in meshapi.EnqueueInput) (meshapi.EnqueueResult, error) {
	start := 0
	if activity.HasHeartbeatDetails(ctx) {
		_ = activity.GetHeartbeatDetails(ctx, &start)
	}
	queue := activity.GetInfo(ctx).TaskQueue
	for i := start; i < len(in.Requests); i++ {
		if err := a.handPush(ctx, queue, in.Requests[i]); err != nil {
			return meshapi.EnqueueResult{Enqueued: i}, err
		}
		activity.RecordHeartbeat(ctx, i+1)
	}
	return meshapi.EnqueueResult{Enqueued: len(in.Requests)}, nil
}

// handPush gives r to its machine workflow by signal-with-start on queue,
// starting the workflow if it is not running. Signalled again, a request is
// dropped by the machine workflow as a duplicate.
func (a *Activities) handPush(ctx context.Context, queue string, r meshapi.PushRequest) error {
	_, err := a.Temporal.SignalWithStartWorkflow(ctx, meshapi.MachineID(r.Machine), meshapi.SignalPush, r,
		client.StartWorkflowOptions{
			ID:        meshapi.MachineID(r.Machine),
			TaskQueue: queue,
			// A machine workflow that was terminated is started afresh; it
			// takes its sequence from the host's report.
			WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
			StaticSummary:         a.machineSummary(r.Machine),
			TypedSearchAttributes: temporal.NewSearchAttributes(meshapi.SAMachine.ValueSet(r.Machine)),
		},
		meshapi.MachineWorkflowType, meshapi.MachineInput{Machine: r.Machine})
	if err != nil {
		return fmt.Errorf("hand push for %s to its machine workflow: %w", r.Machine, err)
	}
	return nil
}

// machineSummary is what the Web UI shows for a machine workflow: the
// machine, its tier and the modules it runs.
func (a *Activities) machineSummary(machine string) string {
	m, ok := a.Mesh.Machines[machine]
	if !ok {
		return "machine " + machine
	}
	return fmt.Sprintf("machine %s (tier %d: %s)", machine, m.Tier, strings.Join(m.Modules, ", "))
}

func (a *Activities) host(machine string) (host.Client, error) {
	hc, err := a.Hosts.Host(machine)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), meshapi.ErrUnknownMachine, err)
	}
	return hc, nil
}

// Plans answers whether a plan workflow is still running.
type Plans interface {
	Running(ctx context.Context, plan string) (status string, running bool, err error)
}

// TemporalPlans asks the Temporal service.
type TemporalPlans struct{ Client client.Client }

// Running implements Plans.
func (p TemporalPlans) Running(ctx context.Context, plan string) (string, bool, error) {
	d, err := p.Client.DescribeWorkflow(ctx, plan, "")
	if err != nil {
		return "", false, fmt.Errorf("describe plan %s: %w", plan, err)
	}
	return d.Status.String(), d.Status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, nil
}
