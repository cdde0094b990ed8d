package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/meshroll/meshroll/internal/bench/benchwf"
	"github.com/meshroll/meshroll/internal/bench/direct"
	"github.com/meshroll/meshroll/internal/bench/hist"
	"github.com/meshroll/meshroll/internal/bench/stack"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/workerapp"
)

// contentionMesh is one machine running k modules, one plan each.
func (b *bench) contentionMesh(ctx context.Context, name, queue string, k int) (*stack.Mesh, []string, error) {
	mods := make([]string, k)
	for i := range mods {
		mods[i] = fmt.Sprintf("c%02d", i)
	}
	m, err := stack.NewMesh(ctx, b.srv, stack.MeshOptions{
		TaskQueue: queue, Machines: []stack.MachineSpec{{Name: name, Tier: 1, Modules: mods}}, Modules: mods, Log: b.log,
	})
	return m, mods, err
}

// contention starts k plans, one per module of one machine, at once, and
// reads from the machine workflow's history how fast it served their
// pushes; then k requesters take a signal-based mutex on a machine of the
// same shape and push inside it, and the mutex's history says how fast it
// served them.
func (b *bench) contention(ctx context.Context, run int) error {
	k := b.sz.contention
	c := b.srv.Client()

	machine := fmt.Sprintf("c%d-m1", run)
	m, mods, err := b.contentionMesh(ctx, machine, fmt.Sprintf("bench-contention-%d", run), k)
	if err != nil {
		return err
	}
	defer func() { _ = m.Close() }()
	if err := m.StartWorker(ctx); err != nil {
		return err
	}
	commit, err := m.Commit(ctx)
	if err != nil {
		return err
	}
	t0 := time.Now()
	if _, err := rollOut(ctx, c, m, mods, commit); err != nil {
		return err
	}
	all := time.Since(t0)
	me, err := hist.Events(ctx, c, meshapi.MachineID(machine))
	if err != nil {
		return err
	}
	served := pushWindow(me)
	scenario := fmt.Sprintf("contention %d", k)
	b.t.Add(scenario, fmt.Sprintf("meshroll: pushes served per second at the machine (%d plans)", k), "/s", "", float64(k)/served.Seconds())
	b.t.Add(scenario, "meshroll: all plans, start to converged", "s", "", seconds(all))

	// The baseline, on a fresh machine of the same shape.
	mx, _, err := b.contentionMesh(ctx, fmt.Sprintf("x%d-m1", run), fmt.Sprintf("bench-mutex-%d", run), k)
	if err != nil {
		return err
	}
	defer func() { _ = mx.Close() }()
	acq, wall, err := b.mutexBaseline(ctx, mx, run, mods)
	if err != nil {
		return fmt.Errorf("mutex baseline: %w", err)
	}
	b.t.Add(scenario, "signal mutex: acquisitions (push inside) per second", "/s", "baseline; target: meshroll ≥ this", float64(k)/acq.Seconds())
	b.t.Add(scenario, "signal mutex: all requesters, start to done", "s", "", seconds(wall))
	return nil
}

// pushWindow is, in a machine workflow's history, the time from the first
// push activity scheduled to the last one completed.
func pushWindow(events []*historypb.HistoryEvent) time.Duration {
	first, _, _ := hist.Span(events, hist.ActivityScheduled("PushAndAnswer"))
	_, last, _ := hist.Span(events, hist.Is(enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED))
	return last.Sub(first)
}

func (b *bench) mutexBaseline(ctx context.Context, m *stack.Mesh, run int, mods []string) (acq, wall time.Duration, err error) {
	c := b.srv.Client()
	queue := m.Config.Temporal.TaskQueue
	deps := m.Deps()
	r := &direct.Roller{Mesh: m.Config, ConfigDir: m.Repo, Catalogue: deps.Catalogue, Builder: deps.Builder, Hosts: deps.Hosts, PollInterval: stack.PollInterval}
	commit, err := m.Commit(ctx)
	if err != nil {
		return 0, 0, err
	}
	builds := make([]mesh.Build, len(mods))
	for i, mod := range mods {
		if builds[i], err = r.Build(ctx, mod, commit); err != nil {
			return 0, 0, err
		}
	}
	w := worker.New(c, queue, workerapp.WorkerOptions())
	benchwf.Register(w, &benchwf.Activities{Client: c, Push: func(ctx context.Context, in benchwf.RequesterInput) error {
		return r.Push(ctx, meshapi.Target{Machine: in.Machine, Tier: in.Tier, Modules: in.Modules}, in.Build)
	}})
	if err := w.Start(); err != nil {
		return 0, 0, fmt.Errorf("start mutex worker: %w", err)
	}
	defer w.Stop()

	mutex := fmt.Sprintf("bench-mutex-%d", run)
	var machine string
	for name := range m.Config.Machines {
		machine = name
	}
	t0 := time.Now()
	errs := make([]error, len(mods))
	var wg sync.WaitGroup
	for i := range mods {
		wg.Go(func() {
			run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: fmt.Sprintf("%s-req-%02d", mutex, i), TaskQueue: queue},
				benchwf.RequesterWorkflowType, benchwf.RequesterInput{
					Mutex: mutex, Queue: queue, Machine: machine, Modules: mods, Tier: 1, Build: builds[i], Acquisitions: len(mods),
				})
			if err == nil {
				err = run.Get(ctx, nil)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, 0, err
	}
	wall = time.Since(t0)
	if err := c.GetWorkflow(ctx, mutex, "").Get(ctx, nil); err != nil {
		return 0, 0, fmt.Errorf("mutex workflow: %w", err)
	}
	events, err := hist.Events(ctx, c, mutex)
	if err != nil {
		return 0, 0, err
	}
	first, _, _ := hist.Span(events, hist.Is(enumspb.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED))
	_, last, _ := hist.Span(events, func(e *historypb.HistoryEvent) bool {
		return e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED &&
			e.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == benchwf.SignalRelease
	})
	return last.Sub(first), wall, nil
}
