// Package demo is `starter demo`: a guided, real re-enactment of the
// 2026-10-02 incident against a running Temporal server and OCI registry
// (the dev stack's). It brings up its own small mesh in process, so it never
// touches the operator's checkout or machines: a scratch git repository
// holding copies of examples/controller and examples/host, a worker on a
// task queue of its own with a SQLite catalogue, the go builder pushing real
// images, and two host agents running them as real processes (the exec
// runtime). Then it makes two merges a minute apart in the incident's shape:
// a host plan composes the control node while controller v1 runs and waits
// at its gate; controller v2 is merged and rolled out; the host plan goes on
// and, instead of pushing back the controller v1 it recorded, is rebased at
// send time onto the v2 the control node runs. It ends with each machine's
// journal as the agents' HTTP API serves it.
package demo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/rs/zerolog"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/build"
	"github.com/meshroll/meshroll/internal/catalogue/sqlcat"
	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/logging"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/payloads"
	"github.com/meshroll/meshroll/internal/plans"
	"github.com/meshroll/meshroll/internal/registry"
	"github.com/meshroll/meshroll/internal/workerapp"
)

// Names of the demo mesh.
const (
	// ModuleController is the demo's control-plane module.
	ModuleController = "mesh-controller"
	// ModuleHost is the module every demo machine runs.
	ModuleHost = "host"
	// MachineEdge is the tier-1 machine, running the host module.
	MachineEdge = "demo-edge"
	// MachineControl is the tier-2 control node, running both modules.
	MachineControl = "demo-control"
	// TaskQueuePrefix starts the demo worker's task queue; the rest is
	// random, so that a demo never takes another worker's tasks.
	TaskQueuePrefix = "meshroll-demo-"
	// DefaultRepository is where the demo's images go in the registry,
	// apart from the dev mesh's own.
	DefaultRepository = "meshroll-demo"
	// DefaultGap is the time between the two merges, as in the incident.
	DefaultGap = time.Minute
	// JournalEntries is how many of each machine's latest journal entries
	// the demo shows.
	JournalEntries = 10
	// DefaultNamespace is the Temporal namespace the demo runs in, created
	// if missing, so that its plans and machine workflows stay out of the
	// dev mesh's own list in the Web UI.
	DefaultNamespace = "meshroll-demo"
	// Retention is how long the demo's namespace keeps ended runs.
	Retention = 24 * time.Hour
)

// ErrNotDemonstrated is returned (wrapped) when the run did not show what it
// should: the host plan did not report the rebase, or the control plane was
// downgraded.
var ErrNotDemonstrated = errors.New("the demo did not show the rebase")

// Options configure a run.
type Options struct {
	// Client is connected to the Temporal server, in Namespace.
	Client client.Client
	// Namespace is Client's namespace, which the demo registers when it is
	// missing; DefaultNamespace unless the operator chose another.
	Namespace string
	// Registry is where images are pushed and pulled.
	Registry registry.Options
	// Repository is the image path prefix (default DefaultRepository).
	Repository string
	// Examples is the directory holding controller/ and host/.
	Examples string
	// Dir is the scratch directory; empty means a temporary one, removed
	// at the end. A given one must be empty or absent and is kept.
	Dir string
	// Gap is the time between the two merges (default DefaultGap).
	Gap time.Duration
	// Out receives the narration, and only it: the demo's worker and
	// agents log to demo.log in the scratch directory, which is kept when
	// the run fails.
	Out io.Writer
}

// Preflight checks the tools and the registry the demo needs, each failure
// one line naming the fix.
func Preflight(ctx context.Context, reg registry.Options) error {
	for _, tool := range []string{"go", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not found on PATH; the demo builds real images with it (install %s)", tool, tool)
		}
	}
	if err := pingRegistry(ctx, reg); err != nil {
		return fmt.Errorf("registry %s unreachable (%v); start the dev stack first: go run ./worker --dev", reg.Address, err)
	}
	return nil
}

// run is one demo run's state.
type run struct {
	o     Options
	began time.Time
	sum   Summary
	cfg   *config.Config
	hosts map[string]*demoHost
}

