package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/bench/hist"
	"github.com/meshroll/meshroll/internal/bench/report"
	"github.com/meshroll/meshroll/internal/bench/stack"
	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/plans"
	"github.com/meshroll/meshroll/internal/registry"
)

// Sizes.
const (
	SizeSmoke = "smoke"
	SizeFull  = "full"
)

// Options configures Run.
type Options struct {
	Size    string
	Runs    int
	Pprof   string
	Verbose bool
	// Only, when not empty, names the scenarios to run (overhead, fan-out,
	// batched, contention, footprint, engine, fleet-page); the rest are
	// skipped.
	Only []string
	// Machines, when not empty, replaces the size's fan-out sizes (the
	// first is the ideal the others are read against).
	Machines []int
	// FleetPage, when positive, is the fleet page scenario's size in
	// place of the size's.
	FleetPage int
	// Command is printed above the table.
	Command string
	// Server is the engine settings an A/B toggles: the workers' gRPC
	// compression and the server's eager activity dispatch.
	Server stack.ServerOptions
	// Runtime is the fan-out agents' runtime (stack.MeshOptions.Runtime):
	// noop, or exec or docker to time pushes of a real build to healthy.
	Runtime string
	// DockerSocket is the engine of Runtime docker.
	DockerSocket string
	// Histories, when set, is a directory that receives the history of
	// every fan-out plan and of its machine workflows (hist.Keep), to read
	// where a slow plan's time went.
	Histories string
}

// sizes are each scenario's sizes.
type sizes struct {
	fanout     []int // machines; the first is the one-machine-per-tier plan
	contention int   // plans to one machine
	footprint  int   // plans in flight
	sequential int   // no-op activities in a row, for the engine's ceiling
	batched    batchedSize
	fleetPage  int // machines of the fleet page's matrix
}

func sizesFor(size string) (sizes, int, error) {
	switch size {
	case SizeSmoke:
		return sizes{fanout: []int{3, 10}, contention: 10, footprint: 20, sequential: 10,
			batched: batchedSize{machines: 20, maxParallel: 5, minHealthy: batchedMinHealthySmoke}, fleetPage: 10}, 1, nil
	case SizeFull:
		return sizes{fanout: []int{3, 10, 100, 1000}, contention: 50, footprint: 200, sequential: 20,
			batched: batchedSize{machines: 100, maxParallel: 10, minHealthy: batchedMinHealthyFull}, fleetPage: 1000}, 3, nil
	}
	return sizes{}, 0, fmt.Errorf("size %q: want %s or %s", size, SizeSmoke, SizeFull)
}

// bench is one Run's shared state.
type bench struct {
	o     Options
	sz    sizes
	srv   *stack.Server
	reg   registry.Options
	log   zerolog.Logger
	progw io.Writer
	t     *report.Table
	// maxPlanActivities is the activity count of the largest fan-out plan
	// (plan and machine workflows), for the engine's ceiling.
	maxPlanActivities int
	costs             []cost // first plans, which start the machine workflows
	costsNext         []cost // next plans, machine workflows running
	// ceilings are this run's fan-out plans, until the engine scenario
	// has measured the rate to read them against.
	ceilings []pendingCeiling
}

// runs reports whether the scenario is among those run.
func (b *bench) runs(scenario string) bool {
	return len(b.o.Only) == 0 || slices.Contains(b.o.Only, scenario)
}

