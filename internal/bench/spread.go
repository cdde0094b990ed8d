package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/bench/benchwf"
	"github.com/meshroll/meshroll/internal/bench/hist"
	"github.com/meshroll/meshroll/internal/parallel"
)

// spreadClients is how many requests the spread ceiling has in flight at
// once: as many as a tier's hand-over activities signal with (a few
// activities of activities.fanOut each), enough that the server, not the
// bench's round trips, is the bound.
const spreadClients = 64

// spreadRates is the engine's rate for the plan's own shape: server tasks
// a second over as many workflows as the largest fan-out plan has
// machines, each given one no-op activity by a signal. first is their
// start by signal-with-start, as a first plan starts its machine
// workflows; next is a second signal to each of them running, as a next
// plan finds them. cpuPerTask is the server's CPU per task of next.
type spreadRates struct {
	machines    int
	first, next float64
	cpuPerTask  time.Duration
}

// spreadMachines is the size the spread ceiling is measured at, and the
// one fan-out plan read against it: the largest.
func (b *bench) spreadMachines() int { return slices.Max(b.sz.fanout) }

// rate is the first or the next round's.
func (r spreadRates) rate(next bool) float64 {
	if next {
		return r.next
	}
	return r.first
}

// spread measures spreadRates on the engine scenario's worker (queue). A
// plan's pushes run on a workflow each, which costs the server more per
// task than the one workflow of the same-workflow ceiling (a mutable
// state and a history per machine, no batching of completions into one
// workflow task) and also runs the tasks of many workflows at once: on a
// box where the server is the bound this is what a plan can approach.
func (b *bench) spread(ctx context.Context, c client.Client, queue string, run int) (spreadRates, error) {
	n := b.spreadMachines()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("bench-engine-spread-%d-%05d", run, i)
	}
	if err := parallel.Each(n, spreadClients, func(i int) error {
		_, err := c.SignalWithStartWorkflow(ctx, ids[i], benchwf.SignalWork, nil,
			client.StartWorkflowOptions{ID: ids[i], TaskQueue: queue}, benchwf.HolderWorkflowType, benchwf.HolderInput{Requests: 2})
		if err != nil {
			return fmt.Errorf("start %s: %w", ids[i], err)
		}
		return nil
	}); err != nil {
		return spreadRates{}, err
	}
	if err := settled(ctx, c, ids); err != nil {
		return spreadRates{}, err
	}

	before, err := b.srv.Usage()
	if err != nil {
		return spreadRates{}, err
	}
	if err := parallel.Each(n, spreadClients, func(i int) error {
		if err := c.SignalWorkflow(ctx, ids[i], "", benchwf.SignalWork, nil); err != nil {
			return fmt.Errorf("signal %s: %w", ids[i], err)
		}
		return nil
	}); err != nil {
		return spreadRates{}, err
	}
	if err := parallel.Each(n, spreadClients, func(i int) error {
		if err := c.GetWorkflow(ctx, ids[i], "").Get(ctx, nil); err != nil {
			return fmt.Errorf("%s: %w", ids[i], err)
		}
		return nil
	}); err != nil {
		return spreadRates{}, err
	}
	after, err := b.srv.Usage()
	if err != nil {
		return spreadRates{}, err
	}

	histories := make([][]*historypb.HistoryEvent, n)
	if err := parallel.Each(n, spreadClients, func(i int) error {
		events, err := hist.Events(ctx, c, ids[i])
		histories[i] = events
		return err
	}); err != nil {
		return spreadRates{}, err
	}
	first, next, err := spreadPhases(histories)
	if err != nil {
		return spreadRates{}, err
	}
	return spreadRates{machines: n, first: first.rate(), next: next.rate(),
		cpuPerTask: (after.CPU - before.CPU) / time.Duration(max(next.tasks, 1))}, nil
}

// settled waits until every one of ids has run its first request to the
// end (no workflow task or activity pending), so that the next requests'
// window holds only their own tasks.
func settled(ctx context.Context, c client.Client, ids []string) error {
	for waiting := ids; len(waiting) > 0; {
		busy := make([]bool, len(waiting))
		if err := parallel.Each(len(waiting), spreadClients, func(i int) error {
			d, err := c.DescribeWorkflow(ctx, waiting[i], "")
			if err != nil {
				return fmt.Errorf("describe %s: %w", waiting[i], err)
			}
			busy[i] = d.RawResponse.GetPendingWorkflowTask() != nil || len(d.RawResponse.GetPendingActivities()) > 0
			return nil
		}); err != nil {
			return err
		}
		var still []string
		for i, id := range waiting {
			if busy[i] {
				still = append(still, id)
			}
		}
		if len(still) > 0 {
			select {
			case <-ctx.Done():
				return fmt.Errorf("%d spread workflows still busy: %w", len(still), ctx.Err())
			case <-time.After(200 * time.Millisecond):
			}
		}
		waiting = still
	}
	return nil
}

// phase is the server tasks of one round of requests across the spread
// workflows and the window they took, by the server's clock: from the
// first event of the round in any history to the last.
type phase struct {
	tasks       int
	start, last time.Time
}

func (p *phase) add(events []*historypb.HistoryEvent) {
	if len(events) == 0 {
		return
	}
	p.tasks += hist.Tasks(events)
	s, l := events[0].GetEventTime().AsTime(), events[len(events)-1].GetEventTime().AsTime()
	if p.start.IsZero() || s.Before(p.start) {
		p.start = s
	}
	if l.After(p.last) {
		p.last = l
	}
}

func (p phase) rate() float64 {
	if !p.last.After(p.start) {
		return 0
	}
	return float64(p.tasks) / p.last.Sub(p.start).Seconds()
}

// spreadPhases splits each Holder's history at its second request signal:
// before it the first round (its start with the first request), from it
// the next round.
func spreadPhases(histories [][]*historypb.HistoryEvent) (first, next phase, err error) {
	for _, events := range histories {
		signals := 0
		split := slices.IndexFunc(events, func(e *historypb.HistoryEvent) bool {
			if e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED {
				signals++
			}
			return signals == 2
		})
		if split < 0 {
			return phase{}, phase{}, fmt.Errorf("spread workflow history of %d events has no second request", len(events))
		}
		first.add(events[:split])
		next.add(events[split:])
	}
	return first, next, nil
}
