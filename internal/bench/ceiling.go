package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/meshroll/meshroll/internal/bench/benchwf"
	"github.com/meshroll/meshroll/internal/bench/hist"
	"github.com/meshroll/meshroll/internal/workerapp"
)

// ceiling measures what the dev server itself allows on this machine, with
// a worker of the same options as meshroll's: no-op activities one after
// another, as many at once as the largest fan-out plan ran, the same
// spread over as many workflows as its machines (spread), and as many
// one-activity workflows at once as the footprint scenario's plans.
func (b *bench) ceiling(ctx context.Context, run int) error {
	c := b.srv.Client()
	queue := fmt.Sprintf("bench-engine-%d", run)
	w := worker.New(c, queue, workerapp.WorkerOptions())
	benchwf.Register(w, &benchwf.Activities{Client: c})
	if err := w.Start(); err != nil {
		return fmt.Errorf("start engine worker: %w", err)
	}
	defer w.Stop()

	seq := b.sz.sequential
	id := fmt.Sprintf("bench-engine-seq-%d", run)
	if err := execute(ctx, c, id, queue, benchwf.SingleWorkflowType, benchwf.SingleInput{Activities: seq}); err != nil {
		return err
	}
	events, err := hist.Events(ctx, c, id)
	if err != nil {
		return err
	}
	b.t.Add("engine", fmt.Sprintf("no-op activity in sequence (%d in one workflow)", seq), "ms", "", millis(hist.Duration(events))/float64(seq))

	n := max(b.maxPlanActivities, 1)
	id = fmt.Sprintf("bench-engine-fan-%d", run)
	before, err := b.srv.Usage()
	if err != nil {
		return err
	}
	if err := execute(ctx, c, id, queue, benchwf.FanOutWorkflowType, benchwf.FanOutInput{Activities: n}); err != nil {
		return err
	}
	after, err := b.srv.Usage()
	if err != nil {
		return err
	}
	if events, err = hist.Events(ctx, c, id); err != nil {
		return err
	}
	b.t.Add("engine", fmt.Sprintf("no-op activities at once in one workflow (%d, as the largest fan-out plan ran; at most %d pending)", n, benchwf.MaxPending), "/s", "", float64(n)/hist.Duration(events).Seconds())
	rate := float64(hist.Tasks(events)) / hist.Duration(events).Seconds()
	b.t.Add("engine", "server tasks a second, same workflow (the fan-out plans' ceiling)", "/s", "", rate)
	cpuPerTask := (after.CPU - before.CPU) / time.Duration(max(hist.Tasks(events), 1))
	b.t.Add("engine", "dev server CPU per server task, same workflow (user+system)", "ms", "", millis(cpuPerTask))
	spread, err := b.spread(ctx, c, queue, run)
	if err != nil {
		return err
	}
	b.t.Add("engine", fmt.Sprintf("server tasks a second, spread over %d workflows each started by a signal (the first plans' ceiling)", spread.machines), "/s", "", spread.first)
	b.t.Add("engine", fmt.Sprintf("server tasks a second, spread over %d running workflows each signalled (the next plans' ceiling)", spread.machines), "/s", "", spread.next)
	b.t.Add("engine", fmt.Sprintf("dev server CPU per server task, spread over %d running workflows (user+system)", spread.machines), "ms", "", millis(spread.cpuPerTask))
	b.readCeilings(rate, cpuPerTask, spread)

	p := b.sz.footprint
	t0 := time.Now()
	errs := make([]error, p)
	var wg sync.WaitGroup
	for i := range p {
		wg.Go(func() {
			errs[i] = execute(ctx, c, fmt.Sprintf("bench-engine-one-%d-%03d", run, i), queue, benchwf.SingleWorkflowType, benchwf.SingleInput{Activities: 1})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	b.t.Add("engine", fmt.Sprintf("one-activity workflows at once (%d)", p), "/s", "", float64(p)/time.Since(t0).Seconds())
	return nil
}

func execute(ctx context.Context, c client.Client, id, queue, typ string, in any) error {
	r, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, typ, in)
	if err != nil {
		return fmt.Errorf("start %s: %w", id, err)
	}
	if err := r.Get(ctx, nil); err != nil {
		return fmt.Errorf("%s: %w", id, err)
	}
	return nil
}