// Run runs every scenario o.Runs times and returns the table. progress
// receives one line per scenario run when o.Verbose is set. When a
// scenario fails, the table of what was measured before it comes back
// with the error, so that a long sitting's finished rows are not lost.
func Run(ctx context.Context, o Options, progress io.Writer) (*report.Table, error) {
	sz, runs, err := sizesFor(o.Size)
	if err != nil {
		return nil, err
	}
	if o.Runs <= 0 {
		o.Runs = runs
	}
	if len(o.Machines) > 0 {
		sz.fanout = o.Machines
	}
	if o.FleetPage > 0 {
		sz.fleetPage = o.FleetPage
	}
	b := &bench{o: o, sz: sz, t: &report.Table{}, log: zerolog.Nop(), progw: io.Discard}
	if o.Verbose {
		b.log = zerolog.New(zerolog.ConsoleWriter{Out: progress}).Level(zerolog.WarnLevel).With().Timestamp().Logger()
		b.progw = progress
	}
	if o.Histories != "" {
		if err := os.MkdirAll(o.Histories, 0o755); err != nil {
			return nil, fmt.Errorf("histories dir: %w", err)
		}
	}
	if o.Pprof != "" {
		if err := os.MkdirAll(o.Pprof, 0o755); err != nil {
			return nil, fmt.Errorf("pprof dir: %w", err)
		}
		stopProfile, err := profile(o.Pprof)
		if err != nil {
			return nil, err
		}
		defer stopProfile()
	}
	started := time.Now()
	srvLog := io.Discard
	if o.Verbose {
		srvLog = progress
	}
	b.srv, err = stack.StartServer(ctx, b.log, srvLog, o.Server)
	if err != nil {
		return nil, err
	}
	defer func() { _ = b.srv.Stop() }()

	regDir, err := os.MkdirTemp("", "meshroll-bench-registry-")
	if err != nil {
		return nil, fmt.Errorf("registry dir: %w", err)
	}
	defer func() { _ = os.RemoveAll(regDir) }()
	reg, err := registry.New(regDir)
	if err != nil {
		return nil, fmt.Errorf("embedded registry: %w", err)
	}
	url, err := reg.Start("127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("embedded registry: %w", err)
	}
	defer func() { _ = reg.Close() }()
	b.reg = registry.Options{Address: url}

	scenarios := []struct {
		name string
		fn   func(context.Context, int) error
	}{
		{"overhead", b.overhead},
		{"fan-out", b.fanout},
		{"batched", b.batched},
		{"contention", b.contention},
		{"footprint", b.footprint},
		{"engine", b.ceiling},
		{"fleet-page", b.fleetPage},
	}
	for run := 0; run < o.Runs; run++ {
		for _, s := range scenarios {
			if !b.runs(s.name) {
				continue
			}
			t0 := time.Now()
			if err := s.fn(ctx, run); err != nil {
				b.header(started)
				return b.t, fmt.Errorf("%s, run %d: %w", s.name, run+1, err)
			}
			b.progress("%s run %d/%d done in %s", s.name, run+1, o.Runs, time.Since(t0).Round(time.Millisecond))
		}
	}
	b.fitCosts()
	b.header(started)
	return b.t, nil
}

// header says what the table was measured on, and with what.
func (b *bench) header(started time.Time) {
	o := b.o
	store := "in memory"
	if o.Server.DBFile != "" {
		store = "in a SQLite file"
	}
	workers := "workers' grpc_compression " + cmp.Or(o.Server.Compression, config.CompressionAuto) + "; push.local_activity " + onOff(o.Server.LocalPush) + "; push.hand_window " + strconv.Itoa(meshapi.Window(o.Server.HandWindow))
	server := b.srv.CLIVersion + " (dev server, " + store + ", one task-queue partition, eager activities " + onOff(!o.Server.NoEagerActivities) +
		"; " + workers + "; priority matcher " + onOff(!o.Server.OldMatcher) + "; search-attribute cache " + onOff(o.Server.SACache) + ")"
	if b.srv.Kind == stack.ServerProduction {
		server = b.srv.ServerVersion + " (production topology: temporal-server on PostgreSQL " + b.srv.PostgresVersion +
			", deploy/temporal/dynamicconfig.yaml plus one task-queue partition; " + workers + ")"
	}
	b.t.Header = []string{
		"machine: " + report.Machine(),
		"date: " + report.Date(started),
		"temporal: " + server,
		"fan-out agents' runtime: " + cmp.Or(o.Runtime, "noop"),
		"command: " + o.Command,
		fmt.Sprintf("size: %s, %d run(s) each, whole bench %s", o.Size, o.Runs, time.Since(started).Round(time.Second)),
	}
	if b.srv.Kind == stack.ServerProduction {
		// The figures keep their names across servers, so that two
		// tables read side by side.
		counted := "temporal-server's CPU here (PostgreSQL's is not counted: it runs elsewhere)"
		if b.srv.CountsPostgres() {
			counted = "temporal-server's and PostgreSQL's CPU together here (the postmaster and its backends)"
		}
		b.t.Header = append(b.t.Header, `note: the figures named "dev server CPU" are `+counted)
	}
}