// Run runs the demo. The summary is filled as far as the run got, also when
// it returns an error; an error wrapping ErrNotDemonstrated means the run
// completed but did not show the rebase.
func Run(ctx context.Context, o Options) (_ Summary, err error) {
	if o.Repository == "" {
		o.Repository = DefaultRepository
	}
	if o.Gap <= 0 {
		o.Gap = DefaultGap
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	r := &run{o: o, began: time.Now(), hosts: map[string]*demoHost{}, sum: Summary{Journals: map[string][]JournalLine{}}}
	if err := Preflight(ctx, o.Registry); err != nil {
		return r.sum, err
	}

	dir, cleanup, err := scratchDir(o.Dir)
	if err != nil {
		return r.sum, err
	}
	defer func() {
		if err != nil && o.Dir == "" {
			r.say("kept the scratch directory %s for its log (demo.log)", dir)
			return
		}
		cleanup()
	}()
	if o.Dir != "" {
		r.sum.Dir = dir
	}
	logFile, err := os.Create(filepath.Join(dir, "demo.log"))
	if err != nil {
		return r.sum, fmt.Errorf("demo log: %w", err)
	}
	defer logFile.Close()
	log := zerolog.New(logFile).With().Timestamp().Logger()
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	r.sum.TaskQueue = TaskQueuePrefix + hex.EncodeToString(suffix)

	r.say("setting up a demo mesh of its own (namespace %s, task queue %s), so nothing of yours is touched", r.o.Namespace, r.sum.TaskQueue)
	rp, c1, err := newRepo(ctx, dir, o.Examples, r.sum.TaskQueue)
	if err != nil {
		return r.sum, fmt.Errorf("scratch repository: %w", err)
	}
	for _, m := range []string{MachineEdge, MachineControl} {
		h, err := startHost(ctx, m, filepath.Join(dir, "hosts", m), o.Registry, log)
		if err != nil {
			return r.sum, err
		}
		r.hosts[m] = h
		defer func() { err = errors.Join(err, h.close()) }()
	}
	cfg := r.config()
	r.cfg = cfg
	if err := cfg.Validate(); err != nil {
		return r.sum, fmt.Errorf("demo mesh: %w", err)
	}
	cat, err := sqlcat.Open(ctx, "sqlite:"+filepath.Join(dir, "catalogue.db"))
	if err != nil {
		return r.sum, fmt.Errorf("demo catalogue: %w", err)
	}
	defer func() { err = errors.Join(err, cat.Close()) }()
	if err := workerapp.EnsureNamespace(ctx, o.Client, o.Namespace, Retention, log); err != nil {
		return r.sum, fmt.Errorf("demo namespace: %w", err)
	}
	if err := r.clearStaleMachines(ctx); err != nil {
		return r.sum, err
	}
	if err := workerapp.EnsureSearchAttributes(ctx, o.Client, o.Namespace, log); err != nil {
		return r.sum, fmt.Errorf("search attributes: %w", err)
	}
	// The demo's worker logs to demo.log, as its host agents do, through a
	// client of its own on the starter's connection: the SDK's workers log
	// through their client, and the starter's writes to the terminal,
	// where a poll cut short at the worker's stop would break into the
	// narration.
	wc, err := client.NewClientFromExisting(o.Client, client.Options{Namespace: o.Namespace, Logger: logging.Temporal(log), DataConverter: payloads.Converter})
	if err != nil {
		return r.sum, fmt.Errorf("demo worker's client: %w", err)
	}
	defer wc.Close()
	w := workerapp.New(wc, cfg, dir, workerapp.Deps{
		Catalogue: cat,
		Builder:   &build.Go{Options: build.Options{Registry: o.Registry, Repository: o.Repository}},
		Hosts:     &config.Hosts{Mesh: cfg},
	}, log)
	if err := w.Start(); err != nil {
		return r.sum, fmt.Errorf("demo worker: %w", err)
	}
	defer func() {
		w.Stop()
		r.endMachines()
	}()
	r.say("scratch repository %s with %s and %s at v1, committed on main (%s)", dir, modulePath(ModuleController), modulePath(ModuleHost), short(c1))
	r.say("machines: %s (tier 1: host) at %s, %s (tier 2, the control plane: mesh-controller, host) at %s",
		MachineEdge, r.hosts[MachineEdge].url, MachineControl, r.hosts[MachineControl].url)

	if err := r.script(ctx, rp, c1); err != nil {
		return r.sum, err
	}
	return r.sum, r.verdict()
}

// script is the incident, step by step.
func (r *run) script(ctx context.Context, rp *repo, c1 string) error {
	r.step(1, "merge controller v1 and host v1; both roll out")
	k1, err := r.start(ctx, ModuleController, c1)
	if err != nil {
		return err
	}
	h1, err := r.start(ctx, ModuleHost, c1)
	if err != nil {
		return err
	}
	for _, id := range []string{k1, h1} {
		if _, err := r.converge(ctx, id); err != nil {
			return err
		}
	}
	if err := r.showRuns(ctx, MachineControl); err != nil {
		return err
	}

	r.step(2, "merge host v2 with a gate before tier 2 (the control node)")
	c2, err := rp.change(ctx, ModuleHost, 2)
	if err != nil {
		return err
	}
	h2, err := r.start(ctx, ModuleHost, c2, 2)
	if err != nil {
		return err
	}
	if err := r.waitGated(ctx, h2); err != nil {
		return err
	}
	rec, err := recorded(ctx, r.o.Client, h2, MachineControl, ModuleController)
	if err != nil {
		return err
	}
	rec.Plan = h2
	r.sum.ControlPlane = ControlPlane{Machine: MachineControl, Module: ModuleController, Before: rec}
	r.say("the host plan composed %s while controller v1 ran: it recorded controller generation %d (%s) for %s, and waits at its gate",
		MachineControl, rec.Generation, short(rec.Digest), MachineControl)

	r.step(3, "a minute later, merge controller v2")
	r.say("waiting %s, as the two merges of the incident were a minute apart", r.o.Gap)
	select {
	case <-time.After(r.o.Gap):
	case <-ctx.Done():
		return ctx.Err()
	}
	c3, err := rp.change(ctx, ModuleController, 2)
	if err != nil {
		return err
	}
	k2, err := r.start(ctx, ModuleController, c3)
	if err != nil {
		return err
	}
	k2st, err := r.converge(ctx, k2)
	if err != nil {
		return err
	}
	if err := r.showRuns(ctx, MachineControl); err != nil {
		return err
	}

	r.step(4, "approve the stale host plan: it still holds controller v1 for "+MachineControl)
	if _, err := plans.Control(ctx, r.o.Client, h2, meshapi.UpdateApprove, meshapi.ApproveInput{By: "starter demo"}); err != nil {
		return fmt.Errorf("approve %s: %w", h2, err)
	}
	r.say("approved %s", h2)
	h2st, err := r.converge(ctx, h2)
	if err != nil {
		return err
	}
	cn, _ := h2st.Machine(MachineControl)
	r.sum.Rebased = append([]string{}, cn.Rebased...)
	r.say("the host plan on %s: %s, seq %d, rebased %v", MachineControl, cn.State, cn.Seq, cn.Rebased)
	rep, err := r.report(ctx, MachineControl)
	if err != nil {
		return err
	}
	if rc, ok := rep.Running(ModuleController); ok {
		r.sum.ControlPlane.After = Version{Digest: rc.Digest, Generation: rc.Generation, Plan: rc.Plan}
	}
	after, newest := r.sum.ControlPlane.After, k2st.Build
	r.sum.ControlPlane.Downgraded = newest == nil || after.Generation < newest.Generation || after.Digest != newest.Digest
	if err := r.showReport(rep); err != nil {
		return err
	}
	if !r.sum.ControlPlane.Downgraded {
		r.say("%s still runs controller generation %d (the host plan had recorded %d): rebased, NOT downgraded",
			MachineControl, after.Generation, r.sum.ControlPlane.Before.Generation)
	}

	r.step(5, "each machine's journal, read through its host API (latest first)")
	for _, m := range []string{MachineEdge, MachineControl} {
		if err := r.journal(ctx, m); err != nil {
			return err
		}
	}
	r.say("plans (in the Web UI's namespace %s; on the dev stack http://127.0.0.1:8233/namespaces/%s/workflows):", r.o.Namespace, r.o.Namespace)
	for _, p := range r.sum.Plans {
		r.say("  %s  %s", p.ID, withReason(p.State, p.Reason))
	}
	return nil
}

// verdict says whether the run showed the rebase.
func (r *run) verdict() error {
	cp := r.sum.ControlPlane
	switch {
	case !slices.Contains(r.sum.Rebased, ModuleController):
		return fmt.Errorf("%w: the host plan reports rebasing %v on %s, not %s", ErrNotDemonstrated, r.sum.Rebased, MachineControl, ModuleController)
	case cp.Downgraded || cp.After.Generation <= cp.Before.Generation:
		return fmt.Errorf("%w: %s runs controller generation %d after the host plan, which recorded %d: the control plane was downgraded",
			ErrNotDemonstrated, MachineControl, cp.After.Generation, cp.Before.Generation)
	}
	r.say("done: the stale plan was rebased instead of downgrading the control plane")
	return nil
}

// config is the demo mesh, built in code.
func (r *run) config() *config.Config {
	cfg := config.Default()
	cfg.Temporal.Namespace = r.o.Namespace
	cfg.Temporal.TaskQueue = r.sum.TaskQueue
	cfg.Push.RunningTimeout = 2 * time.Minute
	cfg.Push.RetryBudget = time.Minute
	cfg.Registry.Address = r.o.Registry.Address
	cfg.Registry.Repository = r.o.Repository
	// The demo's modules serve nothing to probe: healthy while they run,
	// counted after a second (not the default ten), so the demo stays quick.
	quick := config.DefaultHealth()
	quick.MinHealthy = time.Second
	cfg.Modules = map[string]config.Module{
		ModuleController: {Repo: ".", Path: modulePath(ModuleController), ControlPlane: true, Health: &quick},
		ModuleHost:       {Repo: ".", Path: modulePath(ModuleHost), Health: &quick},
	}
	cfg.Machines = map[string]config.Machine{
		MachineEdge:    {Host: r.hosts[MachineEdge].url, Tier: 1, Modules: []string{ModuleHost}},
		MachineControl: {Host: r.hosts[MachineControl].url, Tier: 2, Modules: []string{ModuleController, ModuleHost}},
	}
	return cfg
}
