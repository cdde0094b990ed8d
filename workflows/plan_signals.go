package workflows

import "go.temporal.io/sdk/workflow"

// planSignals takes every signal the plan listens to (answers, bundles of
// answers, measurements, lifted holds, notify trouble) in one coroutine.
// One coroutine per signal name, as the plan had, kept six blocked
// goroutines per plan: at the footprint benchmark's 200 plans in flight,
// 1,200 of the worker's goroutines and some 9 MiB of its peak memory
// (docs/benchmarks.md, Footprint).
//
// Each time a signal wakes it, the coroutine takes every value waiting,
// name by name in the order the names were added and each name's values in
// arrival order. That is what a coroutine per name, started in that order,
// took in one pass of the workflow's dispatcher, so the plan's state after
// a workflow task, and the commands that follow from it, are the same as
// before: the histories recorded with a coroutine per name replay.
type planSignals struct {
	sel    workflow.Selector
	drains []func()
}

func newPlanSignals(ctx workflow.Context) *planSignals {
	return &planSignals{sel: workflow.NewSelector(ctx)}
}

// onSignal hands take every value of the signal name, in arrival order:
// how the plan takes what machines, analyses and levers tell it. Every
// name is added before start.
func onSignal[T any](ctx workflow.Context, s *planSignals, name string, take func(T)) {
	ch := workflow.GetSignalChannel(ctx, name)
	// The case only wakes the coroutine: the value stays in the channel,
	// for the drain below to take in its turn.
	s.sel.AddReceive(ch, func(workflow.ReceiveChannel, bool) {})
	s.drains = append(s.drains, func() {
		for {
			var v T
			if !ch.ReceiveAsync(&v) {
				return
			}
			take(v)
		}
	})
}

// start runs the coroutine, for the life of the plan; drained is called
// each time it has taken what came.
func (s *planSignals) start(ctx workflow.Context, drained func()) {
	workflow.Go(ctx, func(gctx workflow.Context) {
		for {
			s.sel.Select(gctx)
			for _, drain := range s.drains {
				drain()
			}
			drained()
		}
	})
}