func (b *bench) progress(format string, args ...any) {
	_, _ = fmt.Fprintf(b.progw, "bench: "+format+"\n", args...)
}

// profile writes the bench process's CPU profile (the in-process worker
// and agents) until the returned func, and then a heap profile.
func profile(dir string) (func(), error) {
	f, err := os.Create(filepath.Join(dir, "bench-cpu.pprof"))
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
		if hf, err := os.Create(filepath.Join(dir, "bench-heap.pprof")); err == nil {
			runtime.GC()
			_ = pprof.WriteHeapProfile(hf)
			_ = hf.Close()
		}
	}, nil
}

// rollOut starts one plan per module at commit on m's task queue, with
// its push policy, and waits until each converged; it returns the plans.
func rollOut(ctx context.Context, c client.Client, m *stack.Mesh, modules []string, commit string) ([]string, error) {
	ids, err := startPlans(ctx, c, m.Config.Temporal.TaskQueue, m.Config.PushPolicy(), modules, commit)
	if err != nil {
		return nil, err
	}
	return ids, waitPlans(ctx, c, ids, planDeadline(len(m.Config.Machines)))
}

// planDeadline is how long a plan of n machines may take before the bench
// calls it stuck: 15 minutes, or 200 ms a machine on a larger fleet (a
// 10,000-machine plan has taken 7 to more than 15 minutes on two cores,
// the dev server overloaded).
func planDeadline(n int) time.Duration {
	return max(15*time.Minute, time.Duration(n)*200*time.Millisecond)
}

// startPlans starts one plan per module at commit, all at once.
func startPlans(ctx context.Context, c client.Client, queue string, policy meshapi.PushPolicy, modules []string, commit string) ([]string, error) {
	ids := make([]string, len(modules))
	errs := make([]error, len(modules))
	var wg sync.WaitGroup
	for i, m := range modules {
		wg.Go(func() {
			st, err := plans.Start(ctx, c, queue, meshapi.PlanInput{Module: m, Commit: commit, Policy: policy})
			ids[i], errs[i] = st.ID, err
		})
	}
	wg.Wait()
	return ids, errors.Join(errs...)
}

// waitPlans waits for every plan and fails unless each converged.
func waitPlans(ctx context.Context, c client.Client, ids []string, deadline time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			var st meshapi.PlanState
			if err := planResult(ctx, c, id, &st); err != nil {
				errs[i] = fmt.Errorf("wait for plan %s: %w%s", id, err, closeReason(ctx, c, id))
				return
			}
			if st.State != meshapi.PlanConverged {
				errs[i] = fmt.Errorf("plan %s ended %s, want converged: %s", id, st.State, st.Reason)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// planResult waits for plan id's result into st. A wait the server ends
// with a deadline while ctx still runs is asked again: an overloaded dev
// server times out its own long polls for the result.
func planResult(ctx context.Context, c client.Client, id string, st *meshapi.PlanState) error {
	for {
		err := meshapi.PlanOutcome(c.GetWorkflow(ctx, id, "").Get(ctx, st), st)
		var timedOut *serviceerror.DeadlineExceeded
		if err == nil || ctx.Err() != nil || !errors.As(err, &timedOut) && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
	}
}

// closeReason is what the last event of a workflow that did not complete
// says, for the error: a termination's reason, a failure's message.
func closeReason(ctx context.Context, c client.Client, id string) string {
	events, err := hist.Events(ctx, c, id)
	if err != nil || len(events) == 0 {
		return ""
	}
	last := events[len(events)-1]
	if a := last.GetWorkflowExecutionTerminatedEventAttributes(); a != nil {
		return fmt.Sprintf(" (terminated by %q: %s; %d events)", a.GetIdentity(), a.GetReason(), len(events))
	}
	if a := last.GetWorkflowExecutionFailedEventAttributes(); a != nil {
		return fmt.Sprintf(" (failed: %s; %d events)", a.GetFailure().GetMessage(), len(events))
	}
	return fmt.Sprintf(" (last event %s; %d events)", last.GetEventType(), len(events))
}

func seconds(d time.Duration) float64 { return d.Seconds() }
func millis(d time.Duration) float64  { return float64(d) / float64(time.Millisecond) }

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
